/* What every test program shares: a failing check names the rank, the file
 * and line and what was expected, then aborts the whole job (a non-zero exit
 * for ctest, never a hang). */
#ifndef TRANSIT_OMPI_TEST_CHECK_H
#define TRANSIT_OMPI_TEST_CHECK_H

#include <mpi.h>
#include <stdio.h>

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            int rank_ = -1;                                                                  \
            MPI_Comm_rank(MPI_COMM_WORLD, &rank_);                                           \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", rank_, __FILE__, __LINE__, \
                    #cond);                                                                  \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
        }                                                                                    \
    } while (0)

#define MPI_OK(call) CHECK((call) == MPI_SUCCESS, "MPI call failed")

/* A byte of message `seq` from `src` at offset `i`: every byte tells where it
 * came from, so a misplaced or stale byte is caught. */
static inline unsigned char pattern(int src, int seq, size_t i) {
    return (unsigned char)(src * 31 + seq * 7 + i * 13 + (i >> 8));
}

#endif
