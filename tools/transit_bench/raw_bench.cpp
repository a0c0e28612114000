// --raw-btl NAME: the same ping-pong and streaming tests straight over one btl
// module (sendi, else alloc + send), to see what the pml adds.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "framework/btl_framework.hpp"
#include "runtime/runtime.hpp"
#include "tools/transit_bench/bench.hpp"
#include "transit/params.hpp"

namespace transit::bench {

namespace {

using clock = std::chrono::steady_clock;

struct Raw {
    btl::Module* module = nullptr;
    btl::Endpoint* ep = nullptr;
    ProgressEngine* pe = nullptr;
    std::uint64_t received = 0;
    std::vector<std::byte> buf;
    bool keep = false;            // check_data: on_recv copies the next message into kept
    std::vector<std::byte> kept;  // reserved to the largest size, so the copy never allocates
    static constexpr btl::Tag tag = btl::AmTable::tag(btl::TagRange::user, 0);

    static void on_recv(btl::Module*, const btl::ReceiveDescriptor& d, void* cb) noexcept {
        Raw* raw = static_cast<Raw*>(cb);
        ++raw->received;
        if (!raw->keep) [[likely]]
            return;
        // The one message asked for: the peer may already stream the next
        // size's messages behind it.
        raw->keep = false;
        raw->kept.clear();
        for (std::size_t i = 0; i < d.segment_count; ++i) {
            const auto* p = static_cast<const std::byte*>(d.segments[i].addr);
            const std::size_t n =
                std::min<std::size_t>(d.segments[i].len, raw->kept.capacity() - raw->kept.size());
            raw->kept.insert(raw->kept.end(), p, p + n);
        }
    }

    // Outside the timed loops, once per size: one message each way whose
    // length and bytes are checked (see pml_bench.cpp's check_data); rank 1
    // answers rank 0 with its verdict, one byte.  `expect` counts arrivals;
    // each side's next arrival is the message checked (FIFO per peer).
    void check_data(std::size_t size, Rank me, Rank peer, std::uint64_t& expect) {
        keep = true;
        kept.clear();
        std::string bad;
        if (me == 0 || peer == me) {
            fill_pattern({buf.data(), size}, 1);
            send(size);
            wait_for(++expect);
            if (peer == me)
                bad = pattern_mismatch(kept, size, 1);
            else if (kept.size() != 1 || kept[0] != std::byte{1})
                bad = fmt::format("rank {} received damaged data", peer);
        } else if (me == 1) {
            wait_for(++expect);
            bad = pattern_mismatch(kept, size, 1);
            buf[0] = bad.empty() ? std::byte{1} : std::byte{0};
            send(1);
        }
        keep = false;
        if (!bad.empty())
            throw std::runtime_error(fmt::format("data check at {} B: {}", size, bad));
    }

