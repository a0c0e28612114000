// A raw-btl benchmark of vader (not a test): ping-pong latency, 8-byte message
// rate and streaming bandwidth (get, as a rendezvous would use it, and send),
// between two ranks started by transit_run:
//   transit_run -n 2 vader_pingpong [--mca btl_vader_... VALUE]
// Prints a table and, with PP_CSV=1, CSV lines.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "framework/btl_framework.hpp"
#include "runtime/runtime.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/region_table.hpp"
#include "transit/params.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

constexpr btl::Tag tag_data = btl::AmTable::tag(btl::TagRange::pml, 1);
constexpr btl::Tag tag_ack = btl::AmTable::tag(btl::TagRange::pml, 2);

struct Bench {
    rt::Runtime& rt;
    btl::Module& m;
    btl::Endpoint* ep;
    ProgressEngine& pe;
    Rank me;
    std::uint64_t got = 0;
    std::uint64_t acks = 0;
    std::uint64_t acks_expected = 0;  // cumulative: the acker may run a trial ahead
    std::uint64_t remote_buffer = 0;
    btl::RegionKey remote_key{};  // remote_buffer's registration

    void send(btl::Tag tag, const void* data, std::size_t len) {
        for (;;) {
            btl::Convertor conv(data, len);
            btl::Descriptor* d = nullptr;
            Status s = m.sendi(ep, &conv, nullptr, 0, len, btl::no_order, 0, tag, &d);
            if (s == Status::completed) return;
            if (d != nullptr) {
                conv.pack(d->segments[0].addr, len);
                d->segments[0].len = len;
                d->flags |= btl::des_flags::btl_ownership;
                s = m.send(ep, d, tag);
                if (ok(s)) return;
                m.free(d);
            }
            if (s != Status::out_of_resource) {
                fmt::print(stderr, "send failed: {}\n", to_string(s));
                std::exit(1);
            }
            pe.progress();
        }
    }
    void wait_got(std::uint64_t n) {
        while (got < n) pe.progress();
    }
    void wait_acks(std::uint64_t n) {
        while (acks < n) pe.progress();
    }
};

double latency_us(Bench& b, std::size_t size, int iters) {
    std::vector<char> buf(size, 'a');
    const std::uint64_t base = b.got;
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
        if (b.me == 0) {
            b.send(tag_data, buf.data(), size);
            b.wait_got(base + i + 1);
        } else {
            b.wait_got(base + i + 1);
            b.send(tag_data, buf.data(), size);
        }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return s * 1e6 / (2.0 * iters);
}

double message_rate(Bench& b, int window, int iters) {
    std::uint64_t word = 0;
    const std::uint64_t base = b.got, abase = b.acks;
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
        if (b.me == 0) {
            for (int w = 0; w < window; ++w) b.send(tag_data, &word, 8);
            b.wait_acks(abase + i + 1);
        } else {
            b.wait_got(base + std::uint64_t(i + 1) * window);
            b.send(tag_ack, &word, 1);
        }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return double(window) * iters / s / 1e6;
}

// Streaming bandwidth through gets of the peer's buffer (what a rendezvous
// does), timed by the rank that reads; the peer only has to stay alive.  GB/s.
double get_bandwidth(Bench& b, std::vector<char>& local, std::size_t size, int window, int iters) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
        for (int w = 0; w < window; ++w) {
            Status s = b.m.rdma()->get(
                {.endpoint = b.ep,
                 .local = local.data(),
                 .remote = b.remote_buffer,
                 .remote_handle = reinterpret_cast<const btl::RegistrationHandle*>(&b.remote_key),
                 .size = size});
            if (!ok(s)) std::exit(2);
        }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return double(size) * window * iters / s / 1e9;
}

// Streaming bandwidth through send fragments (max_send_size each), in GB/s.
double send_bandwidth(Bench& b, std::size_t size, int iters) {
    const std::size_t frag = b.m.attributes().max_send_size;
    std::vector<char> buf(frag, 'b');
    const std::uint64_t per = (size + frag - 1) / frag;
    const std::uint64_t base = b.got;
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
        if (b.me == 0) {
            for (std::size_t off = 0; off < size; off += frag)
                b.send(tag_data, buf.data(), std::min(frag, size - off));
            b.wait_acks(++b.acks_expected);
        } else {
            b.wait_got(base + per * (i + 1));
            b.send(tag_ack, buf.data(), 1);
        }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    return double(size) * iters / s / 1e9;
}

