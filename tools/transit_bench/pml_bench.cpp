// The benchmarks over the pml (transit::Context), OSU style: ping-pong latency
// (half round trip), windowed streaming bandwidth, bidirectional bandwidth,
// message rate, and put/get/atomic latency (operation + flush).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tools/transit_bench/bench.hpp"
#include "tools/transit_bench/buffer.hpp"
#include "tools/transit_bench/status_check.hpp"
#include "transit/transit.hpp"

namespace transit::bench {

namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
}

constexpr std::uint32_t data_tag = 1;
constexpr std::uint32_t ack_tag = 2;
constexpr std::uint32_t key_tag = 3;
constexpr std::uint32_t check_tag = 4;
constexpr std::uint32_t verdict_tag = 5;

struct Bench {
    Context& ctx;
    const Options& o;
    Rank me;
    Rank peer;
    bool active;  // ranks 0 and 1 run the test; others only join barriers
    Buffer& sbuf;
    Buffer& rbuf;
    // Each pair of threads its own (--threads).
    std::uint32_t data = data_tag;
    std::uint32_t ack = ack_tag;

    // Half-round-trip latency in µs (a whole round trip with one rank).
    double latency(std::size_t size, int iters, int warm) {
        const double m = round_trip_us(o, size, iters, warm, [&] { round_trip(size); });
        return peer == me ? m : m / 2;
    }

    void round_trip(std::size_t size) {
        if (peer == me) {  // one rank: loopback through self
            Request* r;
            Request* s;
            check(ctx.irecv(me, data, rbuf.data(), size, r), "irecv");
            check(ctx.isend(me, data, sbuf.data(), size, s), "isend");
            check(ctx.wait(s), "wait");
            check(ctx.wait(r), "wait");
        } else if (me == 0) {
            check(ctx.send(peer, data, sbuf.data(), size), "send");
            check(ctx.recv(peer, data, rbuf.data(), size), "recv");
        } else {
            check(ctx.recv(peer, data, rbuf.data(), size), "recv");
            check(ctx.send(peer, data, sbuf.data(), size), "send");
        }
    }

    // Streaming: `trials` timed runs of the same number of windows, the median
    // value (MB/s, or M msg/s for msgrate).  Without --iterations the window
    // count is calibrated on rank 0 from the warm-up so that a trial lasts
    // trial_seconds() (as mpi_pingpong does), and sent to rank 1: both must
    // run the same count.
    double streaming(std::size_t size, int iters, int warm, bool both) {
        const double probe = warm > 0 ? stream(size, warm, both) : 0;
        if (o.iterations == 0) iters = agree_on(calibrated(iters, warm, probe));
        std::vector<double> values;
        const double msgs = static_cast<double>(iters) * o.window * (both ? 2 : 1);
        for (int t = 0; t < trials_for(o); ++t) {
            const double sec = stream(size, iters, both);
            values.push_back(o.test == "msgrate" ? msgs / sec / 1e6
                                                 : static_cast<double>(size) * msgs / sec / 1e6);
        }
        return median(values);
    }

    int calibrated(int fallback, int warm, double probe_seconds) const {
        if (warm <= 0 || probe_seconds <= 0) return fallback;
        const double per_window = probe_seconds / warm;
        const double n = trial_seconds(o) / per_window;
        return static_cast<int>(std::clamp(n, 3.0, 1e6));
    }

    int agree_on(int iters) {
        if (peer == me) return iters;
        std::int32_t n = iters;
        if (me == 0)
            check(ctx.send(peer, key_tag, &n, sizeof n), "send the trial length");
        else
            check(ctx.recv(peer, key_tag, &n, sizeof n), "receive the trial length");
        return n;
    }

