/* A token goes around the ring several times; every rank adds its rank. */
#include "check.h"

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    const int laps = 100;
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    long token = 0;
    for (int lap = 0; lap < laps; ++lap) {
        if (rank == 0) {
            token += rank;
            MPI_OK(MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD));
            MPI_OK(MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            MPI_OK(MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            token += rank;
            MPI_OK(MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD));
        }
    }
    if (rank == 0) {
        const long expect = (long)laps * size * (size - 1) / 2;
        CHECK(token == expect, "token %ld, expected %ld", token, expect);
        printf("ring: %d ranks, %d laps, token %ld\n", size, laps, token);
    }
    MPI_OK(MPI_Finalize());
    return 0;
}
