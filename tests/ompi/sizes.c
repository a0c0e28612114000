/* Messages from 0 B to 64 MiB between rank 0 and every other rank, both
 * ways, checked byte by byte: eager, rendezvous and pipelined paths. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void exchange(int rank, int peer, size_t n, int seq, unsigned char* buf) {
    if (rank == 0) {
        for (size_t i = 0; i < n; ++i) buf[i] = pattern(rank, seq, i);
        MPI_OK(MPI_Send(buf, (int)n, MPI_BYTE, peer, seq, MPI_COMM_WORLD));
        memset(buf, 0, n);
        MPI_Status st;
        MPI_OK(MPI_Recv(buf, (int)n, MPI_BYTE, peer, seq, MPI_COMM_WORLD, &st));
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK((size_t)count == n, "got %d bytes back, expected %zu", count, n);
        for (size_t i = 0; i < n; ++i)
            CHECK(buf[i] == pattern(peer, seq, i), "size %zu byte %zu from %d", n, i, peer);
    } else {
        memset(buf, 0, n);
        MPI_Status st;
        MPI_OK(MPI_Recv(buf, (int)n, MPI_BYTE, 0, seq, MPI_COMM_WORLD, &st));
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK((size_t)count == n, "got %d bytes, expected %zu", count, n);
        for (size_t i = 0; i < n; ++i)
            CHECK(buf[i] == pattern(0, seq, i), "size %zu byte %zu", n, i);
        for (size_t i = 0; i < n; ++i) buf[i] = pattern(rank, seq, i);
        MPI_OK(MPI_Send(buf, (int)n, MPI_BYTE, 0, seq, MPI_COMM_WORLD));
    }
}

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t max = (size_t)64 << 20;
    unsigned char* buf = malloc(max);
    CHECK(buf != NULL, "no memory");
    int seq = 0;
    for (size_t n = 0; n <= max; n = n == 0 ? 1 : n * 2) {
        /* Also one byte either side of each power of two: boundary cases. */
        const size_t variants[3] = {n, n + 1, n > 1 ? n - 1 : n};
        for (int v = 0; v < 3; ++v) {
            if (variants[v] > max || (v == 2 && n <= 1)) continue;
            for (int peer = 1; peer < size; ++peer)
                if (rank == 0 || rank == peer) exchange(rank, peer, variants[v], seq, buf);
            ++seq;
        }
    }
    if (rank == 0) printf("sizes: 0 B .. 64 MiB with %d ranks, %d sizes checked\n", size, seq);
    free(buf);
    MPI_OK(MPI_Finalize());
    return 0;
}
