/* The MPI side of contrib/bench/compare.sh and plot.sh: the same measurements
 * transit_bench makes, between ranks 0 and 1 of an MPI job, so Transit and Open
 * MPI are timed by the same method on the same machine.
 *
 * For every size in PP_SIZES (bytes, comma-separated; default 8,65536,1048576)
 * it prints one row on rank 0:
 *     <bytes> <latency median> <latency min> <latency mean> <bw median> <bw max>
 * latency in microseconds: half round trips of a blocking ping-pong, timed in
 * blocks of 50 (the median and the minimum are over the blocks' means, as
 * transit_bench's default statistic; the mean is over all), bandwidth
 * in MB/s (10^6 bytes/s; windows of PP_WINDOW non-blocking sends, then a 1-byte
 * acknowledgement).  Each statistic is over PP_TRIALS trials (default 5).  Last,
 * the 8-byte message rate:
 *     msgrate_8B window <w>: median <n> msg/s (max <m>)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_bench.h"

enum { max_trials = 64, max_sizes = 64 };

static int parse_sizes(long* sizes) {
    const char* v = getenv("PP_SIZES");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", v != NULL && *v != '\0' ? v : "8,65536,1048576");
    int n = 0;
    for (char* tok = strtok(buf, ","); tok != NULL && n < max_sizes; tok = strtok(NULL, ",")) {
        char* end = NULL;
        sizes[n] = strtol(tok, &end, 10);
        if (*end != '\0' || sizes[n] < 0) {
            fprintf(stderr, "mpi_pingpong: PP_SIZES: '%s' is not a size in bytes\n", tok);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        ++n;
    }
    return n;
}

/* Fewer repetitions for larger messages, so every size takes about as long. */
static int iterations(long size, int small) {
    long it = (64L << 20) / (size + 1);
    if (it > small) it = small;
    return it < 20 ? 20 : (int)it;
}

enum { block = 50 };

/* One block of round trips; its half round trip in microseconds. */
static double block_us(int me, char* buf, long size) {
    const int peer = 1 - me;
    double t0 = MPI_Wtime();
    for (int i = 0; i < block; ++i) {
        if (me == 0) {
            MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) * 1e6 / block / 2;
}

/* Fills `out` with `blocks` block latencies after one block of warm-up. */
static void pingpong_blocks(int me, char* buf, long size, double* out, int blocks) {
    MPI_Barrier(MPI_COMM_WORLD);
    block_us(me, buf, size);
    for (int b = 0; b < blocks; ++b) out[b] = block_us(me, buf, size);
}

/* Seconds for `iters` windows of `window` messages from rank 0 to rank 1. */
static double stream_seconds(int me, char* buf, long size, int window, int iters) {
    MPI_Request reqs[1024];
    char ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        for (int k = 0; k < window; ++k) {
            if (me == 0)
                MPI_Isend(buf, (int)size, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
            else
                MPI_Irecv(buf, (int)size, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
        }
        MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
        if (me == 0)
            MPI_Recv(&ack, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(&ack, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int me = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 2) {
        if (me == 0) fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, has %d\n", n);
        MPI_Finalize();
        return 2;
    }
    const int trials = env_int("mpi_pingpong", "PP_TRIALS", 5, 1, max_trials);
    const int window = env_int("mpi_pingpong", "PP_WINDOW", 64, 1, 1024);
    long sizes[max_sizes];
    const int nsizes = parse_sizes(sizes);
    long largest = 8;
    for (int i = 0; i < nsizes; ++i)
        if (sizes[i] > largest) largest = sizes[i];
    char* buf = calloc((size_t)largest, 1);
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);

    double bw[max_trials];
    const int max_blocks = 10000 / block;
    double* lat = malloc(sizeof(double) * (size_t)(max_blocks * trials));
    if (lat == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int s = 0; s < nsizes; ++s) {
        const long size = sizes[s];
        int blocks = iterations(size, 10000) / block;
        if (blocks < 2) blocks = 2;
        double best_bw = 0;
        for (int t = 0; t < trials; ++t) {
            pingpong_blocks(me, buf, size, lat + t * blocks, blocks);
            const int iters = iterations(size * window, 2000);
            bw[t] =
                (double)size * window * iters / stream_seconds(me, buf, size, window, iters) / 1e6;
            if (bw[t] > best_bw) best_bw = bw[t];
        }
        const int all = blocks * trials;
        double sum = 0;
        for (int i = 0; i < all; ++i) sum += lat[i];
        const double mean = sum / all;
        const double lat_med = median(lat, all);
        const double lat_min = lat[0]; /* sorted by median() */
        if (me == 0)
            printf("%ld %.3f %.3f %.3f %.1f %.1f\n", size, lat_med, lat_min, mean,
                   median(bw, trials), best_bw);
    }

    double rate[max_trials], best_rate = 0;
    for (int t = 0; t < trials; ++t) {
        const int iters = 20000;
        rate[t] = (double)window * iters / stream_seconds(me, buf, 8, window, iters);
        if (rate[t] > best_rate) best_rate = rate[t];
    }
    if (me == 0)
        printf("msgrate_8B window %d: median %.0f msg/s (max %.0f)\n", window, median(rate, trials),
               best_rate);
    free(lat);
    free(buf);
    MPI_Finalize();
    return 0;
}
