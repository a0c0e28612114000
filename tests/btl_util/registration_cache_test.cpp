// The toolkit's registration cache with a stand-in backend: sharing, access
// rights, LRU of unused registrations, invalidation, failures and teardown.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "transit/btl/util/registration_cache.hpp"

namespace {

struct Keys {
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
};
using Registration = transit::btl::util::Registration<Keys>;
using RegistrationBackend = transit::btl::util::RegistrationBackend<Keys>;
using RegistrationCache = transit::btl::util::RegistrationCache<Keys>;

const Registration* find_rkey(const RegistrationCache& rc, std::uint32_t rkey) {
    return rc.find_held([rkey](const Registration& r) { return r.rkey == rkey; });
}

constexpr std::uint32_t local = 0x1, remote_read = 0x2, remote_write = 0x4;

// Stands in for ibv_reg_mr, which needs a device: records what is registered
// so every test can check nothing leaks and nothing is deregistered twice.
class FakeBackend : public RegistrationBackend {
  public:
    bool register_region(Registration& r) noexcept override {
        if (fail_next > 0) {
            --fail_next;
            return false;
        }
        r.lkey = r.rkey = next_key++;
        live.insert(r.rkey);
        ++registrations;
        return true;
    }
    void deregister_region(Registration& r) noexcept override {
        EXPECT_EQ(live.erase(r.rkey), 1u) << "double or unknown deregistration";
        ++deregistrations;
    }
    std::set<std::uint32_t> live;
    std::uint32_t next_key = 100;
    int registrations = 0;
    int deregistrations = 0;
    int fail_next = 0;
};

struct Buffer {
    explicit Buffer(std::size_t pages) : mem(std::aligned_alloc(4096, pages * 4096)) {}
    ~Buffer() { std::free(mem); }
    char* at(std::size_t off) const { return static_cast<char*>(mem) + off; }
    void* mem;
};

}  // namespace

TEST(RegistrationCache, HitWithinARegisteredRange) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 0, .page_size = 4096});
    Buffer buf(4);
    Registration* a = rc.acquire(buf.at(100), 3 * 4096, local | remote_write);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->base, reinterpret_cast<std::uintptr_t>(buf.mem)) << "page rounded down";
    EXPECT_EQ(a->length, 4u * 4096) << "page rounded up";
    Registration* b = rc.acquire(buf.at(4096), 10, local);
    EXPECT_EQ(b, a) << "inside, with fewer access rights";
    EXPECT_EQ(a->refs, 2u);
    EXPECT_EQ(rc.stats().hits, 1u);
    EXPECT_EQ(rc.stats().misses, 1u);
    EXPECT_EQ(be.registrations, 1);
    rc.release(b);
    rc.release(a);
    EXPECT_EQ(be.deregistrations, 1) << "max_unused 0: gone with the last release";
    EXPECT_TRUE(be.live.empty());
}

TEST(RegistrationCache, MoreAccessIsAMiss) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 0, .page_size = 4096});
    Buffer buf(1);
    Registration* a = rc.acquire(buf.at(0), 64, local);
    Registration* b = rc.acquire(buf.at(0), 64, local | remote_read);
    EXPECT_NE(a, b);
    EXPECT_EQ(b->access, local | remote_read);
    Registration* c = rc.acquire(buf.at(8), 8, remote_read);
    EXPECT_EQ(c, b);
    rc.release(a);
    rc.release(b);
    rc.release(c);
    EXPECT_TRUE(be.live.empty());
}

TEST(RegistrationCache, PartialOverlapRegistersNewRegionWithoutWidening) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 0, .page_size = 4096});
    Buffer buf(4);
    Registration* a = rc.acquire(buf.at(0), 2 * 4096, local);
    Registration* b = rc.acquire(buf.at(4096), 2 * 4096, local);  // pages 1-2
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a, b);
    EXPECT_EQ(b->base, reinterpret_cast<std::uintptr_t>(buf.at(4096)));
    EXPECT_EQ(b->length, 2u * 4096) << "never widened to cover a's pages";
    EXPECT_EQ(a->length, 2u * 4096);
    // Page 1 is covered by both: either answer is right; page 2 only by b.
    Registration* c = rc.acquire(buf.at(2 * 4096), 16, local);
    EXPECT_EQ(c, b);
    Registration* d = rc.acquire(buf.at(4096), 16, local);
    EXPECT_TRUE(d == a || d == b);
    for (Registration* r : {a, b, c, d}) rc.release(r);
    EXPECT_TRUE(be.live.empty());
}

