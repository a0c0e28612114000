// Start-up benchmark, MPI twin of startup_transit.cpp (same output line).
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "startup_common.hpp"

int main(int argc, char** argv) {
    const double t0 = startup_bench::now_s();
    MPI_Init(&argc, &argv);
    const double t1 = startup_bench::now_s();
    int me = 0;
    int n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    std::vector<char> in(static_cast<std::size_t>(n), 0);
    const char out = 1;
    std::vector<MPI_Request> reqs;
    for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        reqs.emplace_back();
        MPI_Irecv(&in[static_cast<std::size_t>(r)], 1, MPI_CHAR, r, 1, MPI_COMM_WORLD,
                  &reqs.back());
    }
    for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        reqs.emplace_back();
        MPI_Isend(&out, 1, MPI_CHAR, r, 1, MPI_COMM_WORLD, &reqs.back());
    }
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    const double t2 = startup_bench::now_s();
    MPI_Barrier(MPI_COMM_WORLD);
    std::printf("startup rank %d init_s %.6f first_all_s %.6f pss_kb %ld\n", me, t1 - t0, t2 - t1,
                startup_bench::pss_kb());
    std::fflush(stdout);
    MPI_Finalize();
    return 0;
}
