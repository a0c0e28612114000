// The memory-release monitor over real memory: munmap, free() of a large
// block, madvise, mremap, mmap over a mapping and a shrunk heap are seen, and a
// registration cache following it never hands out a registration of memory
// that was released and mapped again at the same address.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "transit/btl/util/memory_release_monitor.hpp"
#include "transit/btl/util/registration_cache.hpp"

namespace {

using transit::btl::util::MemoryReleaseMonitor;
using transit::btl::util::ReleaseCursor;
using transit::btl::util::ReleaseMonitorState;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitizer_allocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitizer_allocator = true;
#else
constexpr bool sanitizer_allocator = false;
#endif
#else
constexpr bool sanitizer_allocator = false;
#endif

const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// 8 MiB blocks with glibc's mmap threshold fixed at 1 MiB (it otherwise rises
// after a free): malloc maps each, and free() unmaps it from inside libc,
// never through the PLT.
constexpr std::size_t big = 8u << 20;
void* malloc_big() {
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    void* p = std::malloc(big);
    if (p != nullptr) std::memset(p, 1, big);
    return p;
}

bool hooks_installed() {
    auto s = MemoryReleaseMonitor::start();
    return s == ReleaseMonitorState::active || s == ReleaseMonitorState::partial;
}

// What a cursor drained: ranges, and whether it was told that some were lost.
struct Seen {
    std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
    bool lost = false;
    bool covers(const void* p, std::size_t len) const {
        return covers(reinterpret_cast<std::uintptr_t>(p), len);
    }
    bool covers(std::uintptr_t a, std::size_t len) const {
        for (auto [b, l] : ranges)
            if (a >= b && a + len <= b + l) return true;
        return false;
    }
};

Seen drain(ReleaseCursor& c) {
    Seen s;
    c.drain([&](std::uintptr_t b, std::size_t l) { s.ranges.emplace_back(b, l); },
            [&] { s.lost = true; });
    return s;
}

void* map_pages(std::size_t n, void* at = nullptr) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (at != nullptr ? MAP_FIXED_NOREPLACE : 0);
    void* p = mmap(at, n * page, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    std::memset(p, 0x5a, n * page);
    return p;
}

TEST(MemoryReleaseMonitor, InstallsOnX86_64Glibc) {
#if defined(__x86_64__) && defined(__GLIBC__)
    EXPECT_EQ(MemoryReleaseMonitor::start(),
              sanitizer_allocator ? ReleaseMonitorState::partial : ReleaseMonitorState::active)
        << MemoryReleaseMonitor::reason();
    EXPECT_EQ(MemoryReleaseMonitor::start(), MemoryReleaseMonitor::start()) << "installed once";
#else
    EXPECT_FALSE(MemoryReleaseMonitor::reliable());
    EXPECT_STRNE(MemoryReleaseMonitor::reason(), "");
#endif
}

TEST(MemoryReleaseMonitor, SeesMunmapMadviseMremapAndMmapOverAMapping) {
    if (!hooks_installed()) GTEST_SKIP() << MemoryReleaseMonitor::reason();
    auto c = ReleaseCursor::follow();
    EXPECT_FALSE(c.pending());

    void* a = map_pages(4);
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(madvise(a, page, MADV_WILLNEED), 0);
    EXPECT_FALSE(drain(c).covers(a, page)) << "WILLNEED keeps the pages";
    ASSERT_EQ(madvise(a, 2 * page, MADV_DONTNEED), 0);
    EXPECT_TRUE(drain(c).covers(a, 2 * page));

    void* moved = mremap(a, 4 * page, 64 * page, MREMAP_MAYMOVE);
    ASSERT_NE(moved, MAP_FAILED);
    EXPECT_TRUE(drain(c).covers(a, 4 * page)) << "the old range is gone or remapped";

    void* over = mmap(moved, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(over, moved);
    EXPECT_TRUE(drain(c).covers(moved, page)) << "MAP_FIXED replaced the pages";

    ASSERT_EQ(munmap(moved, 64 * page), 0);
    EXPECT_TRUE(drain(c).covers(moved, 64 * page));

    // Errors still come back as the originals report them.
    errno = 0;
    EXPECT_EQ(munmap(reinterpret_cast<void*>(1), page), -1);
    EXPECT_EQ(errno, EINVAL);
    drain(c);  // the failed call was recorded (before the call: harmless)
    EXPECT_FALSE(c.pending());
}

TEST(MemoryReleaseMonitor, SeesFreeOfALargeBlockAndAShrunkHeap) {
    if (!MemoryReleaseMonitor::reliable())
        GTEST_SKIP() << "the allocator is not glibc's: " << MemoryReleaseMonitor::reason();
    auto c = ReleaseCursor::follow();
    void* p = malloc_big();
    ASSERT_NE(p, nullptr);
    const auto where = reinterpret_cast<std::uintptr_t>(p);  // not read after free()
    std::free(p);
    EXPECT_TRUE(drain(c).covers(where, big));

    void* top = sbrk(0);
    ASSERT_NE(sbrk(static_cast<intptr_t>(4 * page)), reinterpret_cast<void*>(-1));
    ASSERT_NE(sbrk(-static_cast<intptr_t>(4 * page)), reinterpret_cast<void*>(-1));
    EXPECT_EQ(sbrk(0), top) << "the hook keeps libc's break";
    EXPECT_TRUE(drain(c).covers(top, 4 * page));
}

TEST(MemoryReleaseMonitor, AReaderTooFarBehindIsToldToDropEverything) {
    auto c = ReleaseCursor::follow();
    for (std::size_t i = 0; i < MemoryReleaseMonitor::log_length + 5; ++i)
        MemoryReleaseMonitor::note_release(reinterpret_cast<void*>(0x1000 + i), 1);
    Seen s = drain(c);
    EXPECT_TRUE(s.lost);
    EXPECT_FALSE(c.pending());
    MemoryReleaseMonitor::note_release(reinterpret_cast<void*>(0x2000), 1);
    s = drain(c);
    EXPECT_FALSE(s.lost);
    EXPECT_TRUE(s.covers(reinterpret_cast<void*>(0x2000), 1));
}

// A cache over real memory, with a backend that only counts.
struct Keys {
    std::uint32_t key = 0;
};
using Cache = transit::btl::util::RegistrationCache<Keys>;
using Entry = transit::btl::util::Registration<Keys>;

class CountingBackend : public transit::btl::util::RegistrationBackend<Keys> {
  public:
    bool register_region(Entry& r) noexcept override {
        r.key = next++;
        live.insert(r.key);
        return true;
    }
    void deregister_region(Entry& r) noexcept override { EXPECT_EQ(live.erase(r.key), 1u); }
    std::set<std::uint32_t> live;
    std::uint32_t next = 1;
};

// Registers [p, p + len), releases it (kept unused), runs `release_memory`,
// maps memory at the same address again with `remap` and registers it: that
// must be a new registration, never the cached one.
template <typename Release, typename Remap>
void expect_miss_after(Cache& cache, CountingBackend& be, void* p, std::size_t len,
                       Release release_memory, Remap remap) {
    Entry* first = cache.acquire(p, len, 0);
    ASSERT_NE(first, nullptr);
    const std::uint32_t old_key = first->key;
    cache.release(first);
    // Without a reliable monitor (sanitizer builds) nothing is kept: a miss too.
    ASSERT_EQ(cache.unused(), MemoryReleaseMonitor::reliable() ? 1u : 0u);
    const auto misses = cache.stats().misses;

    release_memory();
    void* again = remap();
    ASSERT_EQ(again, p) << "could not map the same address again";

    Entry* second = cache.acquire(again, len, 0);
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(cache.stats().misses, misses + 1) << "a hit on a registration of released memory";
    EXPECT_NE(second->key, old_key);
    EXPECT_EQ(be.live.count(old_key), 0u) << "the stale registration was deregistered";
    cache.release(second);
}

// After the monitor went blind: memory released and mapped again is a miss,
// and nothing is kept unused any more.
void expect_cached_dropped(Cache& cache, void* p) {
    const auto misses = cache.stats().misses;
    ASSERT_EQ(munmap(p, 4 * page), 0);
    ASSERT_EQ(map_pages(4, p), p);
    Entry* e = cache.acquire(p, 4 * page, 0);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(cache.stats().misses, misses + 1);
    cache.release(e);
    EXPECT_EQ(cache.unused(), 0u) << "kept although releases go unseen";
    EXPECT_NE(cache.unused_off_reason(), nullptr);
}

TEST(RegistrationCacheReleases, MunmapThenMmapAtTheSameAddressIsAMiss) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    void* p = map_pages(4);
    ASSERT_NE(p, nullptr);
    expect_miss_after(
        cache, be, p, 4 * page, [&] { ASSERT_EQ(munmap(p, 4 * page), 0); },
        [&] { return map_pages(4, p); });
    munmap(p, 4 * page);
}

TEST(RegistrationCacheReleases, FreeOfALargeBlockThenMmapThereIsAMiss) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    if (!MemoryReleaseMonitor::reliable()) GTEST_SKIP() << MemoryReleaseMonitor::reason();
    void* p = malloc_big();
    ASSERT_NE(p, nullptr);
    // The block's pages, whole: what mmap can take once free() gave them back.
    auto* first_page = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) & ~(page - 1));
    void* mapped = nullptr;
    expect_miss_after(
        cache, be, first_page, big - page, [&] { std::free(p); },
        [&] { return mapped = map_pages(big / page - 1, first_page); });
    if (mapped != nullptr) munmap(mapped, big - page);
}

