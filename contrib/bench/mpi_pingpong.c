/* mpi_pingpong: MPI latency (half round trip), bandwidth (a window of
 * non-blocking sends, one ack) and message rate (8-byte messages, same
 * window) between ranks 0 and 1, to compare with transit_bench run the same
 * way.  Built and run by twonode_bench.sh. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { window = 64 };

static double latency(char* buf, int size, int iters, int rank) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);
}

/* Seconds for `iters` windows of `size`-byte messages from rank 0 to 1. */
static double stream(char* buf, int size, int iters, int rank) {
    MPI_Request req[window];
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        for (int w = 0; w < window; ++w) {
            if (rank == 0)
                MPI_Isend(buf + (size_t)w * size, size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[w]);
            else
                MPI_Irecv(buf + (size_t)w * size, size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
        if (rank == 0)
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char* buf = calloc((size_t)window << 20, 1);
    const int sizes[] = {8, 1024, 65536, 1 << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; ++s) {
        const int size = sizes[s];
        const int iters = size >= 65536 ? 200 : 2000;
        latency(buf, size, iters / 10, rank); /* warm-up */
        const double us = latency(buf, size, iters, rank);
        if (rank == 0) printf("mpi latency %d B: %.2f us\n", size, us);
    }
    for (size_t s = 1; s < sizeof sizes / sizeof *sizes; ++s) {
        const int size = sizes[s];
        const int iters = size >= 65536 ? 20 : 200;
        stream(buf, size, 2, rank);
        const double secs = stream(buf, size, iters, rank);
        if (rank == 0)
            printf("mpi bandwidth %d B: %.1f MB/s\n", size,
                   (double)size * window * iters / secs / 1e6);
    }
    stream(buf, 8, 20, rank);
    const double secs = stream(buf, 8, 2000, rank);
    if (rank == 0) printf("mpi message rate 8 B: %.0f msg/s\n", window * 2000.0 / secs);
    free(buf);
    MPI_Finalize();
    return 0;
}
