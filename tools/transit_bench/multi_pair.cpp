// transit_bench mbw_mr: the method of osu_mbw_mr.  N ranks form N/2 pairs,
// rank i sending to rank i + N/2, and every pair streams windows of messages
// at once.  A row per size gives the aggregate bandwidth and message rate of
// all pairs: the bytes and messages of every pair over the time from a barrier
// before the first window to a barrier after the last pair finished.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/transit_bench/bench.hpp"
#include "tools/transit_bench/buffer.hpp"
#include "tools/transit_bench/status_check.hpp"
#include "transit/transit.hpp"

namespace transit::bench {

namespace {

using clock = std::chrono::steady_clock;

constexpr std::uint32_t data_tag = 1;
constexpr std::uint32_t ack_tag = 2;
constexpr std::uint32_t count_tag = 3;
constexpr std::uint32_t check_tag = 4;
constexpr std::uint32_t verdict_tag = 5;
constexpr std::size_t verdict_max = 512;  // a receiver's reason, cut to fit

class MultiPair {
  public:
    MultiPair(Context& ctx, const Options& o, Buffer& sbuf, Buffer& rbuf)
        : ctx_(ctx), o_(o), sbuf_(sbuf), rbuf_(rbuf) {
        me_ = ctx.rank();
        const Rank n = ctx.size();
        pairs_ = n == 1 ? 1 : n / 2;
        peer_ = n == 1 ? me_ : me_ < pairs_ ? me_ + pairs_ : me_ - pairs_;
        reqs_.resize(2 * static_cast<std::size_t>(o.window));
    }

    Rank peer() const noexcept { return peer_; }
    Rank pairs() const noexcept { return pairs_; }

    // Seconds of one trial: `iters` windows from every sender at once, each
    // window acknowledged by its receiver.
    double trial(std::size_t size, int iters) {
        const bool self = peer_ == me_;
        const bool sender = self || me_ < pairs_;
        const bool receiver = self || !sender;
        char token = 0;  // the acknowledgement's byte
        check(ctx_.barrier(), "barrier");
        const clock::time_point t0 = clock::now();
        for (int i = 0; i < iters; ++i) {
            std::size_t n = 0;
            for (int w = 0; w < o_.window; ++w) {
                if (receiver)
                    check(ctx_.irecv(peer_, data_tag, rbuf_.data(), size, reqs_[n++]), "irecv");
                if (sender)
                    check(ctx_.isend(peer_, data_tag, sbuf_.data(), size, reqs_[n++]), "isend");
            }
            check(ctx_.wait_all({reqs_.data(), n}), "wait_all");
            if (self) continue;
            if (sender)
                check(ctx_.recv(peer_, ack_tag, &token, 1), "recv ack");
            else
                check(ctx_.send(peer_, ack_tag, &token, 1), "send ack");
        }
        check(ctx_.barrier(), "barrier");
        return std::chrono::duration<double>(clock::now() - t0).count();
    }

    // Without --iterations, rank 0 sizes a trial to last trial_seconds() from
    // the warm-up and tells every rank: all pairs must run the same count.
    int agree_on(int iters, int warm, double warm_seconds) {
        std::int32_t n = iters;
        if (o_.iterations == 0 && me_ == 0 && warm > 0 && warm_seconds > 0)
            n = static_cast<std::int32_t>(
                std::clamp(trial_seconds(o_) / (warm_seconds / warm), 3.0, 1e6));
        if (o_.iterations != 0 || ctx_.size() == 1) return n;
        if (me_ == 0) {
            for (Rank r = 1; r < ctx_.size(); ++r)
                check(ctx_.send(r, count_tag, &n, sizeof n), "send the trial length");
        } else {
            check(ctx_.recv(0, count_tag, &n, sizeof n), "receive the trial length");
        }
        return n;
    }

    // Outside the timed loop, once per size: each sender sends one message of
    // its pair's own pattern (a message delivered to another pair's receiver
    // is told from the right one), each receiver checks its length and every
    // byte and tells rank 0, which tells every rank the outcome.  Every rank
    // throws on a mismatch, so a configuration that damages data prints no row.
    void check_data(std::size_t size) {
        const int which = 1 + static_cast<int>(std::min(me_, peer_));
        std::string bad;
        if (peer_ == me_) {
            Request* r;
            RequestStatus st;
            std::memset(rbuf_.data(), 0, size);
            fill_pattern({sbuf_.data(), size}, which);
            check(ctx_.irecv(me_, check_tag, rbuf_.data(), size, r), "data check: irecv");
            check(ctx_.send(me_, check_tag, sbuf_.data(), size), "data check: send");
            check(ctx_.wait(r, &st), "data check: wait");
            bad = mismatch(size, st.sent_length, which);
        } else if (me_ < pairs_) {
            fill_pattern({sbuf_.data(), size}, which);
            check(ctx_.send(peer_, check_tag, sbuf_.data(), size), "data check: send");
        } else {
            RequestStatus st;
            std::memset(rbuf_.data(), 0, size);
            check(ctx_.recv(peer_, check_tag, rbuf_.data(), size, &st), "data check: recv");
            bad = mismatch(size, st.sent_length, which);
            if (!bad.empty()) bad = fmt::format("rank {} from rank {}: {}", me_, peer_, bad);
        }
        if (!bad.empty() && me_ == 0) bad = fmt::format("rank 0 from rank {}: {}", peer_, bad);
        const std::string verdict = gather_verdicts(bad);
        if (!verdict.empty())
            throw std::runtime_error(fmt::format("data check at {} B: {}", size, verdict));
    }