    // Streams `window` messages per iteration; returns the seconds taken.
    double stream(std::size_t size, int iters, bool both) {
        std::vector<Request*> reqs(2 * static_cast<std::size_t>(o.window));
        char token = 0;  // the acknowledgement's byte; `ack` is its tag
        const clock::time_point t0 = clock::now();
        for (int i = 0; i < iters; ++i) {
            std::size_t n = 0;
            const bool sender = me == 0 || both || peer == me;
            const bool receiver = me == 1 || both || peer == me;
            for (int w = 0; w < o.window; ++w) {
                if (receiver)
                    check(ctx.irecv(peer, data, rbuf.data() + 0, size, reqs[n++]), "irecv");
                if (sender) check(ctx.isend(peer, data, sbuf.data(), size, reqs[n++]), "isend");
            }
            check(ctx.wait_all({reqs.data(), n}), "wait_all");
            if (peer == me) continue;
            if (me == 0)
                check(ctx.recv(peer, ack, &token, 1), "recv ack");
            else
                check(ctx.send(peer, ack, &token, 1), "send ack");
        }
        return seconds_since(t0);
    }

    // Outside the timed loops, once per size: a message each way (or a put
    // read back with a get, for the one-sided tests) whose length and every
    // byte are checked, so a configuration that loses or damages data fails
    // the run instead of printing a row.  Both ranks throw on a mismatch.
    void check_data(std::size_t size, bool onesided, const RemoteKey* key) {
        if (!active) return;
        if (onesided) {
            if (me != 0) return;
            fill(sbuf, size, 1);
            std::memset(rbuf.data(), 0, size);
            check(ctx.put(peer, sbuf.data(), size, key, 0), "data check: put");
            check(ctx.flush(peer), "data check: flush");
            check(ctx.get(peer, rbuf.data(), size, key, 0), "data check: get");
            check(ctx.flush(peer), "data check: flush");
            if (const std::string bad = mismatch(size, size, 1); !bad.empty())
                throw std::runtime_error(fmt::format(
                    "data check at {} B: what a put wrote, a get read back wrong: {}", size, bad));
            return;
        }
        if (peer == me) {
            Request* r;
            RequestStatus st;
            std::memset(rbuf.data(), 0, size);
            fill(sbuf, size, 1);
            check(ctx.irecv(me, check_tag, rbuf.data(), size, r), "data check: irecv");
            check(ctx.send(me, check_tag, sbuf.data(), size), "data check: send");
            check(ctx.wait(r, &st), "data check: wait");
            if (const std::string bad = mismatch(size, st.sent_length, 1); !bad.empty())
                throw std::runtime_error(fmt::format("data check at {} B: {}", size, bad));
            return;
        }
        // Rank 0 sends pattern 1, rank 1 answers with pattern 2 and its verdict.
        const int mine = me == 0 ? 1 : 2;
        const int theirs = 3 - mine;
        std::string bad;
        for (int step = 0; step < 2; ++step) {
            if ((step == 0) == (me == 0)) {
                fill(sbuf, size, mine);
                check(ctx.send(peer, check_tag, sbuf.data(), size), "data check: send");
            } else {
                RequestStatus st;
                std::memset(rbuf.data(), 0, size);
                check(ctx.recv(peer, check_tag, rbuf.data(), size, &st), "data check: recv");
                bad = mismatch(size, st.sent_length, theirs);
            }
        }
        char verdict = bad.empty() ? 1 : 0;
        if (me == 0)
            check(ctx.recv(peer, verdict_tag, &verdict, 1), "data check: recv verdict");
        else
            check(ctx.send(peer, verdict_tag, &verdict, 1), "data check: send verdict");
        if (!bad.empty())
            throw std::runtime_error(fmt::format("data check at {} B: {}", size, bad));
        if (verdict != 1)
            throw std::runtime_error(
                fmt::format("data check at {} B: rank {} received damaged data", size, peer));
    }

