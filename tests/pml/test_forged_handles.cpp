// A peer that names our requests, counters and one-sided operations falsely:
// a forged value (an address of ours it learned or guessed), a stale handle
// (the request ended, its slot was reused), another peer's live request, or a
// request at a stage that does not wait for that message.  Each such message
// is dropped with a log line, nothing of ours is written or completed, and the
// operations it named still complete correctly.  Before, the pml took these
// fields for addresses: a forged fin completed (and so freed) whatever request
// it pointed at, a forged one-sided reply wrote where it said.
//
// One process (a job of one) over the self btl; the forged frames come
// through the btl tag table as a transport delivers them, over the endpoint of
// rank 0 (ourselves, the victim's peer) or of rank 7 (another peer).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "pml/headers.hpp"
#include "pml/pools.hpp"
#include "pml/request.hpp"
#include "tests/pml/inject_frame.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/params.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
namespace wire = transit::pml::wire;
using transit::test::deliver;

constexpr Rank us = 0;
constexpr Rank other_peer = 7;
constexpr std::uint32_t tag = 3;
constexpr std::size_t big = 256 << 10;  // a rendezvous over self (split: gets and puts)

template <typename Hdr>
std::vector<std::byte> bytes_of(const Hdr& h, std::size_t extra = 0) {
    std::vector<std::byte> b(sizeof h + extra, std::byte{0x5a});
    std::memcpy(b.data(), &h, sizeof h);
    return b;
}

// What names the request to peers: as the pml puts it on the wire.
std::uint64_t handle_of(Request* r) {
    return pml::NamedPool<pml::Req>::handle(*static_cast<pml::Req*>(r));
}

// An address of ours a hostile peer learned: the old wire format sent these.
std::uint64_t address_of(const void* p) {
    return reinterpret_cast<std::uint64_t>(p);
}

bool has(const std::string& log, const std::string& what) {
    return log.find(what) != std::string::npos;
}

std::vector<std::byte> pattern(std::size_t n, int seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
    return v;
}

// The victim: a rendezvous send to ourselves, pending until its receive is
// posted (the header waits in the unexpected queue).
struct PendingSend {
    std::vector<std::byte> out;
    Request* req = nullptr;
    PendingSend(Context& ctx, int seed) : out(pattern(big, seed)) {
        EXPECT_EQ(ctx.isend(us, tag, out.data(), out.size(), req), Status::success);
        EXPECT_NE(req, nullptr);
        ctx.progress();
        EXPECT_FALSE(req->done()) << "the victim send must be waiting for its receiver";
    }
    // Its receive: the data arrives whole and both requests end well.
    void complete(Context& ctx) {
        std::vector<std::byte> in(big);
        Request* recv = nullptr;
        ASSERT_TRUE(ok(ctx.irecv(us, tag, in.data(), in.size(), recv)));
        if (recv) {
            EXPECT_EQ(ctx.wait(recv), Status::success);
        }
        EXPECT_EQ(ctx.wait(req), Status::success);
        EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin(), out.end()));
    }
};

class ForgedHandles : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        transit::test::become_job_of_one();
        params::registry().set("btl", "self", params::Source{params::Origin::api, "", 0});
    }
};

// Each message kind that names a request, with a value that is no handle of
// ours: the victim's own address (what the old protocol sent) and an address
// nobody mapped.  None completes, frees or writes the victim.
TEST_F(ForgedHandles, AddressesForRequestsAreDroppedWithALog) {
    Context ctx = init();
    PendingSend victim(ctx, 1);
    for (std::uint64_t forged : {address_of(victim.req), std::uint64_t{0x414141414141}}) {
        SCOPED_TRACE(forged);
        const wire::FinHdr fin{forged};
        const wire::AckHdr ack{forged, forged};
        const wire::FragHdr frag{forged, 0};
        const wire::FragAbortHdr abort{forged, 0, static_cast<std::int32_t>(Status::error), 0};
        const wire::SplitFinHdr split_fin{forged, 0, 0};
        const wire::SplitHdr split{forged, forged, 0, 64, forged, 0, 0, 0};
        const std::pair<wire::Kind, std::vector<std::byte>> frames[] = {
            {wire::fin, bytes_of(fin)},
            {wire::ack, bytes_of(ack)},
            {wire::frag, bytes_of(frag, 64)},
            {wire::frag_abort, bytes_of(abort)},
            {wire::split_fin, bytes_of(split_fin)},
            {wire::split, bytes_of(split)}};
        for (const auto& [kind, bytes] : frames) {
            const std::string log = deliver(kind, bytes, us);
            EXPECT_TRUE(has(log, "pml: a message of kind " + std::string(wire::name(kind)) +
                                     " from rank 0 was dropped: it names no live request"))
                << wire::name(kind) << " logged: " << log;
            EXPECT_FALSE(victim.req->done()) << wire::name(kind);
        }
    }
    victim.complete(ctx);
}

