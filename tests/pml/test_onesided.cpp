// One-sided: keys that pack to bytes, put/get with data checked, every atomic
// op at 32 and 64 bits hammered by every rank on one counter, cswap, and a
// barrier that no rank leaves early.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "tests/pml/pml_env.hpp"

namespace {

using namespace transit;
using transit::test::ctx;
using transit::test::first_bad;
using transit::test::make_data;

// Every rank exposes `size` bytes; keys[r] addresses rank r's window.
struct Windows {
    void* mine = nullptr;
    std::size_t size = 0;
    MemoryRegion* region = nullptr;
    std::vector<RemoteKey*> keys;

    explicit Windows(std::size_t bytes) : size(bytes) {
        mine = ctx().mem_alloc(bytes);
        EXPECT_NE(mine, nullptr);
        std::memset(mine, 0, bytes);
        EXPECT_EQ(ctx().register_memory(mine, bytes, region), Status::success);
        auto packed = ctx().pack_key(region);
        const std::uint32_t n = ctx().size();
        keys.assign(n, nullptr);
        // All-to-all exchange of the packed keys over tagged messages.
        std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(4096));
        std::vector<Request*> reqs;
        for (Rank r = 0; r < n; ++r) {
            Request* q;
            EXPECT_TRUE(ok(ctx().irecv(r, 90, in[r].data(), in[r].size(), q)));
            reqs.push_back(q);
        }
        for (Rank r = 0; r < n; ++r) {
            Request* q;
            EXPECT_TRUE(ok(ctx().isend(r, 90, packed.data(), packed.size(), q)));
            reqs.push_back(q);
        }
        std::vector<RequestStatus> st(reqs.size());
        EXPECT_EQ(ctx().wait_all(reqs, st), Status::success);
        for (Rank r = 0; r < n; ++r) {
            in[r].resize(st[r].length);
            EXPECT_EQ(ctx().unpack_key(in[r], keys[r]), Status::success);
        }
    }
    ~Windows() {
        ctx().barrier();  // nobody still addresses our window
        for (RemoteKey*& k : keys) ctx().release_key(k);
        ctx().deregister_memory(region);
        ctx().mem_free(mine);
    }
    std::byte* bytes() const { return static_cast<std::byte*>(mine); }
};

TEST(OneSided, KeyRejectsGarbage) {
    RemoteKey* k = nullptr;
    std::byte junk[5] = {};
    EXPECT_EQ(ctx().unpack_key(junk, k), Status::bad_param);
    EXPECT_EQ(k, nullptr);
}

// A key whose handle for a transport loaded here is shorter or longer than that
// transport reads: refused, not read past its end (the bytes behind a short
// handle would go to the peer).  Every transport in the key is tried.
// A region registered for some peers refuses the others, whatever key they
// hold; the job's ranks are in the job's scope.  Each rank reaches its own
// region (over self, or emulated by its own pml).
TEST(OneSided, ARegionScopedToOtherPeersRefusesTheRest) {
    const Rank me = ctx().rank();
    std::uint64_t word = 0;
    const Rank nobody[] = {me + 1000};
    const Rank just_me[] = {me};
    struct Case {
        RegionScope scope;
        Status expected;
    };
    for (const Case& c : {Case{RegionScope::only(nobody), Status::access_denied},
                          Case{RegionScope::only(just_me), Status::success},
                          Case{RegionScope::job(), Status::success}}) {
        word = 0;
        MemoryRegion* region = nullptr;
        ASSERT_EQ(ctx().register_memory(&word, sizeof word, region, c.scope), Status::success);
        RemoteKey* key = nullptr;
        ASSERT_EQ(ctx().unpack_key(ctx().pack_key(region), key), Status::success);
        const std::uint64_t v = 7;
        const Status issued = ctx().put(me, &v, sizeof v, key, 0);
        const Status flushed = ok(issued) ? ctx().flush(me) : issued;
        EXPECT_EQ(flushed, c.expected);
        EXPECT_EQ(word, ok(c.expected) ? 7u : 0u);
        ctx().release_key(key);
        ASSERT_EQ(ctx().deregister_memory(region), Status::success);
    }
}

