// A peer killed mid-transfer: rank 1 raises SIGKILL while rank 0 has a large
// rendezvous send, a second one being received, a receive from rank 1 and a
// wildcard receive pending.  Rank 0 must see its requests to and from rank 1
// complete with peer_failed within seconds, the wildcard receive stay posted,
// new operations to rank 1 fail at once, the barrier return peer_failed, and
// the Context close without hanging.  An active message whose header handler
// kills rank 1 never completes there: its completion counter at rank 0 must
// count it as lost, so a wait on it ends.
//
// Run with 2 ranks under `transit_run --keep-going` (so the launcher lets rank
// 0 run on); rank 0 prints "peer_failure: PASS" as its last line on success.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "checks.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t tag_unmatched = 1;  // rank 1 never receives it
constexpr std::uint32_t tag_streamed = 2;   // rank 1 receives it while dying
constexpr std::uint32_t tag_never = 3;      // rank 1 never sends it
constexpr std::uint32_t tag_wild = 4;
constexpr std::uint32_t tag_go = 5;
constexpr std::uint32_t am_fatal = 6;  // rank 1's handler for it raises SIGKILL
constexpr std::size_t large = 32u << 20;
constexpr auto deadline = std::chrono::seconds(10);

transit::test::Checks check{"peer_failure"};

std::string name(Status s) {
    return std::string(to_string(s));
}

// Tests `req` until it completes or the deadline passes; returns its status
// (timed_out when it never completed: the request is then abandoned).
Status finish(Context& ctx, Request*& req, Clock::time_point until, bool& done) {
    done = false;
    while (req && Clock::now() < until) {
        Status s = ctx.test(req, done);
        if (done) return s;
    }
    return Status::timeout;
}

void rank1(Context& ctx) {
    auto die = [](Context&, const AmInfo&, void*) -> AmDestination {
        std::raise(SIGKILL);
        return {};
    };
    check(ok(ctx.register_am_handler(am_fatal, die, nullptr, nullptr)), "rank 1 registers");
    std::vector<std::byte> in(large);
    Request* streamed = nullptr;
    check(ok(ctx.irecv(0, tag_streamed, in.data(), in.size(), streamed)), "rank 1 irecv");
    char go = 0;
    check(ok(ctx.recv(0, tag_go, &go, 1)), "rank 1 receives go");
    // Let the streamed transfer start, then die in the middle of it.
    for (int i = 0; i < 50; ++i) ctx.progress();
    std::raise(SIGKILL);
}

void rank0(Context& ctx) {
    std::vector<std::byte> out1(large, std::byte{1}), out2(large, std::byte{2});
    char never = 0, wild = 0;
    Request *unmatched = nullptr, *streamed = nullptr, *from1 = nullptr, *any = nullptr;
    check(ok(ctx.isend(1, tag_unmatched, out1.data(), out1.size(), unmatched)), "isend unmatched");
    check(ok(ctx.isend(1, tag_streamed, out2.data(), out2.size(), streamed)), "isend streamed");
    check(ok(ctx.irecv(1, tag_never, &never, 1, from1)), "irecv from rank 1");
    check(ok(ctx.irecv(any_rank, tag_wild, &wild, 1, any)), "wildcard irecv");
    const char go = 'g';
    check(ok(ctx.send(1, tag_go, &go, 1)), "send go");
    Counter am_completion;
    check(ok(ctx.am_send(1, am_fatal, {}, &go, 1, {nullptr, 0, &am_completion})),
          "am_send to the handler that kills rank 1");

    const auto start = Clock::now();
    const auto until = start + deadline;
    bool done = false;
    Status s = finish(ctx, unmatched, until, done);
    check(done && s == Status::peer_failed,
          "the unmatched rendezvous send completes with peer_failed, got " + name(s));
    s = finish(ctx, from1, until, done);
    check(done && s == Status::peer_failed,
          "the receive from rank 1 completes with peer_failed, got " + name(s));
    s = finish(ctx, streamed, until, done);
    check(done && (s == Status::peer_failed || s == Status::success),
          "the streamed send completes (peer_failed or success), got " + name(s));
    std::printf(
        "peer_failure: pending requests completed after %lld ms\n",
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()));

    // The active message never completed at rank 1: lost, and a wait ends.
    while (am_completion.value() + am_completion.lost() < 1 && Clock::now() < until) ctx.progress();
    check(am_completion.value() == 0 && am_completion.lost() == 1,
          "the active message's completion is counted as lost, got value " +
              std::to_string(am_completion.value()) + ", lost " +
              std::to_string(am_completion.lost()));
    check(ctx.counter_wait(am_completion, 1) == Status::error,
          "a wait on the lost completion ends with error");

    // The wildcard receive is still posted: cancel succeeds.
    bool any_done = true;
    check(ok(ctx.test(any, any_done)) && !any_done && any, "the wildcard receive stays posted");
    if (any && !any_done) {
        check(ok(ctx.cancel(any)), "the wildcard receive can be cancelled");
        check(ctx.wait(any) == Status::cancelled, "the cancelled receive reports cancelled");
    }

    // New operations involving rank 1 fail at once.
    Request* r = nullptr;
    check(ctx.isend(1, tag_unmatched, &go, 1, r) == Status::peer_failed && !r,
          "a new send to rank 1 fails with peer_failed");
    check(ctx.irecv(1, tag_never, &never, 1, r) == Status::peer_failed && !r,
          "a new receive from rank 1 fails with peer_failed");
    s = ctx.barrier();
    check(s == Status::peer_failed, "the barrier returns peer_failed, got " + name(s));

    // Ourselves still work.
    char back = 0;
    check(ok(ctx.isend(0, 9, &go, 1, r)), "send to self");
    check(ok(ctx.recv(0, 9, &back, 1)) && back == go, "receive from self");
    if (r) check(ok(ctx.wait(r)), "send to self completes");
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        auto ctx = std::make_unique<Context>(init());
        if (ctx->size() != 2) {
            std::printf("peer_failure: FAIL: needs 2 ranks, got %u\n", ctx->size());
            return 1;
        }
        if (ctx->rank() == 1) {
            rank1(*ctx);
            return 1;  // not reached
        }
        rank0(*ctx);
        const auto start = Clock::now();
        ctx.reset();  // finalize: must not wait for the dead peer
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
        std::printf("peer_failure: finalize took %lld ms\n", static_cast<long long>(ms));
        check(ms < 10000, "finalize returns within 10 s");
    } catch (const std::exception& e) {
        std::printf("peer_failure: FAIL: %s\n", e.what());
        return 1;
    }
    return check.verdict();
}
