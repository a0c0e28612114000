/* Every rank but 0 sends tagged messages of different sizes; rank 0 learns of
 * them with MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG), sizes its buffer from the
 * status, then receives exactly that message. */
#include <stdlib.h>

#include "check.h"

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int per_rank = 20;
    if (rank == 0) {
        int expected = (size - 1) * per_rank, got = 0;
        int* next_seq = calloc((size_t)size, sizeof(int));
        while (got < expected) {
            int flag = 0;
            MPI_Status st;
            MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            if (!flag) continue;
            int count;
            MPI_Get_count(&st, MPI_BYTE, &count);
            const int src = st.MPI_SOURCE, seq = st.MPI_TAG;
            CHECK(seq == next_seq[src], "from %d: tag %d, expected %d (order)", src, seq,
                  next_seq[src]);
            CHECK(count == seq * 997, "from %d tag %d: %d bytes", src, seq, count);
            unsigned char* buf = malloc((size_t)count + 1);
            MPI_OK(MPI_Recv(buf, count, MPI_BYTE, src, seq, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int i = 0; i < count; ++i)
                CHECK(buf[i] == pattern(src, seq, (size_t)i), "from %d tag %d byte %d", src, seq,
                      i);
            free(buf);
            ++next_seq[src];
            ++got;
        }
        free(next_seq);
        printf("probe: %d messages matched by Iprobe(ANY_SOURCE, ANY_TAG)\n", got);
    } else {
        for (int seq = 0; seq < per_rank; ++seq) {
            const int n = seq * 997;
            unsigned char* buf = malloc((size_t)n + 1);
            for (int i = 0; i < n; ++i) buf[i] = pattern(rank, seq, (size_t)i);
            MPI_OK(MPI_Send(buf, n, MPI_BYTE, 0, seq, MPI_COMM_WORLD));
            free(buf);
        }
    }
    MPI_OK(MPI_Finalize());
    return 0;
}
