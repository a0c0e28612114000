// One-sided operations outside the target's live registrations: a key forged
// to start below or above a region, and a key whose region was deregistered.
// Each is an error at the origin (from the call or from the next flush), the
// get's buffer and the atomic's result are left untouched, the target's memory
// around and inside the region is unchanged, and the job goes on: a valid
// operation and a fence succeed afterwards.  Every rank is an origin (to the
// next rank, itself with one rank) and a target, over heap and mem_alloc memory.
#include <cstdlib>
#include <cstring>

#include "tests/pml/pml_env.hpp"

namespace {

using namespace transit;
using transit::test::ctx;

constexpr std::size_t guard = 128;  // unregistered bytes on each side of the region
constexpr std::size_t window = 256;
constexpr std::byte sentinel{0xa5};
constexpr std::uint64_t sentinel_word = 0xa5a5a5a5a5a5a5a5ull;

// Every rank's packed key, by rank.
std::vector<std::vector<std::byte>> exchange(const std::vector<std::byte>& mine) {
    const std::uint32_t n = ctx().size();
    std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(4096));
    std::vector<Request*> reqs;
    for (Rank r = 0; r < n; ++r) {
        Request* q;
        EXPECT_TRUE(ok(ctx().irecv(r, 91, in[r].data(), in[r].size(), q)));
        reqs.push_back(q);
    }
    for (Rank r = 0; r < n; ++r) {
        Request* q;
        EXPECT_TRUE(ok(ctx().isend(r, 91, mine.data(), mine.size(), q)));
        reqs.push_back(q);
    }
    std::vector<RequestStatus> st(reqs.size());
    EXPECT_EQ(ctx().wait_all(reqs, st), Status::success);
    for (Rank r = 0; r < n; ++r) in[r].resize(st[r].length);
    return in;
}

// `packed` with its base moved by `delta` bytes (the bounds a key claims are
// the origin's to check; the target must not trust them).
RemoteKey* forged(std::vector<std::byte> packed, std::int64_t delta) {
    std::uint64_t base = 0;
    // Behind the key's magic, region slot and secret.
    constexpr std::size_t at = sizeof(std::uint32_t) * 2 + sizeof(std::uint64_t);
    std::memcpy(&base, packed.data() + at, sizeof base);
    base += static_cast<std::uint64_t>(delta);
    std::memcpy(packed.data() + at, &base, sizeof base);
    RemoteKey* k = nullptr;
    EXPECT_EQ(ctx().unpack_key(packed, k), Status::success);
    return k;
}

// An operation the target must refuse: an error from the call, else from flush.
bool refused(Status issued, Rank target) {
    if (!ok(issued)) return true;
    return !ok(ctx().flush(target));
}

// Tries put, get, fetching atomic and 32-bit cswap through `key` at offset 0.
void expect_all_refused(Rank target, const RemoteKey* key, const char* what) {
    std::byte src[16];
    std::memset(src, 0x3c, sizeof src);
    EXPECT_TRUE(refused(ctx().put(target, src, sizeof src, key, 0), target)) << "put " << what;
    std::byte got[16];
    std::memset(got, static_cast<int>(sentinel), sizeof got);
    EXPECT_TRUE(refused(ctx().get(target, got, sizeof got, key, 0), target)) << "get " << what;
    for (std::byte b : got) ASSERT_EQ(b, sentinel) << "the refused get wrote its buffer, " << what;
    std::uint64_t fetched = sentinel_word;
    EXPECT_TRUE(refused(
        ctx().atomic(target, AtomicOp::add, AtomicWidth::bits64, key, 0, 1, &fetched), target))
        << "atomic " << what;
    EXPECT_EQ(fetched, sentinel_word) << "the refused atomic wrote its result, " << what;
    fetched = sentinel_word;
    EXPECT_TRUE(refused(ctx().cswap(target, AtomicWidth::bits32, key, 0, 0, 7, &fetched), target))
        << "cswap " << what;
    EXPECT_EQ(fetched, sentinel_word) << "the refused cswap wrote its result, " << what;
    EXPECT_TRUE(refused(
        ctx().atomic(target, AtomicOp::or_, AtomicWidth::bits64, key, 0, ~0ull, nullptr), target))
        << "non-fetching atomic " << what;
}

void expect_untouched(const std::byte* mem, std::size_t from, std::size_t to, const char* when) {
    for (std::size_t i = from; i < to; ++i)
        ASSERT_EQ(mem[i], std::byte{0})
            << "byte " << i << " of the target's memory changed " << when;
}

void run(bool shared) {
    const std::uint32_t n = ctx().size();
    const Rank target = (ctx().rank() + 1) % n;
    const std::size_t total = guard + window + guard;
    std::vector<std::uint64_t> heap(total / sizeof(std::uint64_t));
    auto* mem = shared ? static_cast<std::byte*>(ctx().mem_alloc(total))
                       : reinterpret_cast<std::byte*>(heap.data());
    ASSERT_NE(mem, nullptr);
    std::memset(mem, 0, total);
    MemoryRegion* region = nullptr;
    ASSERT_EQ(ctx().register_memory(mem + guard, window, region), Status::success);
    const auto packed = exchange(ctx().pack_key(region));
    RemoteKey* key = nullptr;
    ASSERT_EQ(ctx().unpack_key(packed[target], key), Status::success);
    RemoteKey* below = forged(packed[target], -64);
    RemoteKey* above = forged(packed[target], static_cast<std::int64_t>(window));

    expect_all_refused(target, below, "through a key forged 64 bytes below the region");
    expect_all_refused(target, above, "through a key forged just above the region");
    EXPECT_EQ(ctx().flush_all(), Status::success)
        << "a refusal outlived the flush that returned it";
    ASSERT_EQ(ctx().barrier(), Status::success);
    expect_untouched(mem, 0, total, "by operations outside the region");
    ASSERT_EQ(ctx().barrier(), Status::success);  // every rank looked before the next puts

    // The job goes on: a valid put, then a fence.
    const std::uint64_t word = 0x1122334455667788ull;
    EXPECT_EQ(ctx().put(target, &word, sizeof word, key, 8), Status::success);
    EXPECT_EQ(ctx().fence(), Status::success);
    std::uint64_t landed = 0;
    std::memcpy(&landed, mem + guard + 8, sizeof landed);
    EXPECT_EQ(landed, word) << "the valid put after the refusals";
    std::memset(mem + guard + 8, 0, sizeof word);
    ASSERT_EQ(ctx().barrier(), Status::success);

    // Deregistered: the key it handed out grants nothing any more.
    ASSERT_EQ(ctx().deregister_memory(region), Status::success);
    ASSERT_EQ(ctx().barrier(), Status::success);
    expect_all_refused(target, key, "into a deregistered region");
    ASSERT_EQ(ctx().barrier(), Status::success);
    expect_untouched(mem, 0, total, "after its deregistration");

    // A refused operation left nothing behind: the next fence succeeds.
    EXPECT_EQ(ctx().fence(), Status::success);
    ctx().release_key(key);
    ctx().release_key(below);
    ctx().release_key(above);
    if (shared) ctx().mem_free(mem);
}

TEST(OneSidedRefused, HeapMemory) {
    run(false);
}

TEST(OneSidedRefused, MemAllocMemory) {
    run(true);
}

}  // namespace
