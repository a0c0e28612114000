// A rank killed while the others are asleep in a receive from it, all on one
// node: each survivor's receive must end with peer_failed within 1 s of the
// death (the transport that shares memory with the victim knows at once that
// its process is gone; the launcher's word and the keep-alive are slower).
//
// The last rank is the victim.  It sends every survivor the time it will die
// at (steady_clock, which all processes of a machine share), waits for each
// to acknowledge it, sleeps until then while the survivors go to sleep in
// their receives, and raises SIGKILL.  Each
// survivor times its receive's end from that time and sends the figure to rank
// 0, which prints them all and "neighbour_death: PASS" last when every figure
// is within the bound.  Run with 2 or more ranks under
// `transit_run --keep-going` or mpirun's recovery.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "checks.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::uint32_t tag_plan = 1;
constexpr std::uint32_t tag_never = 2;
constexpr std::uint32_t tag_figure = 3;
constexpr std::uint32_t tag_ack = 4;
// Long enough for every survivor to be asleep in its receive when it comes.
constexpr auto victim_life = milliseconds(300);
constexpr auto noticed_within = milliseconds(1000);

transit::test::Checks check{"neighbour_death"};

// A hang is a failure with its line, not the launcher's timeout.
void watchdog(int) {
    const char line[] = "neighbour_death: FAIL: a survivor still blocked after 15 s\n";
    (void)!::write(1, line, sizeof line - 1);
    ::_exit(1);
}

std::int64_t ticks(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

[[noreturn]] void victim(Context& ctx) {
    const Clock::time_point die_at = Clock::now() + victim_life;
    const std::int64_t plan = ticks(die_at);
    for (Rank r = 0; r + 1 < ctx.size(); ++r)
        check(ok(ctx.send(r, tag_plan, &plan, sizeof plan)), "the victim sends its plan");
    // Every survivor has all the victim sent (its barrier signals, the plan):
    // on another node they could still be in the victim's transport.
    for (Rank r = 0; r + 1 < ctx.size(); ++r) {
        char ack = 0;
        check(ok(ctx.recv(r, tag_ack, &ack, 1)), "the victim receives an acknowledgement");
    }
    // Kept: dying at the planned time is what the survivors' delays are measured from.
    std::this_thread::sleep_until(die_at);
    std::raise(SIGKILL);
    ::_exit(1);  // not reached
}

// How long after the victim's death this survivor's receive from it ended
// with peer_failed (-1: it ended otherwise).
std::int64_t survive(Context& ctx, Rank victim_rank) {
    char never = 0;
    Request* r = nullptr;
    check(ok(ctx.irecv(victim_rank, tag_never, &never, 1, r)), "irecv from the victim");
    std::int64_t plan = 0;
    check(ok(ctx.recv(victim_rank, tag_plan, &plan, sizeof plan)), "receive the victim's plan");
    const char ack = 'a';
    check(ok(ctx.send(victim_rank, tag_ack, &ack, 1)), "acknowledge the plan");
    std::signal(SIGALRM, watchdog);
    ::alarm(15);
    const Status s = ctx.wait(r);
    const std::int64_t after_ms = (ticks(Clock::now()) - plan) / 1000000;
    ::alarm(0);
    check(s == Status::peer_failed,
          "the receive from the victim ends peer_failed, got " + std::string(to_string(s)));
    return s == Status::peer_failed ? after_ms : -1;
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        auto ctx = std::make_unique<Context>(init());
        const Rank n = ctx->size();
        if (n < 2) {
            std::printf("neighbour_death: FAIL: needs 2 ranks or more, got %u\n", n);
            return 1;
        }
        const Rank victim_rank = n - 1;
        // Every survivor has its receive posted before the victim's clock runs.
        const Status b = ctx->barrier();
        check(ok(b), "barrier before the victim's plan: " + std::string(to_string(b)));
        if (!ok(b)) return 1;
        if (ctx->rank() == victim_rank) victim(*ctx);
        const std::int64_t mine = survive(*ctx, victim_rank);
        if (ctx->rank() != 0) {
            check(ok(ctx->send(0, tag_figure, &mine, sizeof mine)), "send the figure to rank 0");
        } else {
            for (Rank r = 0; r < victim_rank; ++r) {
                std::int64_t ms = mine;
                if (r != 0) check(ok(ctx->recv(r, tag_figure, &ms, sizeof ms)), "receive a figure");
                std::printf("neighbour_death: rank %u saw peer_failed %lld ms after the death\n", r,
                            static_cast<long long>(ms));
                check(ms >= 0 && ms < noticed_within.count(),
                      "rank " + std::to_string(r) + " noticed within " +
                          std::to_string(noticed_within.count()) + " ms");
            }
        }
        ctx.reset();  // finalize: must not wait for the dead peer
    } catch (const std::exception& e) {
        std::printf("neighbour_death: FAIL: %s\n", e.what());
        return 1;
    }
    return check.verdict();
}
