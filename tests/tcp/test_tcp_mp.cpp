// tcp between real processes (run under transit_run): active messages of every
// size between every pair, ordering under back-pressure, one-sided operations
// on registered memory (large ones many at once), refusal of out-of-bounds
// requests and of strangers.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>

#include "components/tcp/tcp_interfaces.hpp"
#include "components/tcp/tcp_wire.hpp"
#include "pml/headers.hpp"
#include "tests/tcp/raw_client.hpp"
#include "tests/tcp/tcp_job.hpp"

using namespace transit;
using tcptest::closed_by_peer;
using tcptest::connect_raw;
using tcptest::TcpJob;

namespace {

TcpJob& job() {
    static std::unique_ptr<TcpJob> j = std::make_unique<TcpJob>();
    return *j;
}

std::byte pattern(Rank from, Rank to, std::size_t size, std::size_t i) {
    return static_cast<std::byte>((from * 31 + to * 17 + size * 7 + i) & 0xff);
}

const std::size_t sizes[] = {0, 1, 8, 100, 4096, 65536, 131072};

}  // namespace

TEST(TcpMp, EveryPairEverySize) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    j.clear_earlier_phases();
    // Everyone sends to everyone at once: the connections are made lazily and
    // simultaneously, which is what the lower-rank-wins rule resolves.
    for (Rank to = 0; to < mp::size(); ++to) {
        if (to == me) continue;
        ASSERT_NE(j.endpoint(to), nullptr) << "rank " << to << " not reachable";
        for (std::size_t size : sizes) {
            std::vector<std::byte> msg(size);
            for (std::size_t i = 0; i < size; ++i) msg[i] = pattern(me, to, size, i);
            ASSERT_TRUE(ok(j.send_bytes(to, TcpJob::data_tag, msg.data(), size)));
        }
    }
    const std::size_t expected = (mp::size() - 1) * std::size(sizes);
    ASSERT_TRUE(j.progress_until([&] { return j.received.size() >= expected; }))
        << "got " << j.received.size() << " of " << expected;
    for (const auto& r : j.received) {
        const std::size_t size = r.data.size();
        for (std::size_t i = 0; i < size; ++i)
            ASSERT_EQ(r.data[i], pattern(r.from, me, size, i))
                << "from " << r.from << " size " << size << " byte " << i;
    }
    EXPECT_TRUE(j.step());
    EXPECT_TRUE(j.errors.empty());
}

TEST(TcpMp, PeersOnOtherNodesNeverUseLoopback) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    std::uint32_t remote = 0;
    for (Rank r = 0; r < mp::size(); ++r) {
        if (r == me) continue;
        ASSERT_NE(j.endpoint(r), nullptr);
        auto& m = static_cast<tcp::TcpModule&>(j.module(r));
        if (mp::runtime().on_this_node(r)) {
            if (j.component().has_loopback_module()) {
                EXPECT_TRUE(m.interface().loopback) << "rank " << r << " via " << m.name();
            }
        } else {
            ++remote;
            EXPECT_FALSE(m.interface().loopback) << "rank " << r << " via " << m.name();
        }
    }
    // Under netns_job.sh the odd and even ranks are on different "nodes".
    if (std::getenv("TCP_TEST_NS_A") != nullptr && mp::size() > 1) {
        EXPECT_GT(remote, 0u) << "the ranks were not placed on two nodes";
    }
    EXPECT_TRUE(j.step());
}

