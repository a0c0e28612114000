// Start-up benchmark, Transit side: init, one byte to every rank, barrier.
// Each rank prints one line "startup rank R init_s T first_all_s F pss_kb P"
// (F: from the end of init until a byte has gone to and come from every peer);
// contrib/bench/startup.sh aggregates the lines.  Twin: startup_mpi.cpp.
#include <cstdio>
#include <vector>

#include "startup_common.hpp"
#include "transit/transit.hpp"

int main(int argc, char** argv) {
    const double t0 = startup_bench::now_s();
    transit::Context ctx = transit::init(argc, argv);
    const double t1 = startup_bench::now_s();
    const transit::Rank me = ctx.rank();
    const std::uint32_t n = ctx.size();
    std::vector<char> in(n, 0);
    const char out = 1;
    std::vector<transit::Request*> reqs;
    reqs.reserve(2 * n);
    for (transit::Rank r = 0; r < n; ++r) {
        if (r == me) continue;
        transit::Request* req = nullptr;
        if (static_cast<int>(ctx.irecv(r, 1, &in[r], 1, req)) < 0) return 1;
        if (req != nullptr) reqs.push_back(req);
    }
    for (transit::Rank r = 0; r < n; ++r) {
        if (r == me) continue;
        transit::Request* req = nullptr;
        if (static_cast<int>(ctx.isend(r, 1, &out, 1, req)) < 0) return 1;
        if (req != nullptr) reqs.push_back(req);
    }
    if (static_cast<int>(ctx.wait_all(reqs)) < 0) return 1;
    const double t2 = startup_bench::now_s();
    if (static_cast<int>(ctx.barrier()) < 0) return 1;
    std::printf("startup rank %u init_s %.6f first_all_s %.6f pss_kb %ld\n", me, t1 - t0, t2 - t1,
                startup_bench::pss_kb());
    std::fflush(stdout);
    return 0;
}