    // The common case inline and small (no frame to speak of: it is on the
    // critical path of every round trip); everything else out of line.
    void send(std::size_t size) {
        btl::Convertor conv(buf.data(), size);
        const Status s = module->sendi(ep, &conv, nullptr, 0, size, btl::no_order, 0, tag, nullptr);
        if (s != Status::completed && s != Status::success) [[unlikely]]
            send_slowly(size, s);
    }
    // sendi refused for want of room: a descriptor, retried while the module
    // has none; any other refusal ends the benchmark.
    [[gnu::noinline]] void send_slowly(std::size_t size, Status s) {
        for (;;) {
            if (s != Status::out_of_resource)
                throw std::runtime_error(fmt::format("send failed: {}", to_string(s)));
            if (btl::Descriptor* d =
                    module->alloc(ep, btl::no_order, size, btl::des_flags::btl_ownership)) {
                std::memcpy(d->segments[0].addr, buf.data(), size);
                d->segments[0].len = size;
                d->flags |= btl::des_flags::btl_ownership;
                d->cbfunc = [](btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) {};
                while ((s = module->send(ep, d, tag)) == Status::out_of_resource) pe->progress();
                if (!ok(s)) throw std::runtime_error(fmt::format("send failed: {}", to_string(s)));
                return;
            }
            pe->progress();
            btl::Convertor conv(buf.data(), size);
            s = module->sendi(ep, &conv, nullptr, 0, size, btl::no_order, 0, tag, nullptr);
            if (s == Status::completed || s == Status::success) return;
        }
    }
    void wait_for(std::uint64_t n) {
        while (received < n) pe->progress();
    }
};

}  // namespace

int run_raw(const Options& o) {
    if (o.test != "latency" && o.test != "bw" && o.test != "bibw" && o.test != "msgrate")
        throw std::runtime_error(
            fmt::format("--raw-btl supports latency, bw, bibw and msgrate, not {}", o.test));
    auto runtime = rt::open_runtime();
    require_two_ranks(o, runtime->size());
    btl::Framework fw(*runtime, progress_engine(), btl::am_table());
    std::string sel = o.raw_btl == "self" ? "self" : "self," + o.raw_btl;
    params::registry().set("btl", sel, params::Source{params::Origin::api, {}, 0});
    fw.open();
    fw.init();
    if (Status s = runtime->fence(); !ok(s))
        throw std::runtime_error(fmt::format("fence failed: {}", to_string(s)));
    Raw raw;
    raw.pe = &progress_engine();
    const Rank me = runtime->rank();
    const Rank peer = runtime->size() == 1 ? 0 : (me == 0 ? 1 : 0);
    // A component may have several modules (tcp: one per interface); time the
    // first, in exclusivity order, that reaches the peer.
    bool found = false;
    for (btl::Module* m : fw.modules()) {
        if (m->component().name() != o.raw_btl) continue;
        found = true;
        btl::Reachability reach(1);
        btl::Endpoint* ep = nullptr;
        if (ok(m->add_procs({&peer, 1}, {&ep, 1}, reach)) && reach.test(0)) {
            raw.module = m;
            raw.ep = ep;
            break;
        }
    }
    if (!found)
        throw std::runtime_error(
            fmt::format("btl {} is not available here (see transit_info)", o.raw_btl));
    if (!raw.module)
        throw std::runtime_error(
            fmt::format("btl {} does not reach rank {} from rank {}", o.raw_btl, peer, me));
    btl::am_table().register_callback(Raw::tag, &Raw::on_recv, &raw);
    const std::size_t limit = raw.module->attributes().max_send_size;
    raw.buf.assign(std::max<std::size_t>(o.max_size, 8), std::byte{0x5a});
    raw.kept.reserve(raw.buf.size());
    if (runtime->fence() != Status::success) throw std::runtime_error("fence failed");
    if (me == 0) print_header(o, o.raw_btl + " (raw btl, no pml)");
    std::uint64_t expect = 0;
    for (std::size_t size : sizes(o)) {
        if (size > limit) {
            if (me == 0 && !o.csv)
                fmt::print("# larger sizes exceed {}'s max_send_size ({} bytes)\n", o.raw_btl,
                           limit);
            break;
        }
        const bool bw = o.test != "latency";
        int iters = iterations_for(o, size, bw);
        int warm = warmup_for(o, size);
        if (me > 1) continue;
        if (!bw) {
            const double m = round_trip_us(o, size, iters, warm, [&] {
                if (me == 0 || peer == me) {
                    raw.send(size);
                    raw.wait_for(++expect);
                } else {
                    raw.wait_for(++expect);
                    raw.send(size);
                }
            });
            raw.check_data(size, me, peer, expect);
            if (me == 0) print_row(o, {size, peer == me ? m : m / 2});
            continue;
        }
        clock::time_point t0{};
        for (int i = 0; i < iters + warm; ++i) {
            if (i == warm) t0 = clock::now();
            const bool both = o.test == "bibw" || peer == me;
            if (me == 0 || both)
                for (int w = 0; w < o.window; ++w) raw.send(size);
            if (me == 1 || both) {
                expect += o.window;
                raw.wait_for(expect);
            }
            if (peer == me) continue;
            // a one-message ack closes the window
            if (me == 1) {
                raw.send(1);
            } else {
                raw.wait_for(++expect);
            }
        }
        const double t = std::chrono::duration<double>(clock::now() - t0).count();
        const double msgs = static_cast<double>(iters) * o.window * (o.test == "bibw" ? 2 : 1);
        const double value =
            o.test == "msgrate" ? msgs / t / 1e6 : static_cast<double>(size) * msgs / t / 1e6;
        raw.check_data(size, me, peer, expect);
        if (me == 0) print_row(o, {size, value});
    }
    // Let the peer drain before anything is torn down.
    runtime->fence();
    btl::am_table().unregister_callback(Raw::tag);
    btl::Endpoint* e = raw.ep;
    raw.module->del_procs({&peer, 1}, {&e, 1});
    return 0;
}

}  // namespace transit::bench
