// The registration cache: pinned memory registrations, shared between users of
// the same pages and (optionally) kept after their last release for reuse.
//
// Rules that keep it sound:
//   - A region is found only when one cached registration covers the whole
//     request, page-rounded, with at least the requested access.  Partial
//     overlaps register a new region; nothing is ever widened behind a user's
//     back, so a peer's rkey never reaches memory nobody registered for it.
//   - invalidate(range) makes every overlapping registration unfindable at once;
//     unused ones are deregistered immediately, used ones at their last release.
//     After it, no lookup returns memory from that range.
//   - With max_unused == 0 (the default) a registration dies with its last
//     release: a deregistered region never stays usable by a peer's rkey.
//     With max_unused > 0 released registrations wait in an LRU of that size.
//
// The cache does not talk to verbs itself: a Backend registers and deregisters,
// so the bookkeeping is tested without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace transit::openib {

struct Registration {
    std::uintptr_t base = 0;   // page aligned
    std::size_t length = 0;    // whole pages
    std::uint32_t access = 0;  // btl::reg_flags
    std::uint32_t lkey = 0;
    std::uint32_t rkey = 0;
    void* backend_handle = nullptr;  // ibv_mr*

    std::uint32_t refs = 0;
    bool findable = true;  // false once invalidated or removed

    bool covers(std::uintptr_t addr, std::size_t len) const noexcept {
        return addr >= base && addr + len <= base + length;
    }
    bool overlaps(std::uintptr_t addr, std::size_t len) const noexcept {
        return addr < base + length && base < addr + len;
    }

  private:
    friend class RegistrationCache;
    Registration* lru_prev = nullptr;
    Registration* lru_next = nullptr;
    bool in_lru = false;
};

class RegistrationBackend {
  public:
    virtual ~RegistrationBackend() = default;
    // Registers [r.base, r.base + r.length) with r.access; fills lkey, rkey and
    // backend_handle.  False on failure (errno says why).
    virtual bool register_region(Registration& r) noexcept = 0;
    virtual void deregister_region(Registration& r) noexcept = 0;
};

class RegistrationCache {
  public:
    struct Config {
        std::size_t max_unused = 0;  // released registrations kept for reuse
        std::size_t page_size = 4096;
    };
    struct Stats {
        std::uint64_t hits = 0;
        std::uint64_t misses = 0;
        std::uint64_t evictions = 0;
        std::uint64_t invalidations = 0;
        std::uint64_t failures = 0;
    };

    RegistrationCache(RegistrationBackend& backend, Config config);
    ~RegistrationCache();  // deregisters everything still registered
    RegistrationCache(const RegistrationCache&) = delete;
    RegistrationCache& operator=(const RegistrationCache&) = delete;

    // A registration covering [addr, addr + len) with at least `access`, its
    // reference count raised; nullptr when registering fails (after evicting
    // unused entries and trying once more) or len is 0.
    Registration* acquire(const void* addr, std::size_t len, std::uint32_t access);
    // Drops one reference (from acquire or retain).
    void release(Registration* r);
    void retain(Registration* r) noexcept { ++r->refs; }

    // The memory [addr, addr + len) is gone or must not be reached any more.
    // Returns how many registrations it made unfindable.
    std::size_t invalidate(const void* addr, std::size_t len);

    // The findable registration with this rkey that somebody holds (the target's
    // check of an emulated atomic), or nullptr.
    const Registration* find_rkey(std::uint32_t rkey) const noexcept;

    // Deregisters every unused registration.
    void flush_unused();

    std::size_t size() const noexcept { return entries_.size(); }  // findable ones
    std::size_t unused() const noexcept { return lru_size_; }
    const Stats& stats() const noexcept { return stats_; }

  private:
    using Map = std::multimap<std::uintptr_t, std::unique_ptr<Registration>>;

    Registration* lookup(std::uintptr_t base, std::size_t len, std::uint32_t access);
    Registration* create(std::uintptr_t base, std::size_t len, std::uint32_t access);
    void destroy(Registration* r);
    void unfind(Registration* r);
    void lru_push(Registration* r) noexcept;
    void lru_remove(Registration* r) noexcept;
    void trim_lru();

    RegistrationBackend& backend_;
    Config config_;
    Map entries_;                                         // findable registrations by base
    std::vector<std::unique_ptr<Registration>> orphans_;  // unfindable but still in use
    Registration* lru_head_ = nullptr;                    // least recently released
    Registration* lru_tail_ = nullptr;
    std::size_t lru_size_ = 0;
    Stats stats_;
};

}  // namespace transit::openib