  private:
    std::string mismatch(std::size_t size, std::size_t sent, int which) const {
        if (sent != size) return fmt::format("{} bytes arrived, {} were sent", sent, size);
        return pattern_mismatch({rbuf_.data(), size}, size, which);
    }

    // Rank 0 collects every rank's complaint ("" for none) and sends each
    // rank the first one; returns it.
    std::string gather_verdicts(std::string mine) {
        const Rank n = ctx_.size();
        if (n == 1) return mine;
        std::vector<char> text(verdict_max);
        if (me_ != 0) {
            mine.resize(std::min(mine.size(), verdict_max));
            check(ctx_.send(0, verdict_tag, mine.data(), mine.size()), "data check: send verdict");
            RequestStatus st;
            check(ctx_.recv(0, verdict_tag, text.data(), text.size(), &st),
                  "data check: recv verdict");
            return std::string(text.data(), st.length);
        }
        std::string first = mine;
        for (Rank r = 1; r < n; ++r) {
            RequestStatus st;
            check(ctx_.recv(r, verdict_tag, text.data(), text.size(), &st),
                  "data check: recv verdict");
            if (first.empty()) first.assign(text.data(), st.length);
        }
        for (Rank r = 1; r < n; ++r)
            check(ctx_.send(r, verdict_tag, first.data(), first.size()),
                  "data check: send verdict");
        return first;
    }

    Context& ctx_;
    const Options& o_;
    Buffer& sbuf_;
    Buffer& rbuf_;
    Rank me_ = 0;
    Rank peer_ = 0;
    Rank pairs_ = 1;
    std::vector<Request*> reqs_;
};

void print_header(const Options& o, const MultiPair& m, Context& ctx) {
    std::FILE* about = o.csv ? stderr : stdout;
    const std::string pairing = m.peer() == 0 ? std::string("rank 0 with itself")
                                              : fmt::format("rank i sends to rank i+{}", m.pairs());
    fmt::print(about,
               "# transit_bench mbw_mr over the pml: {} pair{} ({}, window {}); rank 0 to rank "
               "{}: {}\n",
               m.pairs(), m.pairs() == 1 ? "" : "s", pairing, o.window, m.peer(),
               peer_transports(ctx, m.peer()));
    std::fflush(about);
    if (o.csv)
        fmt::print("bytes,aggregate_mb_per_s,aggregate_mmsg_per_s\n");
    else
        fmt::print("{:>12}  {:>20}  {:>20}\n", "# bytes", "aggregate MB/s", "aggregate M msg/s");
    std::fflush(stdout);
}

void print_row(const Options& o, std::size_t bytes, double mb_per_s, double mmsg_per_s) {
    if (o.csv)
        fmt::print("{},{:.3f},{:.4f}\n", bytes, mb_per_s, mmsg_per_s);
    else
        fmt::print("{:>12}  {:>20.2f}  {:>20.4f}\n", bytes, mb_per_s, mmsg_per_s);
    std::fflush(stdout);
}

}  // namespace

int run_multi_pair(const Options& o) {
    Context ctx = init();
    require_two_ranks(o, ctx.size());
    if (ctx.size() > 1 && ctx.size() % 2 != 0)
        throw UsageError(fmt::format(
            "mbw_mr pairs rank i with rank i+N/2: it needs an even number of ranks, not {}",
            ctx.size()));
    const std::size_t bufsize = std::max<std::size_t>(o.max_size, 8);
    Buffer sbuf(ctx, bufsize, o.mem_alloc, std::byte{0x5a});
    Buffer rbuf(ctx, bufsize, o.mem_alloc, std::byte{0});
    MultiPair m(ctx, o, sbuf, rbuf);
    // No table without a path: the bml's warning has said why.
    if (ctx.transports(m.peer()).eager.empty())
        throw std::runtime_error(fmt::format("no selected transport reaches rank {}", m.peer()));
    if (ctx.rank() == 0) print_header(o, m, ctx);
    for (std::size_t size : sizes(o)) {
        const int warm = warmup_for(o, size);
        const double warm_seconds = warm > 0 ? m.trial(size, warm) : 0;
        const int iters = m.agree_on(iterations_for(o, size, true), warm, warm_seconds);
        std::vector<double> seconds;
        for (int t = 0; t < trials_for(o); ++t) seconds.push_back(m.trial(size, iters));
        m.check_data(size);
        const double messages = static_cast<double>(m.pairs()) * iters * o.window;
        const double sec = median(seconds);
        if (ctx.rank() == 0)
            print_row(o, size, messages * static_cast<double>(size) / sec / 1e6,
                      messages / sec / 1e6);
    }
    check(ctx.barrier(), "barrier");
    return 0;
}

}  // namespace transit::bench