TEST(TcpMp, SendiFastPathAndOrderUnderBackPressure) {
    TcpJob& j = job();
    j.clear_earlier_phases();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    const Rank from = (me + mp::size() - 1) % mp::size();
    btl::Module& m = j.module(to);
    constexpr std::uint32_t count = 20000;
    std::uint32_t inline_sends = 0;
    for (std::uint32_t seq = 0; seq < count; ++seq) {
        // Every 100th message is large, so the socket fills and writes go partial.
        std::vector<std::byte> payload(seq % 100 == 0 ? 100000 : 16);
        std::memcpy(payload.data(), &seq, sizeof seq);
        btl::Convertor conv(payload.data(), payload.size());
        btl::Descriptor* d = nullptr;
        const Status s =
            m.sendi(j.endpoint(to), &conv, &seq, sizeof seq, payload.size(), btl::no_order,
                    btl::des_flags::btl_ownership, TcpJob::data_tag, &d);
        if (s == Status::completed) {
            ++inline_sends;
            continue;
        }
        ASSERT_EQ(s, Status::out_of_resource);
        if (d == nullptr) {
            j.progress().progress();
            --seq;  // try the same message again
            continue;
        }
        std::memcpy(d->segments[0].addr, &seq, sizeof seq);
        conv.pack(static_cast<std::byte*>(d->segments[0].addr) + sizeof seq, payload.size());
        const Status s2 = m.send(j.endpoint(to), d, TcpJob::data_tag);
        ASSERT_TRUE(ok(s2)) << to_string(s2);
        j.progress().progress();
    }
    EXPECT_GT(inline_sends, 0u);
    ASSERT_TRUE(j.progress_until([&] { return j.received.size() >= count; }, 60));
    for (std::uint32_t k = 0; k < count; ++k) {
        const auto& r = j.received[k];
        ASSERT_EQ(r.from, from);
        std::uint32_t seq;
        std::memcpy(&seq, r.data.data(), sizeof seq);
        ASSERT_EQ(seq, k) << "out of order";
        ASSERT_EQ(r.data.size(), sizeof seq + (k % 100 == 0 ? 100000 : 16));
    }
    EXPECT_TRUE(j.step());
    EXPECT_TRUE(j.errors.empty());
}

TEST(TcpMp, BurstsOfSmallSendsAreCoalescedInOrder) {
    TcpJob& j = job();
    j.clear_earlier_phases();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    const Rank from = (me + mp::size() - 1) % mp::size();
    auto& m = static_cast<tcp::TcpModule&>(j.module(to));
    const std::uint64_t coalesced_before = m.coalesced_frames();
    constexpr std::uint32_t count = 5000;
    auto size_of = [](std::uint32_t seq) -> std::size_t { return 4 + seq % 61; };
    // No progress between the sends (only when tcp asks for it), and now and
    // then a descriptor send, which must queue behind the burst.
    for (std::uint32_t seq = 0; seq < count; ++seq) {
        std::vector<std::byte> payload(size_of(seq), static_cast<std::byte>(seq & 0xff));
        std::memcpy(payload.data(), &seq, sizeof seq);
        if (seq % 500 == 250) {
            ASSERT_TRUE(ok(j.send_bytes(to, TcpJob::data_tag, payload.data(), payload.size())));
            continue;
        }
        btl::Convertor conv(payload.data(), payload.size());
        btl::Descriptor* d = nullptr;
        const Status s = m.sendi(j.endpoint(to), &conv, nullptr, 0, payload.size(), btl::no_order,
                                 0, TcpJob::data_tag, &d);
        if (s == Status::completed) continue;
        ASSERT_EQ(s, Status::out_of_resource);
        if (d != nullptr) m.free(d);
        j.progress().progress();
        --seq;
    }
    EXPECT_GT(m.coalesced_frames(), coalesced_before) << "no burst was coalesced";
    ASSERT_TRUE(j.progress_until([&] { return j.received.size() >= count; }, 60))
        << "got " << j.received.size() << " of " << count;
    for (std::uint32_t k = 0; k < count; ++k) {
        const auto& r = j.received[k];
        ASSERT_EQ(r.from, from);
        ASSERT_EQ(r.data.size(), size_of(k)) << "message " << k;
        std::uint32_t seq;
        std::memcpy(&seq, r.data.data(), sizeof seq);
        ASSERT_EQ(seq, k) << "out of order";
        for (std::size_t i = sizeof seq; i < r.data.size(); ++i)
            ASSERT_EQ(r.data[i], static_cast<std::byte>(k & 0xff)) << "message " << k;
    }
    EXPECT_TRUE(j.step());
    EXPECT_TRUE(j.errors.empty());
}