    void fill(Buffer& b, std::size_t size, int which) const noexcept {
        fill_pattern({b.data(), size}, which);
    }
    // What is wrong with rbuf after receiving `size` bytes of pattern `which`
    // (`sent`: the length the sender sent); "" when nothing.
    std::string mismatch(std::size_t size, std::size_t sent, int which) const {
        if (sent != size) return fmt::format("{} bytes arrived, {} were sent", sent, size);
        return pattern_mismatch({rbuf.data(), size}, size, which);
    }

    double onesided(const std::string& test, std::size_t size, int iters, int warm,
                    const RemoteKey* key) {
        std::uint64_t fetched = 0;
        clock::time_point t0{};
        for (int i = 0; i < iters + warm; ++i) {
            if (i == warm) t0 = clock::now();
            if (test == "put_latency")
                check(ctx.put(peer, sbuf.data(), size, key, 0), "put");
            else if (test == "get_latency")
                check(ctx.get(peer, rbuf.data(), size, key, 0), "get");
            else
                check(ctx.atomic(peer, AtomicOp::add, AtomicWidth::bits64, key, 0, 1, &fetched),
                      "atomic");
            check(ctx.flush(peer), "flush");
        }
        return seconds_since(t0) * 1e6 / iters;
    }
};

// --threads: T copies of `b`, each with its own buffers and tags, run at once.
class ThreadPairs {
  public:
    ThreadPairs(const Bench& b, std::size_t bufsize) : o_(b.o) {
        // Pairs take turns at the lock: a block's median would time the turns
        // a pair was given alone; the mean times them all.
        o_.stat = LatencyStat::mean;
        for (int t = 0; t < b.o.threads; ++t) {
            bufs_.push_back(
                std::make_unique<Buffer>(b.ctx, bufsize, b.o.mem_alloc, std::byte{0x5a}));
            bufs_.push_back(std::make_unique<Buffer>(b.ctx, bufsize, b.o.mem_alloc, std::byte{0}));
            const auto tag = 16 + 2 * static_cast<std::uint32_t>(t);
            benches_.push_back(Bench{b.ctx, o_, b.me, b.peer, b.active, *bufs_[2 * t],
                                     *bufs_[2 * t + 1], tag, tag + 1});
        }
    }

    // The mean over the pairs of each one's half round trip.
    double latency(std::size_t size, int iters, int warm) {
        std::vector<double> us(benches_.size());
        run([&](std::size_t t) { us[t] = benches_[t].latency(size, iters, warm); });
        double sum = 0;
        for (double v : us) sum += v;
        return sum / static_cast<double>(us.size());
    }

    // Million messages a second, all pairs together; trials as Bench::streaming,
    // each pair streaming a share of the calibrated windows.
    double msgrate(Bench& b, std::size_t size, int iters, int warm) {
        const double probe = warm > 0 ? b.stream(size, warm, false) : 0;
        if (b.o.iterations == 0) iters = b.agree_on(b.calibrated(iters, warm, probe));
        iters = std::max(3, iters / static_cast<int>(benches_.size()));
        std::vector<double> values;
        const double msgs = static_cast<double>(iters) * b.o.window * benches_.size();
        for (int t = 0; t < trials_for(b.o); ++t) {
            const clock::time_point t0 = clock::now();
            run([&](std::size_t p) { benches_[p].stream(size, iters, false); });
            values.push_back(msgs / seconds_since(t0) / 1e6);
        }
        return median(values);
    }

  private:
    template <typename F>
    void run(F f) {
        std::vector<std::thread> ts;
        for (std::size_t t = 0; t < benches_.size(); ++t) ts.emplace_back(f, t);
        for (std::thread& t : ts) t.join();
    }

    Options o_;
    std::vector<std::unique_ptr<Buffer>> bufs_;
    std::vector<Bench> benches_;
};

}  // namespace

std::string peer_transports(Context& ctx, std::uint32_t peer) {
    const PeerTransports t = ctx.transports(peer);
    auto list = [](const std::vector<std::string>& names) {
        return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, "+"));
    };
    return fmt::format("eager {}, send {}, rdma {}", list(t.eager), list(t.send), list(t.rdma));
}