TEST(OneSided, KeyWithAHandleOfAnotherSizeIsRefused) {
    void* mem = ctx().mem_alloc(64);
    ASSERT_NE(mem, nullptr);
    MemoryRegion* region = nullptr;
    ASSERT_EQ(ctx().register_memory(mem, 64, region), Status::success);
    const std::vector<std::byte> packed = ctx().pack_key(region);
    // magic, region slot, secret, base, size, count; then per transport:
    // component, length, handle.
    constexpr std::size_t head = 4 + 4 + 8 + 8 + 8 + 4;
    std::uint32_t count = 0;
    ASSERT_GE(packed.size(), head);
    std::memcpy(&count, packed.data() + head - 4, 4);
    std::size_t at = head;
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint32_t len = 0;
        std::memcpy(&len, packed.data() + at + 4, 4);
        for (const std::uint32_t wrong : {len > 4 ? 4u : 0u, len + 8}) {
            if (wrong == len) continue;
            std::vector<std::byte> bad(packed.begin(), packed.begin() + at + 8);
            std::memcpy(bad.data() + at + 4, &wrong, 4);
            bad.resize(bad.size() + wrong);
            std::copy_n(packed.begin() + at + 8, std::min(len, wrong), bad.begin() + at + 8);
            bad.insert(bad.end(), packed.begin() + at + 8 + len, packed.end());
            RemoteKey* k = nullptr;
            EXPECT_EQ(ctx().unpack_key(bad, k), Status::bad_param)
                << "handle " << i << " of " << len << " bytes given as " << wrong;
            EXPECT_EQ(k, nullptr);
            if (k) ctx().release_key(k);
        }
        at += 8 + len;
    }
    EXPECT_EQ(at, packed.size());
    RemoteKey* good = nullptr;
    EXPECT_EQ(ctx().unpack_key(packed, good), Status::success);
    ctx().release_key(good);
    ctx().deregister_memory(region);
    ctx().mem_free(mem);
}

TEST(OneSided, PutAndGetEverySizeToEveryRank) {
    const std::uint32_t n = ctx().size();
    const Rank me = ctx().rank();
    const std::size_t slot = 1u << 20;
    Windows w(slot * n);
    const std::size_t sizes[] = {1, 8, 100, 4096, 65536, slot};
    for (std::size_t size : sizes) {
        auto data = make_data(me, size, 1);
        // Rank me writes into slot `me` of every rank's window.
        for (Rank r = 0; r < n; ++r)
            ASSERT_EQ(ctx().put(r, data.data(), size, w.keys[r], me * slot), Status::success);
        ASSERT_EQ(ctx().flush_all(), Status::success);
        ASSERT_EQ(ctx().barrier(), Status::success);
        for (Rank r = 0; r < n; ++r)
            ASSERT_EQ(first_bad(w.bytes() + r * slot, r, size, 1), size)
                << "size " << size << " from rank " << r;
        // And reads back the slot of the next rank from the next rank's window.
        const Rank t = (me + 1) % n;
        std::vector<std::byte> got(size);
        ASSERT_EQ(ctx().get(t, got.data(), size, w.keys[t], t * slot), Status::success);
        ASSERT_EQ(ctx().flush(t), Status::success);
        ASSERT_EQ(first_bad(got.data(), t, size, 1), size) << "get of " << size;
        ASSERT_EQ(ctx().barrier(), Status::success);
    }
    std::byte b{};
    EXPECT_EQ(ctx().put(0, &b, 1, w.keys[0], slot * n), Status::bad_param);
}