// A burst that starts on a quiet link is written by the next progress call on
// its own: arming EPOLLOUT for it would cost two epoll_ctl calls and an
// epoll_wait on every rendezvous (its fin and the next header share a pass).
TEST(TcpMp, BurstOnAQuietLinkLeavesAtTheNextPollWithoutEpollout) {
    TcpJob& j = job();
    j.clear_earlier_phases();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    auto& m = static_cast<tcp::TcpModule&>(j.module(to));
    ASSERT_TRUE(j.step());  // connected, nothing queued
    tcp::Link& l = static_cast<tcp::TcpEndpoint*>(j.endpoint(to))->am_link();
    ASSERT_TRUE(l.queue.empty());
    std::uint32_t seq = 0;
    auto send_small = [&] {
        btl::Convertor conv(&seq, sizeof seq);
        const Status s = m.sendi(j.endpoint(to), &conv, nullptr, 0, sizeof seq, btl::no_order, 0,
                                 TcpJob::data_tag, nullptr);
        ++seq;
        return s;
    };
    j.progress().progress();
    ASSERT_EQ(send_small(), Status::completed);  // leaves at once
    ASSERT_EQ(send_small(), Status::completed);  // starts a burst
    ASSERT_EQ(send_small(), Status::completed);  // joins it
    EXPECT_FALSE(l.queue.empty()) << "the second message was not coalesced";
    EXPECT_FALSE(l.want_write) << "EPOLLOUT armed for a burst on a quiet link";
    j.progress().progress();
    EXPECT_TRUE(l.queue.empty()) << "the burst did not leave at the next progress call";
    EXPECT_FALSE(l.want_write);
    ASSERT_TRUE(j.progress_until([&] { return j.received.size() >= 3; }, 30));
    for (std::uint32_t k = 0; k < 3; ++k) {
        std::uint32_t got;
        ASSERT_EQ(j.received[k].data.size(), sizeof got);
        std::memcpy(&got, j.received[k].data.data(), sizeof got);
        EXPECT_EQ(got, k);
    }
    EXPECT_TRUE(j.step());
    EXPECT_TRUE(j.errors.empty());
}

// 64 KiB of payload is sent eagerly by default: the pml's limit counts its
// match header, and a rendezvous over tcp costs a round trip and a get more.
TEST(TcpMp, DefaultEagerLimitCarries64KiBOfPayload) {
    TcpJob& j = job();
    const Rank to = (mp::rank() + 1) % mp::size();
    EXPECT_GE(j.module(to).attributes().eager_limit, 65536 + sizeof(pml::wire::MatchHdr));
    EXPECT_LE(j.module(to).attributes().eager_limit, j.module(to).attributes().max_send_size);
}

namespace {

struct Region {
    std::vector<std::byte> bytes;
    btl::RegistrationHandle* handle = nullptr;
    std::vector<std::array<std::byte, 32>> handles;  // every rank's packed handle
    std::vector<std::uint64_t> bases;                // every rank's base address
};

// Registers `size` bytes in every rank and exchanges the handles.
void share(TcpJob& j, Region& r, std::size_t size, std::uint32_t access, const char* key) {
    r.bytes.assign(size, std::byte{0});
    r.handle = j.module((mp::rank() + 1) % mp::size())
                   .rdma()
                   ->register_mem(nullptr, r.bytes.data(), size, access);
    ASSERT_NE(r.handle, nullptr);
    std::array<std::byte, 40> mine{};
    std::memcpy(mine.data(), static_cast<const void*>(r.handle), 32);
    const auto base = reinterpret_cast<std::uint64_t>(r.bytes.data());
    std::memcpy(mine.data() + 32, &base, 8);
    auto all = mp::all_gather(key, mine);
    for (auto& blob : all) {
        ASSERT_EQ(blob.size(), mine.size());
        std::array<std::byte, 32> h;
        std::memcpy(h.data(), blob.data(), 32);
        std::uint64_t b;
        std::memcpy(&b, blob.data() + 32, 8);
        r.handles.push_back(h);
        r.bases.push_back(b);
    }
}

struct Completion {
    int done = 0;
    Status status = Status::success;
};

void on_rdma(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*, void* cbdata,
             Status status) {
    auto* c = static_cast<Completion*>(cbdata);
    ++c->done;
    if (!ok(status)) c->status = status;
}

const btl::RegistrationHandle* as_handle(const std::array<std::byte, 32>& h) {
    return reinterpret_cast<const btl::RegistrationHandle*>(h.data());
}

}  // namespace