// A handle of a request that ended: its slot now holds another request (the
// pool hands the last freed one out first), whose generation moved on.
TEST_F(ForgedHandles, AStaleHandleNamesNothing) {
    Context ctx = init();
    std::uint64_t stale = 0;
    {
        PendingSend first(ctx, 2);
        stale = handle_of(first.req);
        first.complete(ctx);
    }
    PendingSend victim(ctx, 3);
    EXPECT_EQ(static_cast<std::uint32_t>(stale), static_cast<std::uint32_t>(handle_of(victim.req)))
        << "the slot is reused";
    EXPECT_NE(stale, handle_of(victim.req)) << "under another generation";
    const wire::FinHdr fin{stale};
    const std::string log = deliver(wire::fin, bytes_of(fin), us);
    EXPECT_TRUE(has(log,
                    "pml: a message of kind fin from rank 0 was dropped: it names no live "
                    "request (forged, or one that ended)"))
        << log;
    EXPECT_FALSE(victim.req->done());
    victim.complete(ctx);
}

// The victim's live handle, named by a peer it is not with (or a transport
// that does not say who sent it): the request is not that peer's to end.
TEST_F(ForgedHandles, AnotherPeersRequestIsNotItsToEnd) {
    Context ctx = init();
    PendingSend victim(ctx, 4);
    const wire::FinHdr fin{handle_of(victim.req)};
    std::string log = deliver(wire::fin, bytes_of(fin), other_peer);
    EXPECT_TRUE(has(log,
                    "pml: a message of kind fin from rank 7 was dropped: it names a request with "
                    "another peer"))
        << log;
    log = deliver(wire::fin, bytes_of(fin), any_rank);
    EXPECT_TRUE(has(log, "pml: a message of kind fin from rank -1 was dropped")) << log;
    const wire::SplitHdr split{handle_of(victim.req), 1, 0, 64, 0x1000, 0, 0, 0};
    log = deliver(wire::split, bytes_of(split), other_peer);
    EXPECT_TRUE(has(log, "kind split from rank 7 was dropped: it names a request with another"))
        << log;
    EXPECT_FALSE(victim.req->done());
    victim.complete(ctx);
}

// The right peer and a live handle, but a message the request does not wait
// for: a fragment (for a receive) naming a send, a split_fin naming a send.
TEST_F(ForgedHandles, AMessageItsRequestDoesNotWaitForIsDropped) {
    Context ctx = init();
    PendingSend victim(ctx, 5);
    const wire::FragHdr frag{handle_of(victim.req), 0};
    std::string log = deliver(wire::frag, bytes_of(frag, 128), us);
    EXPECT_TRUE(has(log,
                    "pml: a message of kind frag from rank 0 was dropped: its request does "
                    "not wait for one"))
        << log;
    const wire::SplitFinHdr split_fin{handle_of(victim.req), 0, 0};
    log = deliver(wire::split_fin, bytes_of(split_fin), us);
    EXPECT_TRUE(has(log, "kind split_fin from rank 0 was dropped: its request does not wait"))
        << log;
    EXPECT_FALSE(victim.req->done());
    victim.complete(ctx);
}