std::uint64_t apply(AtomicOp op, std::uint64_t a, std::uint64_t b, bool bits32) {
    auto s = [&](std::uint64_t v) -> std::int64_t {
        return bits32 ? static_cast<std::int32_t>(v) : static_cast<std::int64_t>(v);
    };
    std::uint64_t r = 0;
    switch (op) {
        case AtomicOp::add:
            r = a + b;
            break;
        case AtomicOp::and_:
            r = a & b;
            break;
        case AtomicOp::or_:
            r = a | b;
            break;
        case AtomicOp::xor_:
            r = a ^ b;
            break;
        case AtomicOp::swap:
            r = b;
            break;
        case AtomicOp::min:
            r = s(a) < s(b) ? a : b;
            break;
        case AtomicOp::max:
            r = s(a) > s(b) ? a : b;
            break;
    }
    return bits32 ? (r & 0xffffffffu) : r;
}

// The operand rank r uses in round i: every rank can recompute everyone's.
std::uint64_t operand_of(AtomicOp op, Rank r, int i, int rounds, bool b32) {
    const std::uint64_t mask = b32 ? 0xffffffffull : ~0ull;
    const int bit = static_cast<int>((r * rounds + i) % (b32 ? 32 : 64));
    switch (op) {
        case AtomicOp::add:
            return r + 1;
        case AtomicOp::and_:
            return ~(1ull << bit) & mask;
        case AtomicOp::or_:
            return 1ull << bit;
        case AtomicOp::xor_:
            return (r + 1) * 0x1010101ull * (i + 1) & mask;
        case AtomicOp::swap:
            return 7;
        case AtomicOp::min:
            return static_cast<std::uint64_t>(500000 - r * 1000 - i);
        case AtomicOp::max:
            return static_cast<std::uint64_t>(r * 1000 + i);
    }
    return 0;
}

// Every rank applies `rounds` operations to one word on rank 0; operands are
// chosen so that the final value is order independent and known exactly.
TEST(OneSided, EveryAtomicHammeredByEveryRank) {
    const std::uint32_t n = ctx().size();
    const Rank me = ctx().rank();
    Windows w(64);
    constexpr int rounds = 200;
    for (AtomicWidth width : {AtomicWidth::bits32, AtomicWidth::bits64}) {
        const bool b32 = width == AtomicWidth::bits32;
        const std::uint64_t mask = b32 ? 0xffffffffull : ~0ull;
        for (AtomicOp op : {AtomicOp::add, AtomicOp::and_, AtomicOp::or_, AtomicOp::xor_,
                            AtomicOp::swap, AtomicOp::min, AtomicOp::max}) {
            const std::uint64_t init =
                op == AtomicOp::and_ ? mask : (op == AtomicOp::min ? 1000000 : 0);
            if (me == 0) {
                if (b32) {
                    std::uint32_t v = static_cast<std::uint32_t>(init);
                    std::memcpy(w.bytes() + 8, &v, 4);
                } else {
                    std::memcpy(w.bytes() + 8, &init, 8);
                }
            }
            ASSERT_EQ(ctx().barrier(), Status::success);
            std::uint64_t expect = init;
            std::vector<std::uint64_t> fetched(rounds);
            for (int i = 0; i < rounds; ++i) {
                const std::uint64_t operand = operand_of(op, me, i, rounds, b32);
                std::uint64_t* f = (i % 2) ? &fetched[i] : nullptr;
                ASSERT_EQ(ctx().atomic(0, op, width, w.keys[0], 8, operand, f), Status::success);
            }
            ASSERT_EQ(ctx().flush(0), Status::success);
            ASSERT_EQ(ctx().barrier(), Status::success);
            // The value every rank's operations produce together, in any order.
            for (Rank r = 0; r < n; ++r)
                for (int i = 0; i < rounds; ++i) {
                    const std::uint64_t operand = operand_of(op, r, i, rounds, b32);
                    expect = apply(op, expect, operand, b32);
                }
            if (me == 0) {
                std::uint64_t got = 0;
                std::memcpy(&got, w.bytes() + 8, b32 ? 4 : 8);
                EXPECT_EQ(got, expect) << "op " << static_cast<int>(op) << (b32 ? " 32" : " 64");
            }
            for (int i = 1; i < rounds; i += 2) EXPECT_LE(fetched[i], mask);
            ASSERT_EQ(ctx().barrier(), Status::success);
        }
    }
}