TEST(TcpMp, PutGetAtomicsOnRegisteredMemory) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    const Rank from = (me + mp::size() - 1) % mp::size();
    constexpr std::size_t big = 4u << 20;  // streams straight into the target's memory
    Region r;
    share(j, r, big + 4096, btl::reg_flags::access_any, "tcp.test.rdma");
    btl::Module& m = j.module(to);
    btl::Endpoint* ep = j.endpoint(to);

    std::vector<std::byte> src(big);
    for (std::size_t i = 0; i < big; ++i) src[i] = pattern(me, to, big, i);
    Completion c;
    // Every operation of the case goes to `to`'s region and completes into c.
    auto to_region = [&](auto request) {
        request.endpoint = ep;
        request.remote_handle = as_handle(r.handles[to]);
        request.cb = &on_rdma;
        request.cbdata = &c;
        return request;
    };
    ASSERT_EQ(m.rdma()->put(to_region(
                  btl::RdmaRequest{.local = src.data(), .remote = r.bases[to], .size = big})),
              Status::success);
    ASSERT_TRUE(j.progress_until([&] { return c.done == 1; }));
    ASSERT_TRUE(ok(c.status)) << to_string(c.status);

    // 64-bit and 32-bit atomics on the tail of the target's region.
    const std::uint64_t counter = r.bases[to] + big;
    std::uint64_t old = 99;
    ASSERT_EQ(m.atomics()->atomic_fop(to_region(btl::AtomicRequest{
                  .local = &old, .remote = counter, .op = btl::AtomicOp::add, .operand = 5})),
              Status::success);
    ASSERT_TRUE(j.progress_until([&] { return c.done == 2; }));
    EXPECT_EQ(old, 0u);
    ASSERT_EQ(m.atomics()->atomic_cswap(to_region(btl::AtomicRequest{
                  .local = &old, .remote = counter, .operand = 42, .compare = 5})),
              Status::success);
    ASSERT_TRUE(j.progress_until([&] { return c.done == 3; }));
    EXPECT_EQ(old, 5u);
    ASSERT_EQ(
        m.atomics()->atomic_op(to_region(btl::AtomicRequest{.remote = counter + 8,
                                                            .op = btl::AtomicOp::add,
                                                            .operand = 7,
                                                            .flags = btl::atomic_flags::bits32})),
        Status::success);
    ASSERT_EQ(m.rdma()->flush(ep), Status::success);
    EXPECT_EQ(c.done, 4);
    EXPECT_TRUE(ok(c.status));

    ASSERT_TRUE(j.step());  // every put and atomic of every rank has landed
    for (std::size_t i = 0; i < big; i += 4093)
        ASSERT_EQ(r.bytes[i], pattern(from, me, big, i)) << "byte " << i;
    std::uint64_t v64;
    std::memcpy(&v64, r.bytes.data() + big, 8);
    EXPECT_EQ(v64, 42u);
    std::uint32_t v32;
    std::memcpy(&v32, r.bytes.data() + big + 8, 4);
    EXPECT_EQ(v32, 7u);

    // Read it all back.
    std::vector<std::byte> back(big);
    ASSERT_EQ(m.rdma()->get(to_region(
                  btl::RdmaRequest{.local = back.data(), .remote = r.bases[to], .size = big})),
              Status::success);
    ASSERT_EQ(m.rdma()->flush(ep), Status::success);
    EXPECT_EQ(c.done, 5);
    EXPECT_TRUE(ok(c.status));
    EXPECT_TRUE(back == src);
    EXPECT_TRUE(j.step());
    EXPECT_EQ(m.rdma()->deregister_mem(r.handle), Status::success);
    EXPECT_TRUE(j.errors.empty());
}