// Replies to emulated one-sided operations name the origin's operation; a
// target that forges one (an address of ours: the old protocol's token) must
// not make us write there, nor settle operations we are flushing.
TEST_F(ForgedHandles, AForgedOneSidedReplyWritesNothing) {
    Context ctx = init();
    std::vector<std::byte> victim(64, std::byte{0x11});
    std::uint64_t fetched = 0x2222;

    wire::OscReplyHdr get{us, static_cast<std::int32_t>(Status::success), address_of(victim.data()),
                          victim.size(), 0};
    std::string log = deliver(wire::osc_get_reply, bytes_of(get, victim.size()), us);
    EXPECT_TRUE(has(log,
                    "pml: a message of kind osc_get_reply from rank 0 was dropped: it names "
                    "no one-sided operation of ours"))
        << log;
    EXPECT_TRUE(std::all_of(victim.begin(), victim.end(), [](std::byte b) {
        return b == std::byte{0x11};
    })) << "the get reply wrote into our memory";

    wire::OscReplyHdr atomic{us, static_cast<std::int32_t>(Status::success), address_of(&fetched),
                             1, 0xdeadbeef};
    log = deliver(wire::osc_atomic_reply, bytes_of(atomic), us);
    EXPECT_TRUE(has(log, "kind osc_atomic_reply from rank 0 was dropped")) << log;
    EXPECT_EQ(fetched, 0x2222u);
    wire::OscReplyHdr ack{us, static_cast<std::int32_t>(Status::success), 1, 1, 0};
    log = deliver(wire::osc_ack, bytes_of(ack), us);
    EXPECT_TRUE(has(log, "kind osc_ack from rank 0 was dropped")) << log;

    // Our own operations still go and flush finds nothing wrongly settled.
    std::vector<std::uint64_t> region(8, 0);
    MemoryRegion* mr = nullptr;
    ASSERT_EQ(ctx.register_memory(region.data(), region.size() * sizeof(std::uint64_t), mr),
              Status::success);
    RemoteKey* key = nullptr;
    ASSERT_EQ(ctx.unpack_key(ctx.pack_key(mr), key), Status::success);
    const std::uint64_t seven = 7;
    ASSERT_EQ(ctx.put(us, &seven, sizeof seven, key, 8), Status::success);
    std::uint64_t old = 0;
    ASSERT_EQ(ctx.atomic(us, AtomicOp::add, AtomicWidth::bits64, key, 8, 5, &old), Status::success);
    ASSERT_EQ(ctx.flush(us), Status::success);
    EXPECT_EQ(old, 7u);
    EXPECT_EQ(region[1], 12u);
    ctx.release_key(key);
    ASSERT_EQ(ctx.deregister_memory(mr), Status::success);
}

// Counters: a target counter is named by a handle the target gave out
// (counter_ref), a completion counter by a token the origin gave out.  A
// counter's address in their place counts nothing, and the active message
// that named it is not delivered.
int handler_runs = 0;
AmDestination count_run(Context&, const AmInfo&, void*) {
    ++handler_runs;
    return {};
}

TEST_F(ForgedHandles, AForgedCounterCountsNothing) {
    Context ctx = init();
    ASSERT_EQ(ctx.register_am_handler(9, &count_run, nullptr, nullptr), Status::success);
    Counter target;
    Counter completion;

    wire::AmHdr am{us, 9, 0, 0, address_of(&target), 0};
    std::string log = deliver(wire::am, bytes_of(am, 0), us);
    EXPECT_TRUE(has(log,
                    "pml: a message of kind am from rank 0 was dropped: it names no counter "
                    "of ours as its target"))
        << log;
    EXPECT_EQ(target.value(), 0u);
    EXPECT_EQ(handler_runs, 0) << "the message naming a forged counter is not delivered";

    const wire::AmDoneHdr done{address_of(&completion), us, 0};
    log = deliver(wire::am_done, bytes_of(done), us);
    EXPECT_TRUE(has(log,
                    "pml: a message of kind am_done from rank 0 was dropped: it names no "
                    "completion that peer owes"))
        << log;
    EXPECT_EQ(completion.value(), 0u);
    EXPECT_EQ(completion.lost(), 0u);

    // The real thing: both counters count once.
    const std::byte data[16]{};
    ASSERT_TRUE(ok(ctx.am_send(us, 9, {}, data, sizeof data,
                               {.target = ctx.counter_ref(target), .completion = &completion})));
    EXPECT_EQ(ctx.counter_wait(completion, 1), Status::success);
    EXPECT_EQ(ctx.counter_wait(target, 1), Status::success);
    EXPECT_EQ(handler_runs, 1);
    EXPECT_EQ(ctx.counter_ref(target), ctx.counter_ref(target)) << "one ref per counter";

    // A completion token replayed after it was settled: stale.
    log =
        deliver(wire::am_done, bytes_of(wire::AmDoneHdr{(std::uint64_t{1} << 32) | 0, us, 0}), us);
    EXPECT_TRUE(has(log, "kind am_done from rank 0 was dropped")) << log;
    EXPECT_EQ(completion.value(), 1u);
}

}  // namespace
