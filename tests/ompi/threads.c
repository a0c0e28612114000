/* MPI_THREAD_MULTIPLE through the adapter: ranks pair up (0-1, 2-3, ...);
 * several threads of each rank exchange messages of every size with their
 * twin thread on the partner rank, each pair on its own tag, all at once.
 * Meanwhile one thread posts receives that another thread completes with
 * MPI_Waitany, the partner's messages for them sent from a third thread. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { threads = 4, any_count = 16, any_tag_base = 1000, any_size = 3000 };
static const int sizes[] = {0, 100, 5000, 70000, 1 << 20};
static int rank, partner;

static void fill(unsigned char* buf, int src, int seq, size_t n) {
    for (size_t i = 0; i < n; ++i) buf[i] = pattern(src, seq, i);
}
static void expect(const unsigned char* buf, int src, int seq, size_t n) {
    for (size_t i = 0; i < n; ++i)
        CHECK(buf[i] == pattern(src, seq, i), "message %d from %d: byte %zu", seq, src, i);
}

/* Thread t: every size, 3 rounds, to and from thread t of the partner, tag t. */
static void* twin(void* arg) {
    const int t = (int)(size_t)arg;
    for (int round = 0; round < 3; ++round)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
            const size_t n = (size_t)sizes[k];
            const int seq = t * 100 + round * 10 + (int)k;
            unsigned char* out = malloc(n + 1);
            unsigned char* in = malloc(n + 1);
            fill(out, rank, seq, n);
            MPI_Request r[2];
            MPI_OK(MPI_Irecv(in, (int)n, MPI_BYTE, partner, t, MPI_COMM_WORLD, &r[0]));
            MPI_OK(MPI_Isend(out, (int)n, MPI_BYTE, partner, t, MPI_COMM_WORLD, &r[1]));
            MPI_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
            expect(in, partner, seq, n);
            free(out);
            free(in);
        }
    return NULL;
}

/* Receives posted by the main thread, completed by this one. */
static MPI_Request any_reqs[any_count];
static unsigned char any_bufs[any_count][any_size];
static void* wait_any(void* arg) {
    (void)arg;
    int seen[any_count] = {0};
    for (int done = 0; done < any_count; ++done) {
        int index = MPI_UNDEFINED;
        MPI_Status st;
        MPI_OK(MPI_Waitany(any_count, any_reqs, &index, &st));
        CHECK(index >= 0 && index < any_count && !seen[index], "Waitany gave %d", index);
        seen[index] = 1;
        CHECK(st.MPI_TAG == any_tag_base + index, "request %d: tag %d", index, st.MPI_TAG);
        expect(any_bufs[index], partner, any_tag_base + index, any_size);
    }
    return NULL;
}

static void* send_any(void* arg) {
    (void)arg;
    unsigned char buf[any_size];
    for (int i = any_count - 1; i >= 0; --i) { /* last first: Waitany sees any order */
        fill(buf, rank, any_tag_base + i, any_size);
        MPI_OK(MPI_Send(buf, any_size, MPI_BYTE, partner, any_tag_base + i, MPI_COMM_WORLD));
    }
    return NULL;
}

int main(int argc, char** argv) {
    int provided = 0, size;
    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size % 2 == 0, "needs an even number of ranks, got %d", size);
    partner = rank ^ 1;

    for (int i = 0; i < any_count; ++i)
        MPI_OK(MPI_Irecv(any_bufs[i], any_size, MPI_BYTE, partner, any_tag_base + i, MPI_COMM_WORLD,
                         &any_reqs[i]));
    pthread_t ts[threads + 2];
    for (int t = 0; t < threads; ++t)
        CHECK(pthread_create(&ts[t], NULL, twin, (void*)(size_t)t) == 0, "pthread_create");
    CHECK(pthread_create(&ts[threads], NULL, wait_any, NULL) == 0, "pthread_create");
    CHECK(pthread_create(&ts[threads + 1], NULL, send_any, NULL) == 0, "pthread_create");
    for (int t = 0; t < threads + 2; ++t) pthread_join(ts[t], NULL);

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        printf("threads: %d pairs of threads exchanged, %d receives completed by Waitany\n",
               threads, any_count);
    MPI_OK(MPI_Finalize());
    return 0;
}