// Many large puts and gets at once, from memory that is not page aligned, and
// every byte lands where it belongs.  By default their payloads are copied;
// in the links3 run (btl_tcp_splice_min=256k) they go by reference through
// the module's one pipe, lent to one socket at a time while the other links
// copy.
TEST(TcpMp, ManyLargePutsAndGetsAtOnce) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    const Rank from = (me + mp::size() - 1) % mp::size();
    constexpr std::size_t piece = (1u << 20) - 4093;  // within 256k..btl_tcp_splice_max
    constexpr std::size_t pieces = 8;
    constexpr std::size_t half = piece * pieces;
    // [0, half): put into by `from`; [half, 2 half): ours, read by `from`'s gets.
    Region r;
    share(j, r, 2 * half, btl::reg_flags::access_any, "tcp.test.many");
    for (std::size_t i = 0; i < half; ++i) r.bytes[half + i] = pattern(me, me, half, i);
    ASSERT_TRUE(j.step());

    std::vector<std::byte> src(half + 1);
    for (std::size_t i = 0; i < half; ++i) src[1 + i] = pattern(me, to, half, i);
    std::vector<std::byte> back(half + 1);
    btl::Module& m = j.module(to);
    btl::Endpoint* ep = j.endpoint(to);
    Completion c;
    for (std::size_t k = 0; k < pieces; ++k) {
        btl::RdmaRequest put{.endpoint = ep,
                             .local = src.data() + 1 + k * piece,
                             .remote = r.bases[to] + k * piece,
                             .remote_handle = as_handle(r.handles[to]),
                             .size = piece,
                             .cb = &on_rdma,
                             .cbdata = &c};
        ASSERT_EQ(m.rdma()->put(put), Status::success) << "put " << k;
        btl::RdmaRequest get = put;
        get.local = back.data() + 1 + k * piece;
        get.remote = r.bases[to] + half + k * piece;
        ASSERT_EQ(m.rdma()->get(get), Status::success) << "get " << k;
    }
    ASSERT_TRUE(j.progress_until([&] { return c.done == 2 * static_cast<int>(pieces); }));
    ASSERT_TRUE(ok(c.status)) << to_string(c.status);
    // The first byte that differs from what `rank` wrote for `reader`, or `half`.
    auto first_wrong = [&](const std::byte* p, Rank rank, Rank reader) {
        std::size_t i = 0;
        while (i < half && p[i] == pattern(rank, reader, half, i)) ++i;
        return i;
    };
    EXPECT_EQ(first_wrong(back.data() + 1, to, to), half) << "a get brought wrong bytes";

    ASSERT_TRUE(j.step());  // every rank's puts have landed
    EXPECT_EQ(first_wrong(r.bytes.data(), from, me), half) << "a put left wrong bytes";
    EXPECT_TRUE(j.step());
    EXPECT_EQ(m.rdma()->deregister_mem(r.handle), Status::success);
    EXPECT_TRUE(j.errors.empty());
}

// A poll that moved part of a payload did work: a waiter that counted it idle
// would go to sleep in the middle of a large transfer (pml_base_wait_policy
// block) and wake once per socket buffer's worth.
TEST(TcpMp, APollThatReadsPartOfAPayloadReportsWork) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    const std::size_t size = std::min<std::size_t>(16u << 20, j.module(to).attributes().get_limit);
    Region r;
    share(j, r, size, btl::reg_flags::access_any, "tcp.test.streaming");
    std::fill(r.bytes.begin(), r.bytes.end(), std::byte{0x5a});
    ASSERT_TRUE(j.step());
    if (me == 0) {
        std::vector<std::byte> back(size, std::byte{0});
        Completion c;
        btl::RdmaRequest get{.endpoint = j.endpoint(to),
                             .local = back.data(),
                             .remote = r.bases[to],
                             .remote_handle = as_handle(r.handles[to]),
                             .size = size,
                             .cb = &on_rdma,
                             .cbdata = &c};
        ASSERT_EQ(j.module(to).rdma()->get(get), Status::success);
        // The payload lands in order: the first byte still zero is how far it came.
        std::size_t landed = 0;
        int moving_polls = 0;
        int silent = 0;
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (c.done == 0 && std::chrono::steady_clock::now() < end) {
            const int n = j.progress().progress();
            const std::size_t before = landed;
            while (landed < size && back[landed] != std::byte{0}) ++landed;
            if (landed == before || c.done != 0) continue;
            ++moving_polls;
            if (n == 0) ++silent;
        }
        ASSERT_EQ(c.done, 1);
        ASSERT_TRUE(ok(c.status)) << to_string(c.status);
        EXPECT_GT(moving_polls, 0);
        EXPECT_EQ(silent, 0) << "of " << moving_polls << " polls that moved bytes";
    }
    EXPECT_TRUE(j.step());
    EXPECT_EQ(j.module(to).rdma()->deregister_mem(r.handle), Status::success);
    EXPECT_TRUE(j.errors.empty());
}