int run_pml(const Options& o, int, char**) {
    Context ctx = o.threads > 1 ? init(ThreadLevel::multiple) : init();
    Rank me = ctx.rank();
    require_two_ranks(o, ctx.size());
    if (ctx.size() > 2 && me == 0)
        fmt::print(stderr, "transit_bench: {} ranks; ranks 0 and 1 run, the others wait\n",
                   ctx.size());
    const bool onesided = o.test.find("_latency") != std::string::npos && o.test != "latency";
    std::size_t bufsize = std::max<std::size_t>(o.max_size, 8);
    Buffer sbuf(ctx, bufsize, o.mem_alloc, std::byte{0x5a});
    Buffer rbuf(ctx, bufsize, o.mem_alloc, std::byte{0});
    Bench b{ctx, o, me, ctx.size() == 1 ? 0 : (me == 0 ? 1u : 0u), me < 2, sbuf, rbuf};
    std::unique_ptr<ThreadPairs> pairs;
    if (o.threads > 1) pairs = std::make_unique<ThreadPairs>(b, bufsize);

    // One-sided tests: rank 1 (or 0 alone) exposes a region and sends its key.
    MemoryRegion* region = nullptr;
    RemoteKey* key = nullptr;
    void* window = nullptr;
    if (onesided && b.active) {
        Rank owner = ctx.size() == 1 ? 0 : 1;
        if (me == owner) {
            window = ctx.mem_alloc(bufsize);
            if (!window) throw std::runtime_error("mem_alloc failed");
            std::memset(window, 0, bufsize);
            check(ctx.register_memory(window, bufsize, region), "register_memory");
            auto packed = ctx.pack_key(region);
            if (me == 0) {
                check(ctx.unpack_key(packed, key), "unpack_key");
            } else {
                check(ctx.send(0, key_tag, packed.data(), packed.size()), "send key");
            }
        } else {
            std::vector<std::byte> packed(4096);
            RequestStatus st;
            check(ctx.recv(owner, key_tag, packed.data(), packed.size(), &st), "recv key");
            packed.resize(st.length);
            check(ctx.unpack_key(packed, key), "unpack_key");
        }
    }

    // No table without a path: the bml's warning above has said why.
    if (b.active && ctx.transports(b.peer).eager.empty())
        throw std::runtime_error(fmt::format("no selected transport reaches rank {}", b.peer));
    if (me == 0)
        print_header(o,
                     fmt::format("the pml to rank {}: {}", b.peer, peer_transports(ctx, b.peer)));
    std::vector<std::size_t> list = sizes(o);
    if (o.test == "atomic_latency") list = {8};
    if (o.test == "msgrate" && o.min_size == 0 && o.max_size == (4u << 20)) list = {8};
    for (std::size_t size : list) {
        const bool bw = o.test == "bw" || o.test == "bibw" || o.test == "msgrate";
        int iters = iterations_for(o, size, bw);
        int warm = warmup_for(o, size);
        check(ctx.barrier(), "barrier");
        if (!b.active) continue;
        double value = 0;
        if (pairs && o.test == "latency") {
            value = pairs->latency(size, iters, warm);
        } else if (pairs) {
            value = pairs->msgrate(b, size, iters, warm);
        } else if (o.test == "latency") {
            value = b.latency(size, iters, warm);
        } else if (bw) {
            value = b.streaming(size, iters, warm, o.test == "bibw");
        } else if (onesided) {
            if (me == 0) value = b.onesided(o.test, size, iters, warm, key);
        }
        b.check_data(std::max<std::size_t>(size, onesided ? 8 : 0), onesided, key);
        if (me == 0) print_row(o, {size, value});
    }
    check(ctx.barrier(), "barrier");
    pairs.reset();
    if (key) ctx.release_key(key);
    if (region) ctx.deregister_memory(region);
    if (window) ctx.mem_free(window);
    return 0;
}

}  // namespace transit::bench
