// A peer killed while every rank streams with every other: each rank keeps 4
// sends and 4 receives in flight with each peer (every 4th message 4 MiB, the
// others 1 to 40,000 bytes, so eager, rendezvous and rdma are all under way)
// and the last rank raises SIGKILL after 300 ms.  Each survivor must see every
// request with the victim end with peer_failed (or success, for a message that
// was in whole before the death) within 1 s of its first failure, no other
// status, and its traffic with the other survivors go on and end exactly.
//
// Run with 3 or more ranks under `transit_run --keep-going`; the survivors send
// rank 0 their failure counts, and rank 0 prints "peer_failure_mesh: PASS"
// last.  A request still pending after the second is reported and the rank
// exits at once (failing, not hanging).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checks.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::uint32_t tag_data = 1;
constexpr std::uint32_t tag_stop = 2;     // a survivor's count of the messages it sent
constexpr std::uint32_t tag_verdict = 3;  // a survivor's failure count, to rank 0
constexpr std::size_t window = 4;
constexpr std::size_t large = 4u << 20;
constexpr auto victim_life = milliseconds(300);
constexpr auto settle_limit = milliseconds(1000);  // first failure to the last request
constexpr auto detect_limit = std::chrono::seconds(20);

transit::test::Checks check{"peer_failure_mesh"};

std::size_t size_of(std::uint64_t k) {
    if (k % 4 == 3) return large;
    return 1 + (k * 2654435761u) % 40000;
}

// A message stamps its sender and index at both ends (as far as it is long).
void stamp(std::vector<std::byte>& buf, Rank src, std::uint64_t k, std::size_t len) {
    const std::uint64_t word = (std::uint64_t{src} << 48) | k;
    std::memcpy(buf.data(), &word, std::min(len, sizeof word));
    if (len >= 2 * sizeof word) std::memcpy(buf.data() + len - sizeof word, &word, sizeof word);
}

bool stamped(const std::vector<std::byte>& buf, Rank src, std::uint64_t k, std::size_t len) {
    const std::uint64_t word = (std::uint64_t{src} << 48) | k;
    std::uint64_t got = 0;
    std::memcpy(&got, buf.data(), std::min(len, sizeof got));
    std::uint64_t expect = 0;
    std::memcpy(&expect, &word, std::min(len, sizeof word));
    if (got != expect) return false;
    if (len < 2 * sizeof word) return true;
    std::memcpy(&got, buf.data() + len - sizeof word, sizeof got);
    return got == word;
}

struct Slot {
    Request* req = nullptr;
    std::uint64_t k = 0;
    std::vector<std::byte> buf = std::vector<std::byte>(large);
};

// The traffic with one peer: `window` sends and receives in flight.
struct Stream {
    Rank peer = 0;
    std::array<Slot, window> sends{}, recvs{};
    std::uint64_t sent = 0, posted = 0, received = 0;
    bool sending = true, receiving = true;
    std::uint64_t expect = UINT64_MAX;  // messages the peer sent in all, once it said
    std::size_t failed = 0, late_success = 0;
    std::uint64_t count = 0, expect_in = 0;  // the counts exchanged at the end
    Request *count_send = nullptr, *count_recv = nullptr;

    bool idle() const {
        for (const Slot& s : sends)
            if (s.req) return false;
        for (const Slot& s : recvs)
            if (s.req) return false;
        return true;
    }
};

Rank me = 0;

bool sends_done(const Stream& st) {
    for (const Slot& s : st.sends)
        if (s.req) return false;
    return true;
}
Rank victim_rank = 0;

// A new request to the victim fails at once once its failure is known.
void posted(Stream& st, Status rc, const char* what) {
    if (rc == Status::peer_failed && st.peer == victim_rank) {
        ++st.failed;
        st.sending = st.receiving = false;
        return;
    }
    check(ok(rc), std::string(what) + " rank " + std::to_string(st.peer) + ": " +
                      std::string(to_string(rc)));
}