TEST(TcpMp, OutOfBoundsAndForbiddenRequestsAreRefused) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    const Rank to = (me + 1) % mp::size();
    constexpr std::size_t size = 4096;
    Region rw, ro;
    share(j, rw, size, btl::reg_flags::access_any, "tcp.test.oob.rw");
    share(j, ro, size, btl::reg_flags::remote_read, "tcp.test.oob.ro");
    std::fill(rw.bytes.begin(), rw.bytes.end(), std::byte{0x5a});
    std::fill(ro.bytes.begin(), ro.bytes.end(), std::byte{0x5a});
    ASSERT_TRUE(j.step());

    btl::Module& m = j.module(to);
    btl::Endpoint* ep = j.endpoint(to);
    std::vector<std::byte> buf(512, std::byte{0x11});
    auto forged = rw.handles[to];
    forged[7] ^= std::byte{0x80};  // a key nobody registered
    struct Attempt {
        const char* what;
        std::function<Status(Completion&)> start;
    } attempts[] = {
        {"put across the end",
         [&](Completion& c) {
             return m.rdma()->put({.endpoint = ep,
                                   .local = buf.data(),
                                   .remote = rw.bases[to] + size - 100,
                                   .remote_handle = as_handle(rw.handles[to]),
                                   .size = 200,
                                   .order = 0,
                                   .cb = &on_rdma,
                                   .cbdata = &c});
         }},
        {"put before the start",
         [&](Completion& c) {
             return m.rdma()->put({.endpoint = ep,
                                   .local = buf.data(),
                                   .remote = rw.bases[to] - 8,
                                   .remote_handle = as_handle(rw.handles[to]),
                                   .size = 16,
                                   .order = 0,
                                   .cb = &on_rdma,
                                   .cbdata = &c});
         }},
        {"get across the end",
         [&](Completion& c) {
             return m.rdma()->get({.endpoint = ep,
                                   .local = buf.data(),
                                   .remote = rw.bases[to] + 1,
                                   .remote_handle = as_handle(rw.handles[to]),
                                   .size = size,
                                   .order = 0,
                                   .cb = &on_rdma,
                                   .cbdata = &c});
         }},
        {"atomic past the end",
         [&](Completion& c) {
             return m.atomics()->atomic_op({.endpoint = ep,
                                            .remote = rw.bases[to] + size,
                                            .remote_handle = as_handle(rw.handles[to]),
                                            .op = btl::AtomicOp::add,
                                            .operand = 1,
                                            .order = 0,
                                            .cb = &on_rdma,
                                            .cbdata = &c});
         }},
        {"put with a forged key",
         [&](Completion& c) {
             return m.rdma()->put({.endpoint = ep,
                                   .local = buf.data(),
                                   .remote = rw.bases[to],
                                   .remote_handle = as_handle(forged),
                                   .size = 16,
                                   .order = 0,
                                   .cb = &on_rdma,
                                   .cbdata = &c});
         }},
        {"put into read-only memory",
         [&](Completion& c) {
             return m.rdma()->put({.endpoint = ep,
                                   .local = buf.data(),
                                   .remote = ro.bases[to],
                                   .remote_handle = as_handle(ro.handles[to]),
                                   .size = 16,
                                   .order = 0,
                                   .cb = &on_rdma,
                                   .cbdata = &c});
         }},
        {"atomic on read-only memory",
         [&](Completion& c) {
             return m.atomics()->atomic_op({.endpoint = ep,
                                            .remote = ro.bases[to],
                                            .remote_handle = as_handle(ro.handles[to]),
                                            .op = btl::AtomicOp::swap,
                                            .operand = 1,
                                            .order = 0,
                                            .cb = &on_rdma,
                                            .cbdata = &c});
         }},
    };
    for (const Attempt& a : attempts) {
        Completion c;
        ASSERT_EQ(a.start(c), Status::success) << a.what;
        ASSERT_TRUE(j.progress_until([&] { return c.done == 1; })) << a.what;
        EXPECT_FALSE(ok(c.status)) << a.what << " was not refused";
    }
    // A large refused put: its data is drained, and the stream stays usable.
    std::vector<std::byte> large(1 << 20, std::byte{0x22});
    Completion c;
    ASSERT_EQ(m.rdma()->put({.endpoint = ep,
                             .local = large.data(),
                             .remote = rw.bases[to],
                             .remote_handle = as_handle(forged),
                             .size = large.size(),
                             .order = 0,
                             .cb = &on_rdma,
                             .cbdata = &c}),
              Status::success);
    ASSERT_TRUE(j.progress_until([&] { return c.done == 1; }));
    EXPECT_FALSE(ok(c.status));

    ASSERT_TRUE(j.step());
    for (std::size_t i = 0; i < size; ++i) {
        ASSERT_EQ(rw.bytes[i], std::byte{0x5a}) << "target memory touched at " << i;
        ASSERT_EQ(ro.bytes[i], std::byte{0x5a}) << "read-only memory touched at " << i;
    }
    ASSERT_TRUE(j.step());
    // The same connection still serves a legal request.
    Completion ok_c;
    ASSERT_EQ(m.rdma()->put({.endpoint = ep,
                             .local = buf.data(),
                             .remote = rw.bases[to],
                             .remote_handle = as_handle(rw.handles[to]),
                             .size = 16,
                             .order = 0,
                             .cb = &on_rdma,
                             .cbdata = &ok_c}),
              Status::success);
    ASSERT_EQ(m.rdma()->flush(ep), Status::success);
    EXPECT_TRUE(ok(ok_c.status));
    EXPECT_TRUE(j.step());
    EXPECT_TRUE(j.errors.empty());
}

