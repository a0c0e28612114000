// A peer that goes silent while rank 0 is blocked in a receive from it, with
// no transport or launcher to say so: the keep-alive (pml/keepalive.hpp) must
// end the receive with peer_failed.
//
//   pml_silent_peer stop   one node, 2 ranks: rank 1 first stays slow but
//                          answering (it polls progress now and then, and
//                          sleeps in a blocking receive) for many keep-alive
//                          timeouts, and its message must arrive; then it stops
//                          itself (SIGSTOP: its process lives, so no transport
//                          sees it go), and rank 0's receive must fail within
//                          2 s, after which rank 0 kills it.
//   pml_silent_peer kill   rank 1 raises SIGKILL (across two nodes: nothing on
//                          rank 0's node watches its process).
//
// Rank 0 prints "silent_peer: PASS" last on success.  Run under
// `transit_run --keep-going` (or mpirun's recovery): the job's status is rank 1's.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "checks.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t tag_pid = 1;
constexpr std::uint32_t tag_late = 2;
constexpr std::uint32_t tag_wake = 3;
constexpr std::uint32_t tag_never = 4;
constexpr auto slow_for = std::chrono::milliseconds(1500);
constexpr auto noticed_within = std::chrono::milliseconds(2000);

transit::test::Checks check{"silent_peer"};

long long ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// A hang is a failure with its line, not ctest's timeout.
void watchdog(int) {
    const char line[] = "silent_peer: FAIL: rank 0 still blocked after 15 s\n";
    (void)!::write(1, line, sizeof line - 1);
    ::_exit(1);
}

void rank1(Context& ctx, bool stop) {
    const int pid = static_cast<int>(::getpid());
    check(ok(ctx.send(0, tag_pid, &pid, sizeof pid)), "rank 1 sends its pid");
    if (stop) {
        // Slow but answering: it polls now and then...
        const auto until = Clock::now() + slow_for / 2;
        while (Clock::now() < until) {
            ctx.progress();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));  // kept: the slowness
        }
        // ...then sleeps in a receive of its own, woken by rank 0's probes.
        char wake = 0;
        check(ok(ctx.recv(0, tag_wake, &wake, 1)), "rank 1 receives the wake-up");
        const char late = 'L';
        check(ok(ctx.send(0, tag_late, &late, 1)), "rank 1 sends its late message");
        ctx.barrier();
        std::raise(SIGSTOP);  // rank 0 kills it
    } else {
        ctx.barrier();
    }
    std::raise(SIGKILL);
}

void rank0(Context& ctx, bool stop) {
    int pid = 0;
    check(ok(ctx.recv(1, tag_pid, &pid, sizeof pid)), "rank 0 receives rank 1's pid");
    if (stop) {
        // Blocked in a receive from the slow rank for many keep-alive timeouts.
        char late = 0;
        Request* r = nullptr;
        check(ok(ctx.irecv(1, tag_late, &late, 1, r)), "irecv of the late message");
        const auto start = Clock::now();
        while (ms_since(start) < slow_for.count()) ctx.progress(std::chrono::milliseconds(50));
        const char wake = 'w';
        check(ok(ctx.send(1, tag_wake, &wake, 1)), "send the wake-up");
        const Status s = ctx.wait(r);
        check(s == Status::success && late == 'L',
              "a slow rank that answers probes is not failed, got " + std::string(to_string(s)));
        std::printf("silent_peer: the slow rank's message came after %lld ms\n", ms_since(start));
        check(ok(ctx.barrier()), "barrier before rank 1 stops");
    } else {
        check(ok(ctx.barrier()), "barrier before rank 1 dies");
    }
    std::signal(SIGALRM, watchdog);
    ::alarm(15);
    char never = 0;
    const auto start = Clock::now();
    const Status s = ctx.recv(1, tag_never, &never, 1);
    const long long ms = ms_since(start);
    ::alarm(0);
    std::printf("silent_peer: the receive from the %s rank ended '%s' after %lld ms\n",
                stop ? "stopped" : "killed", std::string(to_string(s)).c_str(), ms);
    check(s == Status::peer_failed,
          "the receive ends peer_failed, got " + std::string(to_string(s)));
    check(ms < noticed_within.count(),
          "noticed within " + std::to_string(noticed_within.count()) + " ms");
    if (stop && pid > 0) ::kill(pid, SIGKILL);
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const bool stop = argc > 1 && std::strcmp(argv[1], "stop") == 0;
    try {
        auto ctx = std::make_unique<Context>(init());
        if (ctx->size() != 2) {
            std::printf("silent_peer: FAIL: needs 2 ranks, got %u\n", ctx->size());
            return 1;
        }
        if (ctx->rank() == 1) {
            rank1(*ctx, stop);
            return 1;  // not reached
        }
        rank0(*ctx, stop);
        ctx.reset();  // finalize: must not wait for the dead peer
    } catch (const std::exception& e) {
        std::printf("silent_peer: FAIL: %s\n", e.what());
        return 1;
    }
    return check.verdict();
}
