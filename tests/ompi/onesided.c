/* One-sided operations in a window: put, get, accumulate, fetch-and-op and
 * compare-and-swap, each checked at the target and the origin. */
#include <stdint.h>
#include <string.h>

#include "check.h"

int main(int argc, char** argv) {
    MPI_OK(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    enum { n = 1024 };
    int64_t* base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(int64_t) * (n + 2), sizeof(int64_t), MPI_INFO_NULL,
                            MPI_COMM_WORLD, &base, &win));
    memset(base, 0, sizeof(int64_t) * (n + 2));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Put into the right neighbour, then read it back with get. */
    int64_t src[n], back[n];
    for (int i = 0; i < n; ++i) src[i] = rank * 100000 + i;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(src, n, MPI_INT64_T, right, 0, n, MPI_INT64_T, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < n; ++i) CHECK(base[i] == left * 100000 + i, "put item %d", i);
    MPI_OK(MPI_Get(back, n, MPI_INT64_T, right, 0, n, MPI_INT64_T, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < n; ++i) CHECK(back[i] == src[i], "get item %d", i);

    /* Every rank adds rank+1 to slot n of rank 0. */
    const int64_t mine = rank + 1;
    MPI_OK(MPI_Accumulate(&mine, 1, MPI_INT64_T, 0, n, 1, MPI_INT64_T, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (rank == 0)
        CHECK(base[n] == (int64_t)size * (size + 1) / 2, "accumulate gave %lld",
              (long long)base[n]);

    /* Fetch-and-op on slot n+1 of rank 0, in a passive epoch: the fetched
     * values are distinct and the final sum is complete. */
    MPI_OK(MPI_Win_lock_all(0, win));
    int64_t one = 1, old = -1;
    MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, n + 1, MPI_SUM, win));
    MPI_OK(MPI_Win_flush(0, win));
    CHECK(old >= 0 && old < size, "fetch-and-op fetched %lld", (long long)old);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    int64_t total = -1;
    MPI_OK(MPI_Get(&total, 1, MPI_INT64_T, 0, n + 1, 1, MPI_INT64_T, win));
    MPI_OK(MPI_Win_unlock(0, win));
    CHECK(total == size, "fetch-and-op total %lld, expected %d", (long long)total, size);

    /* Compare-and-swap: exactly one rank swaps slot n+1 of rank 0 from size to -7. */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    int64_t compare = size, value = -7, result = 0;
    MPI_OK(MPI_Compare_and_swap(&value, &compare, &result, MPI_INT64_T, 0, n + 1, win));
    MPI_OK(MPI_Win_flush(0, win));
    MPI_OK(MPI_Win_unlock_all(win));
    int won = result == size, winners = 0;
    MPI_OK(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(winners == 1, "%d ranks won the compare-and-swap", winners);
    MPI_OK(MPI_Win_fence(0, win));
    if (rank == 0) CHECK(base[n + 1] == -7, "cswap left %lld", (long long)base[n + 1]);

    MPI_OK(MPI_Win_free(&win));
    if (rank == 0) printf("onesided: put/get/accumulate/fetch_and_op/cswap with %d ranks\n", size);
    MPI_OK(MPI_Finalize());
    return 0;
}