TEST(TcpMp, StrangersAreRefusedAndTheJobCarriesOn) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    const Rank victim = 1;
    j.clear_earlier_phases();
    if (me == 0) {
        // Garbage.
        int fd = connect_raw(victim);
        ASSERT_GE(fd, 0);
        const char http[] = "GET / HTTP/1.0\r\n\r\n";
        ASSERT_GT(::send(fd, http, sizeof http, MSG_NOSIGNAL), 0);
        EXPECT_TRUE(closed_by_peer(fd, 10000)) << "garbage was not refused";
        ::close(fd);

        // A well-formed handshake with the wrong secret, then one from another job.
        tcp::wire::Handshake h;
        h.kind = tcp::wire::HandshakeKind::hello;
        h.rank = me;
        h.job_id = mp::runtime().job_id();
        h.secret = mp::runtime().job_secret();
        h.secret[3] ^= std::byte{1};
        h.link = 0;
        for (int variant = 0; variant < 2; ++variant) {
            if (variant == 1) {
                h.secret = mp::runtime().job_secret();
                h.job_id = "someone-else";
            }
            fd = connect_raw(victim);
            ASSERT_GE(fd, 0);
            const auto bytes = tcp::wire::encode(h);
            ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
                      static_cast<ssize_t>(bytes.size()));
            // Refused: closed without an accept (no bytes at all).
            pollfd p{fd, POLLIN, 0};
            ASSERT_EQ(::poll(&p, 1, 10000), 1) << "variant " << variant;
            char b[8];
            EXPECT_EQ(::recv(fd, b, sizeof b, 0), 0) << "variant " << variant << " got an answer";
            ::close(fd);
        }
        // The job is unaffected: a normal message still goes through.
        const char hello[] = "still here";
        ASSERT_TRUE(ok(j.send_bytes(victim, TcpJob::data_tag, hello, sizeof hello)));
    } else if (me == victim) {
        ASSERT_TRUE(j.progress_until([&] { return !j.received.empty(); }, 40));
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(j.received[0].data.data())),
                  "still here");
    }
    EXPECT_TRUE(j.step());
    EXPECT_TRUE(j.errors.empty()) << j.errors.front().second;
}

TEST(TcpMp, IdleTcpRegistersNoBusyProgress) {
    // A fresh component with no connection costs the progress loop only its
    // low-priority accept check.
    TcpJob& j = job();
    (void)j;
    ProgressEngine engine;
    btl::AmTable am;
    tcp::TcpComponent c;
    c.register_params(params::registry());
    ASSERT_TRUE(c.open().available);
    btl::InitContext ctx{mp::runtime(), engine, am};
    auto modules = c.init(ctx);
    ASSERT_FALSE(modules.empty());
    engine.progress();
    EXPECT_EQ(engine.size(), 1u);
    for (auto& m : modules) m->finalize();
    modules.clear();
    c.close();
    engine.progress();
    EXPECT_EQ(engine.size(), 0u);
    ASSERT_TRUE(ok(mp::runtime().fence()));
}