// Atomics one rank issues to one word are applied in the order it issued
// them: a fetch after a burst of plain adds, with no flush between, sees every
// add.  A burst longer than a transport's queue finds it full part-way; the
// rest must not take another path that could overtake the queued ones (over
// ofi's shm provider the fetch saw one add short).
TEST(OneSided, AFetchSeesEveryEarlierAtomicOfItsOrigin) {
    const Rank me = ctx().rank();
    Windows w(8 * 64);
    constexpr std::uint64_t burst = 3000;
    const std::uint64_t offset = 8 * me;
    for (std::uint64_t i = 1; i <= burst; ++i)
        ASSERT_EQ(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, w.keys[0], offset, i),
                  Status::success);
    std::uint64_t before = 0;
    ASSERT_EQ(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, w.keys[0], offset, 0, &before),
              Status::success);
    ASSERT_EQ(ctx().flush(0), Status::success);
    EXPECT_EQ(before, burst * (burst + 1) / 2);
}

TEST(OneSided, CompareAndSwapElectsOneWinner) {
    const Rank me = ctx().rank();
    Windows w(16);
    std::uint64_t old = 99;
    ASSERT_EQ(ctx().cswap(0, AtomicWidth::bits64, w.keys[0], 0, 0, me + 1, &old), Status::success);
    ASSERT_EQ(ctx().flush(0), Status::success);
    // Exactly one rank saw 0; the others saw the winner's value.
    std::uint64_t won = old == 0 ? 1 : 0, total = 0;
    std::uint64_t winners_at_0 = 0;
    Windows counter(8);
    ASSERT_EQ(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, counter.keys[0], 0, won, nullptr),
              Status::success);
    ASSERT_EQ(ctx().fence(), Status::success);
    ASSERT_EQ(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, counter.keys[0], 0, 0, &total),
              Status::success);
    ASSERT_EQ(ctx().flush(0), Status::success);
    EXPECT_EQ(total, 1u);
    (void)winners_at_0;
}

// No rank leaves a barrier before every rank entered it: each rank bumps a
// counter on rank 0 before entering and must read every bump after leaving;
// the late rank of each round stores its arrival time (one clock for the
// node), and nobody may leave before it.
std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

TEST(OneSided, BarrierNobodyLeavesEarly) {
    const std::uint32_t n = ctx().size();
    const Rank me = ctx().rank();
    Windows w(16);
    for (int round = 1; round <= 20; ++round) {
        const Rank late = static_cast<Rank>(round) % n;
        if (me == late) {
            // Kept: the lateness is what is tested (nobody may leave before it).
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            std::int64_t t = now_ns();
            ASSERT_EQ(ctx().put(0, &t, sizeof t, w.keys[0], 8), Status::success);
            ASSERT_EQ(ctx().flush(0), Status::success);
        }
        ASSERT_EQ(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, w.keys[0], 0, 1, nullptr),
                  Status::success);
        ASSERT_EQ(ctx().flush(0), Status::success);
        ASSERT_EQ(ctx().barrier(), Status::success);
        const std::int64_t left = now_ns();
        std::uint64_t seen = 0;
        std::int64_t late_arrival = 0;
        ASSERT_EQ(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, w.keys[0], 0, 0, &seen),
                  Status::success);
        ASSERT_EQ(ctx().get(0, &late_arrival, sizeof late_arrival, w.keys[0], 8), Status::success);
        ASSERT_EQ(ctx().flush(0), Status::success);
        EXPECT_GE(seen, static_cast<std::uint64_t>(round) * n) << "round " << round;
        EXPECT_GE(left, late_arrival) << "left before rank " << late << " arrived, round " << round;
        ASSERT_EQ(ctx().barrier(), Status::success);  // nobody starts the next round early
    }
}

}  // namespace