void post_send(Context& ctx, Stream& st, Slot& s) {
    s.k = st.sent++;
    const std::size_t len = size_of(s.k);
    stamp(s.buf, me, s.k, len);
    const Status rc = ctx.isend(st.peer, tag_data, s.buf.data(), len, s.req);
    posted(st, rc, "isend to");
}

void post_recv(Context& ctx, Stream& st, Slot& s) {
    s.k = st.posted++;
    const Status rc = ctx.irecv(st.peer, tag_data, s.buf.data(), s.buf.size(), s.req);
    posted(st, rc, "irecv from");
}

// Tests every request of the stream; a finished one is checked and, while
// the stream runs, replaced.  Returns a status other than success when one
// ended so (the first failure seen).
Status pump(Context& ctx, Stream& st, bool victim_failed) {
    Status first_bad = Status::success;
    auto settle = [&](Slot& s, bool is_recv) {
        if (!s.req) return false;
        bool done = false;
        RequestStatus rs;
        const Status rc = ctx.test(s.req, done, &rs);
        if (!done) return false;
        const std::string what = std::string(is_recv ? "receive " : "send ") + std::to_string(s.k) +
                                 (is_recv ? " from" : " to") + " rank " + std::to_string(st.peer);
        if (rc == Status::success) {
            if (victim_failed) ++st.late_success;
            if (is_recv) {
                ++st.received;
                check(rs.length == size_of(s.k) && stamped(s.buf, st.peer, s.k, rs.length),
                      what + " arrived wrong (length " + std::to_string(rs.length) + ")");
            }
            return true;
        }
        ++st.failed;
        if (first_bad == Status::success) first_bad = rc;
        check(rc == Status::peer_failed, what + " ended with " + std::string(to_string(rc)));
        return false;
    };
    for (Slot& s : st.sends)
        if (settle(s, false) && st.sending && first_bad == Status::success) post_send(ctx, st, s);
    for (Slot& s : st.recvs)
        if (settle(s, true) && st.receiving && st.posted < st.expect &&
            first_bad == Status::success)
            post_recv(ctx, st, s);
    return first_bad;
}

void start(Context& ctx, Stream& st) {
    for (Slot& s : st.recvs) post_recv(ctx, st, s);
    for (Slot& s : st.sends) post_send(ctx, st, s);
}

[[noreturn]] void victim(Context& ctx, std::vector<Stream>& streams) {
    const auto die_at = Clock::now() + victim_life;
    for (Stream& st : streams) start(ctx, st);
    while (Clock::now() < die_at) {
        ctx.progress();
        for (Stream& st : streams) pump(ctx, st, false);
    }
    std::raise(SIGKILL);
    _exit(1);  // not reached
}

// Prints what is still pending with `st` and leaves: a hang becomes a failure.
[[noreturn]] void give_up(const Stream& st, const char* when) {
    for (const Slot& s : st.sends)
        if (s.req)
            check(false, "send " + std::to_string(s.k) + " to rank " + std::to_string(st.peer) +
                             " still pending " + when);
    for (const Slot& s : st.recvs)
        if (s.req)
            check(false, "receive " + std::to_string(s.k) + " from rank " +
                             std::to_string(st.peer) + " still pending " + when);
    std::printf("peer_failure_mesh: FAILED\n");
    std::fflush(stdout);
    _exit(1);
}