TEST(RegistrationCache, LruEvictsTheLeastRecentlyReleased) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 2, .page_size = 4096});
    // None are kept where the release monitor cannot see memory go away (the
    // sanitizers' allocators release it by raw system calls).
    if (rc.unused_off_reason() != nullptr) GTEST_SKIP() << rc.unused_off_reason();
    Buffer buf(8);
    Registration* r[3];
    for (int i = 0; i < 3; ++i) r[i] = rc.acquire(buf.at(i * 2 * 4096), 4096, local);
    std::uint32_t key0 = r[0]->rkey, key1 = r[1]->rkey, key2 = r[2]->rkey;
    rc.release(r[0]);
    rc.release(r[1]);
    EXPECT_EQ(rc.unused(), 2u);
    EXPECT_EQ(be.deregistrations, 0) << "kept for reuse";
    // Reuse r[1] (moves it out of the LRU), release it again: now r[0] is oldest.
    EXPECT_EQ(rc.acquire(buf.at(2 * 4096), 8, local), r[1]);
    rc.release(r[1]);
    rc.release(r[2]);  // third unused entry: evicts r[0]
    EXPECT_EQ(rc.unused(), 2u);
    EXPECT_EQ(rc.stats().evictions, 1u);
    EXPECT_FALSE(be.live.count(key0));
    EXPECT_TRUE(be.live.count(key1));
    EXPECT_TRUE(be.live.count(key2));
    // The evicted range registers anew.
    Registration* again = rc.acquire(buf.at(0), 8, local);
    EXPECT_NE(again->rkey, key0);
    rc.release(again);
}

TEST(RegistrationCache, InvalidateDropsUnusedAtOnceAndUsedAtLastRelease) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 8, .page_size = 4096});
    // None are kept where the release monitor cannot see memory go away (the
    // sanitizers' allocators release it by raw system calls).
    if (rc.unused_off_reason() != nullptr) GTEST_SKIP() << rc.unused_off_reason();
    Buffer buf(8);
    Registration* unused = rc.acquire(buf.at(0), 4096, local | remote_write);
    Registration* used = rc.acquire(buf.at(2 * 4096), 4096, local | remote_write);
    Registration* outside = rc.acquire(buf.at(6 * 4096), 4096, local);
    std::uint32_t unused_key = unused->rkey, used_key = used->rkey;
    rc.release(unused);
    ASSERT_EQ(rc.unused(), 1u);

    // The program frees pages 0..3.
    EXPECT_EQ(rc.invalidate(buf.at(10), 3 * 4096), 2u);
    EXPECT_FALSE(be.live.count(unused_key)) << "cached and freed: deregistered now";
    EXPECT_TRUE(be.live.count(used_key)) << "its holder still has it";
    EXPECT_FALSE(used->findable);
    EXPECT_EQ(find_rkey(rc, used_key), nullptr) << "no emulated atomic into freed memory";

    // Nothing in the freed range is found any more, even with the old holder alive.
    Registration* fresh = rc.acquire(buf.at(2 * 4096), 16, local | remote_write);
    EXPECT_NE(fresh, used);
    EXPECT_NE(fresh->rkey, used_key);
    rc.release(used);
    EXPECT_FALSE(be.live.count(used_key)) << "deregistered at its last release, not cached";
    EXPECT_EQ(rc.acquire(buf.at(6 * 4096), 8, local), outside) << "untouched range still cached";
    rc.release(outside);
    rc.release(outside);
    rc.release(fresh);
}

TEST(RegistrationCache, ReleasedRegistrationIsNotReachableByRkey) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 4, .page_size = 4096});
    Buffer buf(1);
    Registration* r = rc.acquire(buf.at(0), 64, local | remote_write);
    std::uint32_t key = r->rkey;
    EXPECT_EQ(find_rkey(rc, key), r);
    rc.release(r);
    EXPECT_EQ(find_rkey(rc, key), nullptr) << "deregistered by its user, even if cached";
}