int run(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    params::parse_command_line(argc, argv);
    auto runtime = rt::open_runtime();
    if (runtime->size() != 2) {
        fmt::print(stderr, "vader_pingpong: run with transit_run -n 2\n");
        return 2;
    }
    params::registry().set("btl", "self,vader", params::Source{params::Origin::api});
    ProgressEngine pe;
    btl::AmTable am;
    btl::Framework fw(*runtime, pe, am);
    fw.open();
    fw.init();
    btl::Module* vader = nullptr;
    for (btl::Module* m : fw.modules())
        if (m->name() == "vader") vader = m;
    if (vader == nullptr) {
        fmt::print(stderr, "vader_pingpong: no vader module\n");
        return 2;
    }
    runtime->fence();
    const Rank me = runtime->rank();
    const Rank peer = 1 - me;
    btl::Endpoint* ep = nullptr;
    btl::Reachability reach(1);
    vader->add_procs({&peer, 1}, {&ep, 1}, reach);
    if (!reach.test(0)) return 2;
    Bench b{*runtime, *vader, ep, pe, me};
    am.register_callback(
        tag_data,
        [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
            ++static_cast<Bench*>(cb)->got;
        },
        &b);
    am.register_callback(
        tag_ack,
        [](btl::Module*, const btl::ReceiveDescriptor& d, void* cb) {
            auto* bb = static_cast<Bench*>(cb);
            if (d.segments[0].len == 8 + sizeof bb->remote_key) {
                std::memcpy(&bb->remote_buffer, d.segments[0].addr, 8);
                std::memcpy(&bb->remote_key, static_cast<const char*>(d.segments[0].addr) + 8,
                            sizeof bb->remote_key);
            }
            ++bb->acks;
        },
        &b);
    runtime->fence();
    const bool csv = std::getenv("PP_CSV") != nullptr;
    // PP_SCALE=0.1 shortens every loop (busy machines).
    const double scale = std::getenv("PP_SCALE") ? std::atof(std::getenv("PP_SCALE")) : 1.0;
    auto n = [&](int iters) { return std::max(10, int(iters * scale)); };
    const bool rank0 = me == 0;

    for (std::size_t size : {8, 64, 1024, 4096}) {
        latency_us(b, size, 2000);  // warm-up
        double best = 1e9;
        for (int t = 0; t < 5; ++t) best = std::min(best, latency_us(b, size, n(50000)));
        if (rank0) fmt::print("latency {:>8} B  {:8.3f} us\n", size, best);
        if (rank0 && csv) fmt::print("csv,latency,{},{}\n", size, best);
    }
    {
        message_rate(b, 64, 200);
        double best = 0;
        for (int t = 0; t < 5; ++t) best = std::max(best, message_rate(b, 64, n(5000)));
        if (rank0) fmt::print("rate          8 B  {:8.2f} M msg/s\n", best);
        if (rank0 && csv) fmt::print("csv,rate,8,{}\n", best);
    }
    constexpr std::size_t max_size = 4 << 20;
    const std::size_t bw_sizes[] = {65536, std::size_t{1} << 20, max_size};
    std::vector<char> buffer(max_size, 'c');
    // Rank 0 reads rank 1's buffer: rank 1 sends its address and registration, then waits.
    if (me == 1) {
        char exposed[8 + sizeof(btl::RegionKey)] = {};
        const std::uint64_t addr = reinterpret_cast<std::uint64_t>(buffer.data());
        std::memcpy(exposed, &addr, 8);
        if (btl::RegistrationHandle* h = vader->rdma()->register_mem(
                nullptr, buffer.data(), buffer.size(), btl::reg_flags::remote_read))
            std::memcpy(exposed + 8, static_cast<const void*>(h), sizeof(btl::RegionKey));
        b.send(tag_ack, exposed, sizeof exposed);
    } else {
        b.wait_acks(b.acks + 1);
    }
    runtime->fence();
    b.acks = 0;
    if ((vader->attributes().flags & btl::flags::get) != 0 && me == 0) {
        for (std::size_t size : bw_sizes) {
            const int iters = n(std::max(4, int((1u << 28) / (size * 64))));
            double best = 0;
            for (int t = 0; t < 3; ++t)
                best = std::max(best, get_bandwidth(b, buffer, size, 64, iters));
            fmt::print("bw get  {:>8} B  {:8.2f} GB/s\n", size, best);
            if (csv) fmt::print("csv,bw_get,{},{}\n", size, best);
        }
    }
    runtime->fence();
    for (std::size_t size : bw_sizes) {
        const int iters = n(std::max(4, int((1u << 28) / (size * 64))));
        double best = 0;
        for (int t = 0; t < 3; ++t) best = std::max(best, send_bandwidth(b, size, iters * 8));
        if (rank0) fmt::print("bw send {:>8} B  {:8.2f} GB/s\n", size, best);
        if (rank0 && csv) fmt::print("csv,bw_send,{},{}\n", size, best);
    }
    runtime->fence();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        fmt::print(stderr, "vader_pingpong: {}\n", e.what());
        return 1;
    }
}