void survivor(Context& ctx, std::vector<Stream>& streams, Stream& dead) {
    const auto begin = Clock::now();
    for (Stream& st : streams) start(ctx, st);
    std::optional<Clock::time_point> failed_at;
    while (!failed_at || !dead.idle()) {
        ctx.progress();
        for (Stream& st : streams) {
            const Status s = pump(ctx, st, failed_at.has_value() && &st == &dead);
            if (&st != &dead || (ok(s) && st.failed == 0) || failed_at) continue;
            failed_at = Clock::now();
            st.sending = st.receiving = false;
            std::printf("peer_failure_mesh: rank %u: first failure with rank %u after %lld ms\n",
                        me, st.peer,
                        static_cast<long long>(
                            std::chrono::duration_cast<milliseconds>(*failed_at - begin).count()));
        }
        const auto now = Clock::now();
        if (!failed_at && now - begin > detect_limit) give_up(dead, "and no failure seen");
        if (failed_at && now - *failed_at > settle_limit)
            give_up(dead, "1 s after the first failure with that rank");
    }
    std::printf(
        "peer_failure_mesh: rank %u: every request with rank %u ended %lld ms after its first "
        "failure (%zu failed, %zu succeeded after it); %llu sent, %llu received before\n",
        me, dead.peer,
        static_cast<long long>(
            std::chrono::duration_cast<milliseconds>(Clock::now() - *failed_at).count()),
        dead.failed, dead.late_success, static_cast<unsigned long long>(dead.sent),
        static_cast<unsigned long long>(dead.received));
    check(dead.failed > 0, "some request with the victim failed");

    // The survivors' own traffic goes on: each stops sending, tells the other
    // how many it sent, and receives exactly that many while its last sends
    // complete.
    const auto until = Clock::now() + std::chrono::seconds(20);
    for (Stream& st : streams) {
        if (&st == &dead) continue;
        st.sending = false;
        st.count = st.sent;
        check(ok(ctx.isend(st.peer, tag_stop, &st.count, sizeof st.count, st.count_send)),
              "send the count");
        check(ok(ctx.irecv(st.peer, tag_stop, &st.expect_in, sizeof st.expect_in, st.count_recv)),
              "receive the count");
    }
    for (Stream& st : streams) {
        if (&st == &dead) continue;
        bool done = false;
        while ((st.count_send || st.count_recv || st.received < st.expect || !sends_done(st)) &&
               Clock::now() < until) {
            ctx.progress();
            if (st.count_send) ctx.test(st.count_send, done);
            if (st.count_recv && ok(ctx.test(st.count_recv, done)) && done)
                st.expect = st.expect_in;
            pump(ctx, st, false);
        }
        if (Clock::now() >= until) give_up(st, "20 s after the survivors stopped sending");
        // Receives posted past the last message: cancelled.
        for (Slot& s : st.recvs) {
            if (!s.req) continue;
            check(ok(ctx.cancel(s.req)), "cancel a surplus receive");
            check(ctx.wait(s.req) == Status::cancelled, "the surplus receive reports cancelled");
        }
        check(st.failed == 0, "no request with a survivor failed");
        std::printf("peer_failure_mesh: rank %u: %llu messages each way with rank %u\n", me,
                    static_cast<unsigned long long>(st.received), st.peer);
    }
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        auto ctx = std::make_unique<Context>(init());
        me = ctx->rank();
        victim_rank = ctx->size() - 1;
        if (ctx->size() < 3) {
            std::printf("peer_failure_mesh: FAIL: needs 3 ranks or more, got %u\n", ctx->size());
            return 1;
        }
        std::vector<Stream> streams;
        for (Rank r = 0; r < ctx->size(); ++r)
            if (r != me) streams.emplace_back().peer = r;
        check(ok(ctx->barrier()), "the barrier before the traffic");
        if (me == victim_rank) victim(*ctx, streams);
        survivor(*ctx, streams, streams.back());
        if (me != 0) {
            const auto n = static_cast<std::uint32_t>(check.failures());
            check(ok(ctx->send(0, tag_verdict, &n, sizeof n)), "send the verdict");
        } else {
            for (Rank r = 1; r < victim_rank; ++r) {
                std::uint32_t n = 1;
                check(ok(ctx->recv(r, tag_verdict, &n, sizeof n)), "receive a verdict");
                check(n == 0, "rank " + std::to_string(r) + " failed");
            }
        }
        const auto start = Clock::now();
        ctx.reset();
        check(Clock::now() - start < std::chrono::seconds(10), "finalize returns within 10 s");
    } catch (const std::exception& e) {
        std::printf("peer_failure_mesh: FAIL: %s\n", e.what());
        return 1;
    }
    // Rank 0 alone prints the job's verdict; every rank's status says its own.
    return me == 0 ? check.verdict() : check.exit_status();
}
