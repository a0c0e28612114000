// A registration cache: pinned memory registrations, shared between users of
// the same pages and (optionally) kept after their last release for reuse.
//
// Rules that keep it sound:
//   - A region is found only when one cached registration covers the whole
//     request, page-rounded, with at least the requested access.  Partial
//     overlaps register a new region; nothing is ever widened behind a user's
//     back, so a peer's key never reaches memory nobody registered for it.
//   - invalidate(range) makes every overlapping registration unfindable at once;
//     unused ones are deregistered immediately, used ones at their last release.
//     After it, no lookup returns memory from that range.
//   - With max_unused == 0 a registration dies with its last release: a
//     deregistered region never stays usable by a peer's key.  With
//     max_unused > 0 released registrations wait in an LRU of that size, and
//     the cache follows the MemoryReleaseMonitor: a range unmapped, remapped
//     or discarded is invalidated before the next lookup, so memory freed and
//     mapped again at the same address never reuses the old pinned pages.
//     Without a reliable monitor (or with track_releases off) max_unused is
//     forced to 0 and unused_off_reason() says why.
//
// The cache does not talk to the network library itself: a Backend registers
// and deregisters, and `Keys` is what the backend records of a registration
// (its keys, descriptors), so the bookkeeping is tested without a device.
// Setup and registration paths only: acquire may allocate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "transit/btl/util/memory_release_monitor.hpp"

namespace transit::btl::util {

template <typename Keys>
class RegistrationCache;

template <typename Keys>
struct Registration : Keys {
    std::uintptr_t base = 0;         // page aligned
    std::size_t length = 0;          // whole pages
    std::uint32_t access = 0;        // btl::reg_flags (or the backend's own)
    void* backend_handle = nullptr;  // the library's registration object

    std::uint32_t refs = 0;
    bool findable = true;  // false once invalidated or removed

    bool covers(std::uintptr_t addr, std::size_t len) const noexcept {
        return addr >= base && addr + len <= base + length;
    }
    bool overlaps(std::uintptr_t addr, std::size_t len) const noexcept {
        return addr < base + length && base < addr + len;
    }

  private:
    friend class RegistrationCache<Keys>;
    Registration* lru_prev = nullptr;
    Registration* lru_next = nullptr;
    bool in_lru = false;
};

template <typename Keys>
class RegistrationBackend {
  public:
    virtual ~RegistrationBackend() = default;
    // Registers [r.base, r.base + r.length) with r.access; fills the keys and
    // backend_handle.  False on failure (the backend keeps why).
    virtual bool register_region(Registration<Keys>& r) noexcept = 0;
    virtual void deregister_region(Registration<Keys>& r) noexcept = 0;
};

template <typename Keys>
class RegistrationCache {
  public:
    using Entry = Registration<Keys>;
    using Backend = RegistrationBackend<Keys>;
    struct Config {
        std::size_t max_unused = 0;    // released registrations kept for reuse
        std::size_t page_size = 4096;  // a power of two; 1: exact ranges
        // Follow released memory to keep unused registrations; off: keep none.
        bool track_releases = true;
    };
    struct Stats {
        std::uint64_t hits = 0;
        std::uint64_t misses = 0;
        std::uint64_t evictions = 0;
        std::uint64_t invalidations = 0;
        std::uint64_t failures = 0;
    };

    RegistrationCache(Backend& backend, Config config) : backend_(backend), config_(config) {
        if (config_.page_size == 0 || (config_.page_size & (config_.page_size - 1)) != 0)
            config_.page_size = 4096;
        if (config_.max_unused == 0) return;
        if (!config_.track_releases) {
            off_reason_ = "release tracking is off";
        } else if (!MemoryReleaseMonitor::reliable()) {
            off_reason_ = MemoryReleaseMonitor::reason();
        } else {
            releases_ = ReleaseCursor::follow();
            return;
        }
        // A cached registration of memory that went away unseen would pin the
        // old pages under a reused address: keep none.
        config_.max_unused = 0;
    }
    // Deregisters everything still registered.
    ~RegistrationCache() {
        for (auto& [base, r] : entries_) backend_.deregister_region(*r);
        for (auto& r : orphans_) backend_.deregister_region(*r);
    }
    RegistrationCache(const RegistrationCache&) = delete;
    RegistrationCache& operator=(const RegistrationCache&) = delete;

