// A raw tcp ping-pong that reports the median half round trip over blocks of
// iterations (the way an OSU-style MPI ping-pong does), so a noisy shared
// machine can still be compared with Open MPI.  Not a test:
//   transit_run -n 2 --bind-to core tcp_pingpong [size] [blocks]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/runtime.hpp"
#include "tests/tcp/tcp_job.hpp"

using namespace transit;

int main(int argc, char** argv) {
    const std::size_t size = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 8;
    const int blocks = argc > 2 ? std::atoi(argv[2]) : 200;
    constexpr int per_block = 50;
    auto runtime = rt::open_runtime();
    tcptest::TcpJob job(*runtime);
    const Rank me = runtime->rank();
    if (runtime->size() != 2) return 1;
    const Rank peer = 1 - me;
    std::vector<std::byte> msg(size, std::byte{1});
    btl::Module& m = job.module(peer);
    btl::Endpoint* ep = job.endpoint(peer);
    auto send = [&] {
        btl::Convertor conv(msg.data(), size);
        btl::Descriptor* d = nullptr;
        Status s = m.sendi(ep, &conv, nullptr, 0, size, btl::no_order,
                           btl::des_flags::btl_ownership, tcptest::TcpJob::data_tag, &d);
        if (s == Status::completed) return;
        while (d == nullptr) {
            job.progress().progress();
            d = m.alloc(ep, btl::no_order, size, btl::des_flags::btl_ownership);
        }
        conv.pack(d->segments[0].addr, size);
        while (m.send(ep, d, tcptest::TcpJob::data_tag) == Status::out_of_resource)
            job.progress().progress();
    };
    std::size_t expect = 0;
    auto wait = [&] {
        ++expect;
        while (job.received.size() < expect) job.progress().progress();
        if (job.received.size() > 4096) {
            job.received.clear();
            expect = 0;
        }
    };
    std::vector<double> medians;
    for (int b = -10; b < blocks; ++b) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < per_block; ++i) {
            if (me == 0) {
                send();
                wait();
            } else {
                wait();
                send();
            }
        }
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            (2.0 * per_block);
        if (b >= 0) medians.push_back(us);
    }
    std::sort(medians.begin(), medians.end());
    if (me == 0)
        std::printf("tcp raw ping-pong %zu B: median %.3f us, min %.3f us (%d blocks of %d)\n",
                    size, medians[medians.size() / 2], medians.front(), blocks, per_block);
    job.step();
    return 0;
}