TEST(RegistrationCache, FailureEvictsUnusedAndRetriesOnce) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 4, .page_size = 4096});
    // None are kept where the release monitor cannot see memory go away (the
    // sanitizers' allocators release it by raw system calls).
    if (rc.unused_off_reason() != nullptr) GTEST_SKIP() << rc.unused_off_reason();
    Buffer buf(4);
    rc.release(rc.acquire(buf.at(0), 8, local));
    ASSERT_EQ(rc.unused(), 1u);
    be.fail_next = 1;  // e.g. the pinned-memory limit is hit
    Registration* r = rc.acquire(buf.at(2 * 4096), 8, local);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(rc.unused(), 0u);
    be.fail_next = 2;
    EXPECT_EQ(rc.acquire(buf.at(3 * 4096), 8, local), nullptr);
    EXPECT_EQ(rc.stats().failures, 1u);
    rc.release(r);
}

TEST(RegistrationCache, RejectsEmptyAndWrappingRanges) {
    FakeBackend be;
    RegistrationCache rc(be, {});
    Buffer buf(1);
    EXPECT_EQ(rc.acquire(buf.at(0), 0, local), nullptr);
    EXPECT_EQ(rc.acquire(nullptr, 8, local), nullptr);
    EXPECT_EQ(rc.acquire(reinterpret_cast<void*>(~std::uintptr_t{0} - 10), 100, local), nullptr);
    EXPECT_EQ(be.registrations, 0);
}

TEST(RegistrationCache, DestructorDeregistersEverything) {
    FakeBackend be;
    Buffer buf(4);
    {
        RegistrationCache rc(be, {.max_unused = 4, .page_size = 4096});
        rc.acquire(buf.at(0), 8, local);                     // still held
        rc.release(rc.acquire(buf.at(2 * 4096), 8, local));  // cached
        Registration* orphan = rc.acquire(buf.at(3 * 4096), 8, local);
        rc.invalidate(buf.at(3 * 4096), 8);  // held but unfindable
        (void)orphan;
    }
    EXPECT_TRUE(be.live.empty());
    EXPECT_EQ(be.registrations, be.deregistrations);
}

TEST(RegistrationCache, FindNeverRegistersAndTakesNoReference) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 0, .page_size = 1});
    Buffer buf(1);
    EXPECT_EQ(rc.find(buf.at(0), 8), nullptr);
    Registration* r = rc.acquire(buf.at(10), 100, local);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->base, reinterpret_cast<std::uintptr_t>(buf.at(10))) << "page size 1: exact";
    EXPECT_EQ(r->length, 100u);
    EXPECT_EQ(rc.find(buf.at(20), 50), r);
    EXPECT_EQ(rc.find(buf.at(20), 100), nullptr) << "past the registered end";
    EXPECT_EQ(r->refs, 1u);
    EXPECT_EQ(be.registrations, 1);
    rc.release(r);
    EXPECT_TRUE(be.live.empty());
}

TEST(RegistrationCache, RetainTakesACachedRegistrationOutOfTheLru) {
    FakeBackend be;
    RegistrationCache rc(be, {.max_unused = 1, .page_size = 4096});
    // None are kept where the release monitor cannot see memory go away (the
    // sanitizers' allocators release it by raw system calls).
    if (rc.unused_off_reason() != nullptr) GTEST_SKIP() << rc.unused_off_reason();
    Buffer buf(4);
    Registration* a = rc.acquire(buf.at(0), 8, local);
    const std::uint32_t key = a->rkey;
    rc.release(a);
    ASSERT_EQ(rc.unused(), 1u);
    Registration* found = rc.find(buf.at(0), 8);
    ASSERT_EQ(found, a);
    rc.retain(found);
    EXPECT_EQ(rc.unused(), 0u);
    // Another released registration must not evict the one just retained.
    rc.release(rc.acquire(buf.at(2 * 4096), 8, local));
    EXPECT_TRUE(be.live.count(key));
    rc.release(found);
}