namespace {

struct ErrorLog {
    std::vector<std::pair<Rank, std::string>> errors;
    static void on_error(btl::Module*, std::uint32_t, Rank peer, const char* info, void* self) {
        static_cast<ErrorLog*>(self)->errors.emplace_back(peer, info ? info : "");
    }
};

// Connects to one of `addrs` and completes a genuine handshake as this rank.
int connect_authenticated(const std::vector<tcp::PeerAddress>& addrs, Rank peer) {
    for (const auto& a : addrs) {
        if (a.loopback != mp::runtime().on_this_node(peer)) continue;
        const int fd = ::socket(a.address.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_storage ss;
        const socklen_t len = a.address.to_sockaddr(a.port, ss);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
            ::close(fd);
            continue;
        }
        tcp::wire::Handshake h;
        h.rank = mp::rank();
        h.job_id = mp::runtime().job_id();
        h.secret = mp::runtime().job_secret();
        const auto hello = tcp::wire::encode(h);
        std::array<std::byte, tcp::wire::handshake_size> answer{};
        if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(hello.size()) &&
            ::recv(fd, answer.data(), answer.size(), MSG_WAITALL) ==
                static_cast<ssize_t>(answer.size())) {
            tcp::wire::Handshake got;
            if (tcp::wire::decode(answer, got).empty() &&
                got.kind == tcp::wire::HandshakeKind::accept)
                return fd;
        }
        ::close(fd);
    }
    return -1;
}

}  // namespace

// A member of the job that sends a malformed frame gets its connection closed
// with a logged reason and an error for that peer; the receiver carries on.
TEST(TcpMp, MalformedFramesCloseTheConnection) {
    TcpJob& j = job();
    const Rank me = mp::rank();
    const Rank victim = 1;
    using tcp::wire::FrameHeader;
    using tcp::wire::FrameType;
    const FrameHeader bad_frames[] = {
        {0x00, FrameType::am, TcpJob::data_tag, 0, 8},                              // bad magic
        {tcp::wire::frame_magic, FrameType::am, TcpJob::data_tag, 0, 0xfffffff0u},  // length
        {tcp::wire::frame_magic, FrameType::am, 0xfe, 0, 8},  // tag nobody registered
        {tcp::wire::frame_magic, FrameType::reply, 0, 0, tcp::wire::reply_size},  // no such op
    };
    int index = 0;
    for (const FrameHeader& bad : bad_frames) {
        ++index;
        // The victim opens a second, fresh tcp component so the stranger-peer
        // can connect to it before any real connection exists.
        std::unique_ptr<tcp::TcpComponent> c2;
        ProgressEngine engine2;
        btl::AmTable am2;
        ErrorLog log;
        std::vector<std::unique_ptr<btl::Module>> modules2;
        std::vector<std::byte> blob;
        if (me == victim) {
            c2 = std::make_unique<tcp::TcpComponent>();
            c2->register_params(params::registry());
            ASSERT_TRUE(c2->open().available);
            btl::InitContext ctx{mp::runtime(), engine2, am2};
            modules2 = c2->init(ctx);
            ASSERT_FALSE(modules2.empty());
            am2.register_callback(
                TcpJob::data_tag, [](btl::Module*, const btl::ReceiveDescriptor&, void*) {},
                nullptr);
            std::vector<tcp::PeerAddress> addrs;
            for (auto& m : modules2) {
                m->register_error(&ErrorLog::on_error, &log);
                for (auto& a : static_cast<tcp::TcpModule&>(*m).published()) addrs.push_back(a);
            }
            blob = tcp::encode_addresses(addrs);
        }
        auto all = mp::all_gather("tcp.test.malformed." + std::to_string(index), blob);
        j.received.clear();
        if (me == 0) {
            const int fd = connect_authenticated(tcp::decode_addresses(all[victim]), victim);
            ASSERT_GE(fd, 0) << "frame " << index;
            std::byte frame[tcp::wire::header_size + tcp::wire::reply_size] = {};
            tcp::wire::encode(bad, frame);
            ASSERT_GT(::send(fd, frame, sizeof frame, MSG_NOSIGNAL), 0);
            EXPECT_TRUE(closed_by_peer(fd, 10000)) << "frame " << index << " was not refused";
            ::close(fd);
            const char done[] = "done";
            ASSERT_TRUE(ok(j.send_bytes(victim, TcpJob::data_tag, done, sizeof done)));
        } else if (me == victim) {
            const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (j.received.empty() && std::chrono::steady_clock::now() < end) {
                engine2.progress();
                j.progress().progress();
            }
            ASSERT_FALSE(j.received.empty()) << "frame " << index;
            ASSERT_EQ(log.errors.size(), 1u) << "frame " << index;
            EXPECT_EQ(log.errors[0].first, 0u);
            EXPECT_NE(log.errors[0].second.find("failed"), std::string::npos)
                << log.errors[0].second;
            for (auto& m : modules2) m->finalize();
            modules2.clear();
            c2->close();
        }
        EXPECT_TRUE(j.step());
    }
    EXPECT_TRUE(j.errors.empty());
}