TEST(RegistrationCacheReleases, MadviseDontneedIsAMiss) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    void* p = map_pages(4);
    ASSERT_NE(p, nullptr);
    expect_miss_after(
        cache, be, p, 4 * page, [&] { ASSERT_EQ(madvise(p, 4 * page, MADV_DONTNEED), 0); },
        [&] { return p; });
    munmap(p, 4 * page);
}

TEST(RegistrationCacheReleases, AReleaseOnAnotherThreadIsSeen) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    void* p = map_pages(4);
    ASSERT_NE(p, nullptr);
    expect_miss_after(
        cache, be, p, 4 * page,
        [&] {
            std::thread t([&] { EXPECT_EQ(munmap(p, 4 * page), 0); });
            t.join();
        },
        [&] { return map_pages(4, p); });
    munmap(p, 4 * page);
}

TEST(RegistrationCacheReleases, UnrelatedReleasesKeepTheCachedRegistration) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    if (!MemoryReleaseMonitor::reliable()) GTEST_SKIP() << MemoryReleaseMonitor::reason();
    void* p = map_pages(4);
    void* other = map_pages(4);
    ASSERT_NE(p, nullptr);
    ASSERT_NE(other, nullptr);
    Entry* e = cache.acquire(p, 4 * page, 0);
    cache.release(e);
    ASSERT_EQ(munmap(other, 4 * page), 0);
    EXPECT_EQ(cache.find(p, page), nullptr) << "released memory waits to be applied";
    EXPECT_EQ(cache.acquire(p, page, 0), e) << "a hit: the release was elsewhere";
    EXPECT_EQ(cache.find(p, page), e);
    cache.release(e);
    munmap(p, 4 * page);
}

