/* The MPI side of contrib/bench/threads_compare.sh: what `transit_bench latency
 * --threads T` and `msgrate --threads T` measure, between ranks 0 and 1 of an
 * MPI job initialised with MPI_THREAD_MULTIPLE.  T pairs of threads (MT_THREADS,
 * default 1): thread t of rank 0 talks only to thread t of rank 1, on its own
 * two tags (16 + 2t for data, 17 + 2t for the acknowledgements).
 *
 * Prints one line on rank 0:
 *     threads <T> latency_8B <us> msgrate_8B <msg/s>
 * latency: each pair's mean half round trip of blocking 8-byte ping-pongs
 * (MT_LATENCY_ITERS, default 10000 as transit_bench, after a tenth of that
 * untimed), averaged over the pairs;
 * message rate: 8-byte messages per second of all pairs together, each pair
 * streaming windows of MT_WINDOW (default 64) non-blocking sends closed by a
 * 1-byte acknowledgement, the windows calibrated on rank 0 (all pairs at
 * once) so that a trial lasts about MT_TRIAL_MS (default 500) ms and shared
 * out among the pairs; the median of MT_TRIALS (default 3) trials.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_bench.h"

enum { max_threads = 64, max_trials = 64, max_window = 1024, size = 8 };
/* One thread of a pair: what it runs, and what it measured. */
struct pair {
    int me, index, window, windows, latency_iters;
    char buf[size];
    double half_rtt_us;
};

static int data_tag(const struct pair* p) {
    return 16 + 2 * p->index;
}

static void round_trip(struct pair* p) {
    const int peer = 1 - p->me;
    if (p->me == 0) {
        MPI_Send(p->buf, size, MPI_BYTE, peer, data_tag(p), MPI_COMM_WORLD);
        MPI_Recv(p->buf, size, MPI_BYTE, peer, data_tag(p), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(p->buf, size, MPI_BYTE, peer, data_tag(p), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(p->buf, size, MPI_BYTE, peer, data_tag(p), MPI_COMM_WORLD);
    }
}

static void* latency(void* arg) {
    struct pair* p = arg;
    for (int i = 0; i < p->latency_iters / 10; ++i) round_trip(p);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < p->latency_iters; ++i) round_trip(p);
    p->half_rtt_us = (MPI_Wtime() - t0) * 1e6 / p->latency_iters / 2;
    return NULL;
}

/* `windows` windows from rank 0 to rank 1, each closed by rank 1's ack. */
static void* stream(void* arg) {
    struct pair* p = arg;
    MPI_Request reqs[max_window];
    char ack = 0;
    for (int i = 0; i < p->windows; ++i) {
        for (int k = 0; k < p->window; ++k) {
            if (p->me == 0)
                MPI_Isend(p->buf, size, MPI_BYTE, 1, data_tag(p), MPI_COMM_WORLD, &reqs[k]);
            else
                MPI_Irecv(p->buf, size, MPI_BYTE, 0, data_tag(p), MPI_COMM_WORLD, &reqs[k]);
        }
        MPI_Waitall(p->window, reqs, MPI_STATUSES_IGNORE);
        if (p->me == 0)
            MPI_Recv(&ack, 1, MPI_BYTE, 1, data_tag(p) + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else
            MPI_Send(&ack, 1, MPI_BYTE, 0, data_tag(p) + 1, MPI_COMM_WORLD);
    }
    return NULL;
}

/* Runs `fn` on every pair at once, one thread each; the seconds they took. */
static double run_all(struct pair* pairs, int threads, void* (*fn)(void*)) {
    pthread_t ids[max_threads];
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int t = 0; t < threads; ++t)
        if (pthread_create(&ids[t], NULL, fn, &pairs[t]) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int t = 0; t < threads; ++t) pthread_join(ids[t], NULL);
    return MPI_Wtime() - t0;
}

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int me = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 2 || provided < MPI_THREAD_MULTIPLE) {
        if (me == 0)
            fprintf(stderr,
                    "mpi_threads: needs 2 ranks (has %d) and MPI_THREAD_MULTIPLE (got %d)\n", n,
                    provided);
        MPI_Finalize();
        return 2;
    }
    const int threads = env_int("mpi_threads", "MT_THREADS", 1, 1, max_threads);
    const int trials = env_int("mpi_threads", "MT_TRIALS", 3, 1, max_trials);
    const int window = env_int("mpi_threads", "MT_WINDOW", 64, 1, max_window);
    const int iters = env_int("mpi_threads", "MT_LATENCY_ITERS", 10000, 1, 100000000);
    const int trial_ms = env_int("mpi_threads", "MT_TRIAL_MS", 500, 1, 3600000);
    static struct pair pairs[max_threads];
    for (int t = 0; t < threads; ++t) pairs[t] = (struct pair){me, t, window, 0, iters, {0}, 0};

    run_all(pairs, threads, latency);
    double lat = 0;
    for (int t = 0; t < threads; ++t) lat += pairs[t].half_rtt_us / threads;

    /* Calibration: a warm-up of 100 windows shared by all pairs, timed on rank
     * 0 (a trial of T pairs lasts about MT_TRIAL_MS however they share the
     * library), the count sent to rank 1. */
    const int probe_windows = 100 / threads > 0 ? 100 / threads : 1;
    for (int t = 0; t < threads; ++t) pairs[t].windows = probe_windows;
    const double probe = run_all(pairs, threads, stream);
    int windows = (int)(trial_ms / 1000.0 / (probe / (probe_windows * threads)));
    if (windows < 3 * threads) windows = 3 * threads;
    MPI_Bcast(&windows, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int t = 0; t < threads; ++t) pairs[t].windows = windows / threads;
    double rate[max_trials];
    for (int i = 0; i < trials; ++i) {
        const double msgs = (double)(windows / threads) * window * threads;
        rate[i] = msgs / run_all(pairs, threads, stream);
    }
    if (me == 0)
        printf("threads %d latency_8B %.3f msgrate_8B %.0f\n", threads, lat, median(rate, trials));
    MPI_Finalize();
    return 0;
}