    // A registration covering [addr, addr + len) with at least `access`, its
    // reference count raised; nullptr when registering fails (after evicting
    // unused entries and trying once more) or len is 0.
    Entry* acquire(const void* addr, std::size_t len, std::uint32_t access) {
        if (len == 0 || addr == nullptr) return nullptr;
        auto a = reinterpret_cast<std::uintptr_t>(addr);
        std::uintptr_t mask = config_.page_size - 1;
        if (a + len < a || a + len + mask < a + len) return nullptr;  // wraps the address space
        std::uintptr_t base = a & ~mask;
        std::size_t length = ((a + len + mask) & ~mask) - base;
        if (releases_.pending()) [[unlikely]]
            apply_releases();

        if (Entry* r = lookup(base, length, access)) {
            ++stats_.hits;
            if (r->in_lru) lru_remove(r);
            ++r->refs;
            return r;
        }
        ++stats_.misses;
        Entry* r = create(base, length, access);
        if (r == nullptr && lru_size_ > 0) {
            // Out of pinnable memory is the usual cause: give back what nobody uses.
            flush_unused();
            r = create(base, length, access);
        }
        if (r == nullptr) ++stats_.failures;
        return r;
    }

    // Drops one reference (from acquire or retain).
    void release(Entry* r) {
        if (r == nullptr || r->refs == 0) return;
        if (--r->refs > 0) return;
        if (!r->findable || config_.max_unused == 0) {
            destroy(r);
            return;
        }
        lru_push(r);
        trim_lru();
    }
    void retain(Entry* r) noexcept {
        if (r->in_lru) lru_remove(r);
        ++r->refs;
    }

    // A findable registration covering [addr, addr + len), or nullptr; never
    // registers and takes no reference.  nullptr too while released memory
    // waits to be invalidated: the caller's acquire() then applies it.
    Entry* find(const void* addr, std::size_t len) noexcept {
        if (releases_.pending()) [[unlikely]]
            return nullptr;
        const auto a = reinterpret_cast<std::uintptr_t>(addr);
        for (auto& [b, r] : entries_)
            if (r->covers(a, len)) return r.get();
        return nullptr;
    }

    // The memory [addr, addr + len) is gone or must not be reached any more.
    // Returns how many registrations it made unfindable.
    std::size_t invalidate(const void* addr, std::size_t len) {
        if (len == 0) return 0;
        auto a = reinterpret_cast<std::uintptr_t>(addr);
        std::uintptr_t mask = config_.page_size - 1;
        std::uintptr_t base = a & ~mask;
        std::size_t length = ((a + len + mask) & ~mask) - base;
        std::vector<Entry*> hit;
        for (auto& [b, r] : entries_)
            if (r->overlaps(base, length)) hit.push_back(r.get());
        for (Entry* r : hit) {
            ++stats_.invalidations;
            if (r->refs == 0)
                destroy(r);
            else
                unfind(r);
        }
        return hit.size();
    }

    // The findable registration somebody holds that `match` accepts (the
    // target's check of a key a peer sent), or nullptr: a released one, even
    // if still cached, is never reachable this way.
    template <typename Match>
    const Entry* find_held(Match match) const noexcept {
        for (const auto& [b, r] : entries_)
            if (r->refs > 0 && match(static_cast<const Entry&>(*r))) return r.get();
        return nullptr;
    }

    // Every registration becomes unfindable, as if its range were invalidated.
    void invalidate_all() {
        while (!entries_.empty()) {
            Entry* r = entries_.begin()->second.get();
            ++stats_.invalidations;
            if (r->refs == 0)
                destroy(r);
            else
                unfind(r);
        }
    }

    // Applies the releases the monitor recorded since the last lookup.
    void apply_releases() {
        if (!releases_.hooks_intact()) {
            // Releases from now on go unseen: drop everything, keep nothing.
            releases_.stop();
            invalidate_all();
            config_.max_unused = 0;
            off_reason_ = "another library patched libc's memory functions after Transit";
            return;
        }
        releases_.drain(
            [this](std::uintptr_t base, std::size_t len) {
                invalidate(reinterpret_cast<const void*>(base), len);
            },
            [this] { invalidate_all(); });
    }