TEST(RegistrationCacheReleases, TooManyReleasesUnreadDropEveryRegistration) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    if (!MemoryReleaseMonitor::reliable()) GTEST_SKIP() << MemoryReleaseMonitor::reason();
    void* p = map_pages(1);
    ASSERT_NE(p, nullptr);
    Entry* held = cache.acquire(p, page, 0);
    Entry* cached = cache.acquire(static_cast<char*>(p) + 1, 1, 2);
    cache.release(cached);
    for (std::size_t i = 0; i <= MemoryReleaseMonitor::log_length; ++i)
        MemoryReleaseMonitor::note_release(reinterpret_cast<void*>(0x1000), 1);
    Entry* again = cache.acquire(p, page, 0);
    EXPECT_NE(again, held) << "the held one became unfindable";
    EXPECT_EQ(cache.unused(), 0u);
    EXPECT_EQ(be.live.size(), 2u) << "held and new; the cached one deregistered";
    cache.release(again);
    cache.release(held);
    munmap(p, page);
}

// UCX's UCM patches the same entries when it installs a memory event handler;
// loaded after Transit's monitor it blinds it.  The cache must notice before
// its next lookup, drop what it kept and keep nothing from then on.
TEST(RegistrationCacheReleases, AnotherPatcherAfterTheMonitorDropsEverything) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page});
    if (!MemoryReleaseMonitor::reliable()) GTEST_SKIP() << MemoryReleaseMonitor::reason();
    void* p = map_pages(4);
    ASSERT_NE(p, nullptr);
    cache.release(cache.acquire(p, 4 * page, 0));
    ASSERT_EQ(cache.unused(), 1u);
    // UCM patches when loaded: after the cache kept a registration.
    void* ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL);
    void* ucm = ucs != nullptr ? dlopen("libucm.so.0", RTLD_NOW) : nullptr;
    if (ucm == nullptr) {
        munmap(p, 4 * page);
        GTEST_SKIP() << "no UCX here";
    }
    using SetHandler = int (*)(int, int, void (*)(int, void*, void*), void*);
    auto set_handler = reinterpret_cast<SetHandler>(dlsym(ucm, "ucm_set_event_handler"));
    ASSERT_NE(set_handler, nullptr);

    constexpr int vm_unmapped = 1 << 17;  // UCM_EVENT_VM_UNMAPPED
    ASSERT_EQ(set_handler(
                  vm_unmapped, 0, [](int, void*, void*) {}, nullptr),
              0);
    expect_cached_dropped(cache, p);
    munmap(p, 4 * page);
}

TEST(RegistrationCacheReleases, WithoutTrackingNothingUnusedIsKept) {
    CountingBackend be;
    Cache cache(be, {.max_unused = 4, .page_size = page, .track_releases = false});
    EXPECT_EQ(cache.max_unused(), 0u);
    ASSERT_NE(cache.unused_off_reason(), nullptr);
    EXPECT_STREQ(cache.unused_off_reason(), "release tracking is off");
    void* p = map_pages(1);
    ASSERT_NE(p, nullptr);
    cache.release(cache.acquire(p, page, 0));
    EXPECT_EQ(cache.unused(), 0u);
    EXPECT_TRUE(be.live.empty()) << "deregistered with its last release";
    munmap(p, page);

    Cache asked_none(be, {.max_unused = 0, .page_size = page});
    EXPECT_EQ(asked_none.unused_off_reason(), nullptr);
}

}  // namespace
