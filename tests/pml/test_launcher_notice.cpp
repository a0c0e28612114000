// A peer that dies without ever having talked to us: no transport holds a
// connection, a mapping or a watch for it, so only the launcher can tell.
// The last rank raises SIGKILL right after start-up; every other rank has a
// receive from it posted and must see it complete with peer_failed within
// seconds (the launcher's PMIx event), a new send to it fail at once, and
// finalize.
//
// Run with 2 or more ranks under `transit_run --keep-going` over a transport
// that connects on first use (tcp); the other survivors send rank 0 their
// failure counts, and rank 0 prints "launcher_notice: PASS" last.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "checks.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

transit::test::Checks check{"launcher_notice"};

void survivor(Context& ctx, Rank dead) {
    char in = 0;
    Request* recv = nullptr;
    Status s = ctx.irecv(dead, 7, &in, 1, recv);
    // The event may already have come: then the receive fails at once.
    if (s == Status::peer_failed) {
        check(recv == nullptr, "a failed irecv returns no request");
    } else {
        check(ok(s) && recv != nullptr, "irecv from the dead rank is posted");
        const auto until = Clock::now() + std::chrono::seconds(10);
        bool done = false;
        while (recv && !done && Clock::now() < until) s = ctx.test(recv, done);
        check(done, "the receive from the dead rank completes within 10 s");
        check(!done || s == Status::peer_failed,
              "the receive completes with peer_failed, got " + std::string(to_string(s)));
    }
    const char out = 1;
    Request* send = nullptr;
    s = ctx.isend(dead, 7, &out, 1, send);
    check(s == Status::peer_failed && send == nullptr,
          "a new send to the dead rank fails with peer_failed, got " + std::string(to_string(s)));
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        auto ctx = std::make_unique<Context>(init());
        if (ctx->size() < 2) {
            std::printf("launcher_notice: FAIL: needs 2 ranks or more, got %u\n", ctx->size());
            return 1;
        }
        const Rank dead = ctx->size() - 1;
        if (ctx->rank() == dead) {
            std::raise(SIGKILL);
            return 1;  // not reached
        }
        survivor(*ctx, dead);
        // Every survivor's verdict reaches rank 0, which alone prints it.
        constexpr std::uint32_t tag_verdict = 8;
        if (ctx->rank() != 0) {
            const int mine = check.failures();
            check(ok(ctx->send(0, tag_verdict, &mine, sizeof mine)), "send the verdict to rank 0");
        } else {
            for (Rank r = 1; r < dead; ++r) {
                int theirs = 1;
                check(ok(ctx->recv(r, tag_verdict, &theirs, sizeof theirs)),
                      "receive rank " + std::to_string(r) + "'s verdict");
                if (theirs != 0) check(false, "rank " + std::to_string(r) + " failed");
            }
        }
        const auto start = Clock::now();
        ctx.reset();
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        check(ms < 10000, "finalize returns within 10 s (took " + std::to_string(ms) + " ms)");
    } catch (const std::exception& e) {
        std::printf("launcher_notice: FAIL: %s\n", e.what());
        return 1;
    }
    return check.verdict();
}