    // Why unused registrations are not kept although max_unused asked for
    // some (nullptr when they are, or none were asked for): for the log.
    const char* unused_off_reason() const noexcept { return off_reason_; }
    std::size_t max_unused() const noexcept { return config_.max_unused; }

    // Deregisters every unused registration.
    void flush_unused() {
        while (lru_head_ != nullptr) {
            ++stats_.evictions;
            destroy(lru_head_);
        }
    }

    std::size_t size() const noexcept { return entries_.size(); }  // findable ones
    std::size_t unused() const noexcept { return lru_size_; }
    const Stats& stats() const noexcept { return stats_; }

  private:
    using Map = std::multimap<std::uintptr_t, std::unique_ptr<Entry>>;

    Entry* lookup(std::uintptr_t base, std::size_t len, std::uint32_t access) {
        // Entries are sorted by base; any cover starts at or below `base`.  The
        // scan is linear in the entries below it, which the LRU bound keeps small.
        auto end = entries_.upper_bound(base);
        Entry* best = nullptr;
        for (auto it = entries_.begin(); it != end; ++it) {
            Entry* r = it->second.get();
            if (!r->covers(base, len) || (r->access & access) != access) continue;
            // Prefer one already in use: keeps cached ones free for eviction.
            if (best == nullptr || (best->refs == 0 && r->refs > 0)) best = r;
        }
        return best;
    }

    Entry* create(std::uintptr_t base, std::size_t len, std::uint32_t access) {
        auto r = std::make_unique<Entry>();
        r->base = base;
        r->length = len;
        r->access = access;
        if (!backend_.register_region(*r)) return nullptr;
        r->refs = 1;
        Entry* raw = r.get();
        entries_.emplace(base, std::move(r));
        return raw;
    }

    // Moves a used registration out of the lookup map; its holders keep it alive.
    void unfind(Entry* r) {
        r->findable = false;
        auto range = entries_.equal_range(r->base);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second.get() == r) {
                orphans_.push_back(std::move(it->second));
                entries_.erase(it);
                return;
            }
        }
    }

    void destroy(Entry* r) {
        if (r->in_lru) lru_remove(r);
        backend_.deregister_region(*r);
        auto range = entries_.equal_range(r->base);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second.get() == r) {
                entries_.erase(it);
                return;
            }
        }
        auto it = std::find_if(orphans_.begin(), orphans_.end(),
                               [r](const auto& p) { return p.get() == r; });
        if (it != orphans_.end()) orphans_.erase(it);
    }

    void lru_push(Entry* r) noexcept {
        r->in_lru = true;
        r->lru_prev = lru_tail_;
        r->lru_next = nullptr;
        if (lru_tail_)
            lru_tail_->lru_next = r;
        else
            lru_head_ = r;
        lru_tail_ = r;
        ++lru_size_;
    }

    void lru_remove(Entry* r) noexcept {
        if (r->lru_prev)
            r->lru_prev->lru_next = r->lru_next;
        else
            lru_head_ = r->lru_next;
        if (r->lru_next)
            r->lru_next->lru_prev = r->lru_prev;
        else
            lru_tail_ = r->lru_prev;
        r->lru_prev = r->lru_next = nullptr;
        r->in_lru = false;
        --lru_size_;
    }

    void trim_lru() {
        while (lru_size_ > config_.max_unused) {
            ++stats_.evictions;
            destroy(lru_head_);
        }
    }

    Backend& backend_;
    Config config_;
    Map entries_;                                  // findable registrations by base
    std::vector<std::unique_ptr<Entry>> orphans_;  // unfindable but still in use
    Entry* lru_head_ = nullptr;                    // least recently released
    Entry* lru_tail_ = nullptr;
    std::size_t lru_size_ = 0;
    Stats stats_;
    ReleaseCursor releases_;  // follows nothing unless unused ones are kept
    const char* off_reason_ = nullptr;
};

}  // namespace transit::btl::util
