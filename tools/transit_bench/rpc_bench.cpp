// The RPC benchmark: a server reached by address (Context::listen) and
// clients that connect to it from outside its job (Context::connect), as an
// RPC system or a parallel file system runs.
//
//   transit_bench rpc --listen [--serve N]          prints the address, echoes
//   transit_run -n K transit_bench rpc --connect ADDRESS
//
// Every rank of the client job connects on its own and times synchronous round
// trips (post the receive, send the request, wait for the echo); rank 0 prints
// per size the mean round trip over the clients, their requests per second
// together and the mean over the clients of each one's median round trip, and
// first how long a new client waited for its first answer (connect included).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "tools/transit_bench/bench.hpp"
#include "tools/transit_bench/status_check.hpp"
#include "transit/transit.hpp"

namespace transit::bench {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint32_t request_tag = 1;
constexpr std::uint32_t goodbye_tag = 2;
constexpr std::uint32_t result_tag = 3;  // client ranks to their rank 0

// The sizes of an RPC's payload the benchmark times: a small call, a page, a
// bulk transfer (within --min and --max).
std::vector<std::size_t> rpc_sizes(const Options& o) {
    std::vector<std::size_t> out;
    for (std::size_t s : {std::size_t{8}, std::size_t{4096}, std::size_t{1} << 20})
        if (s >= o.min_size && s <= o.max_size) out.push_back(s);
    if (out.empty())
        throw UsageError(
            fmt::format("rpc times 8 B, 4 KiB and 1 MiB calls: none is within "
                        "--min {} and --max {}",
                        o.min_size, o.max_size));
    return out;
}

// One round trip: the receive is posted before the request leaves, so the
// echo never waits in the client's unexpected queue.
void call(Context& ctx, Rank server, const std::byte* request, std::byte* answer,
          std::size_t size) {
    Request* recv = nullptr;
    check(ctx.irecv(server, request_tag, answer, size, recv), "posting the answer's receive");
    const Status s = ctx.send(server, request_tag, request, size);
    if (!ok(s)) {
        ctx.cancel(recv);
        ctx.wait(recv);
        check(s, "sending a request");
    }
    RequestStatus st;
    check(ctx.wait(recv, &st), "waiting for the answer");
    check(st.status, "the answer");
    if (st.length != size)
        throw std::runtime_error(
            fmt::format("the server answered {} bytes to {}", st.length, size));
}

// What one client measured at one size: the mean round trip (fi_pingpong's
// statistic), the median of the calls timed one by one (ucx_perftest's
// typical, its 50th percentile) and the calls per second.  The mean carries
// every call the scheduler or the hypervisor held up; the median does not.
struct ClientResult {
    double round_trip_us;
    double requests_per_s;
    double median_us;
};

ClientResult time_calls(Context& ctx, Rank server, const Options& o, std::size_t size) {
    std::vector<std::byte> request(size, std::byte{0x5a}), answer(size);
    const int iters = iterations_for(o, size, false) / (size > 65536 ? 10 : 1);
    const int warm = warmup_for(o, size);
    for (int i = 0; i < warm; ++i) call(ctx, server, request.data(), answer.data(), size);
    // Each call timed with the cycle counter (a clock read per call would add
    // its own cost to each), converted with the whole run's clock time.
    std::vector<std::uint64_t> ticks(static_cast<std::size_t>(iters));
    const clock::time_point t0 = clock::now();
    std::uint64_t last = cycles();
    for (std::uint64_t& t : ticks) {
        call(ctx, server, request.data(), answer.data(), size);
        const std::uint64_t now = cycles();
        t = now - last;
        last = now;
    }
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    std::uint64_t total = 0;
    for (std::uint64_t t : ticks) total += t;
    std::nth_element(ticks.begin(), ticks.begin() + iters / 2, ticks.end());
    const double median = total == 0 ? 0 : s * 1e6 * static_cast<double>(ticks[iters / 2]) / total;
    return {s * 1e6 / iters, iters / s, median};
}

// Rank 0 of the client job sums up what every rank measured.
ClientResult combine(Context& ctx, ClientResult mine) {
    if (ctx.rank() != 0) {
        check(ctx.send(0, result_tag, &mine, sizeof mine), "reporting to rank 0");
        return mine;
    }
    ClientResult all = mine;
    for (Rank r = 1; r < ctx.size(); ++r) {
        ClientResult theirs{};
        check(ctx.recv(r, result_tag, &theirs, sizeof theirs), "collecting the results");
        all.round_trip_us += theirs.round_trip_us;
        all.requests_per_s += theirs.requests_per_s;
        all.median_us += theirs.median_us;
    }
    all.round_trip_us /= ctx.size();
    all.median_us /= ctx.size();
    return all;
}

int serve(Context& ctx, const Options& o) {
    if (ctx.size() != 1)
        throw UsageError("rpc --listen is one process: run it without transit_run");
    std::printf("%s\n", ctx.listen().c_str());
    std::fflush(stdout);
    std::vector<std::byte> buf(o.max_size);
    int finished = 0;
    while (o.serve == 0 || finished < o.serve) {
        RequestStatus st;
        const Status s = ctx.recv(any_rank, any_tag, buf.data(), buf.size(), &st);
        if (!ok(s)) {
            // A client that went away takes only its own calls with it.
            std::fprintf(stderr, "transit_bench rpc: receive from client %u: %s\n", st.source,
                         std::string(to_string(s)).c_str());
            continue;
        }
        if (st.tag == goodbye_tag) {
            ++finished;
            continue;
        }
        const Status sent = ctx.send(st.source, st.tag, buf.data(), st.length);
        if (!ok(sent))
            std::fprintf(stderr, "transit_bench rpc: answer to client %u: %s\n", st.source,
                         std::string(to_string(sent)).c_str());
    }
    return 0;
}

int call_server(Context& ctx, const Options& o) {
    const std::vector<std::size_t> sizes = rpc_sizes(o);
    Rank server = 0;
    const clock::time_point t0 = clock::now();
    check(ctx.connect(o.connect, server), "connecting to the server");
    std::byte first[8] = {}, echo[8];
    call(ctx, server, first, echo, sizeof first);
    const double first_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    const ClientResult first_call = {first_us, 0, first_us};
    const ClientResult first_all = combine(ctx, first_call);
    if (ctx.rank() == 0) {
        // As print_header: CSV starts with its column names.
        std::FILE* about = o.csv ? stderr : stdout;
        fmt::print(about, "# transit_bench rpc: {} client{} of the server at peer {}: {}\n",
                   ctx.size(), ctx.size() == 1 ? "" : "s", server, peer_transports(ctx, server));
        fmt::print(about, "# first answer to a new client (connect included): {:.0f} us\n",
                   first_all.round_trip_us);
        std::fflush(about);
        if (o.csv)
            fmt::print("bytes,round_trip_us,requests_per_s,median_round_trip_us\n");
        else
            fmt::print("{:>12}  {:>18}  {:>14}  {:>18}\n", "# bytes", "round trip (us)",
                       "requests/s", "median (us)");
    }
    for (std::size_t size : sizes) {
        check(ctx.barrier(), "barrier");
        const ClientResult r = combine(ctx, time_calls(ctx, server, o, size));
        if (ctx.rank() != 0) continue;
        if (o.csv)
            fmt::print("{},{:.3f},{:.0f},{:.3f}\n", size, r.round_trip_us, r.requests_per_s,
                       r.median_us);
        else
            fmt::print("{:>12}  {:>18.2f}  {:>14.0f}  {:>18.2f}\n", size, r.round_trip_us,
                       r.requests_per_s, r.median_us);
        std::fflush(stdout);
    }
    check(ctx.send(server, goodbye_tag, nullptr, 0), "saying goodbye");
    check(ctx.disconnect(server), "disconnecting");
    return 0;
}

}  // namespace

int run_rpc(const Options& o, int argc, char** argv) {
    if (o.listen == !o.connect.empty())
        throw UsageError("rpc needs --listen (the server) or --connect ADDRESS (a client)");
    Context ctx = init(argc, argv);
    return o.listen ? serve(ctx, o) : call_server(ctx, o);
}

}  // namespace transit::bench
