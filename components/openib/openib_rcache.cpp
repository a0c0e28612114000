#include "openib_rcache.hpp"

#include <algorithm>
#include <utility>

namespace transit::openib {

RegistrationCache::RegistrationCache(RegistrationBackend& backend, Config config)
    : backend_(backend), config_(config) {
    if (config_.page_size == 0 || (config_.page_size & (config_.page_size - 1)) != 0)
        config_.page_size = 4096;
}

RegistrationCache::~RegistrationCache() {
    for (auto& [base, r] : entries_) backend_.deregister_region(*r);
    for (auto& r : orphans_) backend_.deregister_region(*r);
}

Registration* RegistrationCache::acquire(const void* addr, std::size_t len, std::uint32_t access) {
    if (len == 0 || addr == nullptr) return nullptr;
    auto a = reinterpret_cast<std::uintptr_t>(addr);
    std::uintptr_t mask = config_.page_size - 1;
    if (a + len < a || a + len + mask < a + len) return nullptr;  // wraps the address space
    std::uintptr_t base = a & ~mask;
    std::size_t length = ((a + len + mask) & ~mask) - base;

    if (Registration* r = lookup(base, length, access)) {
        ++stats_.hits;
        if (r->in_lru) lru_remove(r);
        ++r->refs;
        return r;
    }
    ++stats_.misses;
    Registration* r = create(base, length, access);
    if (r == nullptr && lru_size_ > 0) {
        // Out of pinnable memory is the usual cause: give back what nobody uses.
        flush_unused();
        r = create(base, length, access);
    }
    if (r == nullptr) ++stats_.failures;
    return r;
}

Registration* RegistrationCache::lookup(std::uintptr_t base, std::size_t len,
                                        std::uint32_t access) {
    // Entries are sorted by base; any cover starts at or below `base`.  The scan
    // is linear in the entries below it, which the LRU bound keeps small.
    auto end = entries_.upper_bound(base);
    Registration* best = nullptr;
    for (auto it = entries_.begin(); it != end; ++it) {
        Registration* r = it->second.get();
        if (!r->covers(base, len) || (r->access & access) != access) continue;
        // Prefer one already in use: keeps cached ones free for eviction.
        if (best == nullptr || (best->refs == 0 && r->refs > 0)) best = r;
    }
    return best;
}

Registration* RegistrationCache::create(std::uintptr_t base, std::size_t len,
                                        std::uint32_t access) {
    auto r = std::make_unique<Registration>();
    r->base = base;
    r->length = len;
    r->access = access;
    if (!backend_.register_region(*r)) return nullptr;
    r->refs = 1;
    Registration* raw = r.get();
    entries_.emplace(base, std::move(r));
    return raw;
}

void RegistrationCache::release(Registration* r) {
    if (r == nullptr || r->refs == 0) return;
    if (--r->refs > 0) return;
    if (!r->findable || config_.max_unused == 0) {
        destroy(r);
        return;
    }
    lru_push(r);
    trim_lru();
}

std::size_t RegistrationCache::invalidate(const void* addr, std::size_t len) {
    if (len == 0) return 0;
    auto a = reinterpret_cast<std::uintptr_t>(addr);
    std::uintptr_t mask = config_.page_size - 1;
    std::uintptr_t base = a & ~mask;
    std::size_t length = ((a + len + mask) & ~mask) - base;
    std::vector<Registration*> hit;
    for (auto& [b, r] : entries_)
        if (r->overlaps(base, length)) hit.push_back(r.get());
    for (Registration* r : hit) {
        ++stats_.invalidations;
        if (r->refs == 0)
            destroy(r);
        else
            unfind(r);
    }
    return hit.size();
}

const Registration* RegistrationCache::find_rkey(std::uint32_t rkey) const noexcept {
    // Only registrations someone holds: a released one, even if still cached,
    // must not be reachable through an emulated atomic.
    for (const auto& [b, r] : entries_)
        if (r->rkey == rkey && r->refs > 0) return r.get();
    return nullptr;
}

void RegistrationCache::flush_unused() {
    while (lru_head_ != nullptr) {
        ++stats_.evictions;
        destroy(lru_head_);
    }
}

// Moves a used registration out of the lookup map; its holders keep it alive.
void RegistrationCache::unfind(Registration* r) {
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

void RegistrationCache::destroy(Registration* r) {
    if (r->in_lru) lru_remove(r);
    backend_.deregister_region(*r);
    auto range = entries_.equal_range(r->base);
    for (auto it = range.first; it != range.second; ++it) {
        if (it->second.get() == r) {
            entries_.erase(it);
            return;
        }
    }
    auto it =
        std::find_if(orphans_.begin(), orphans_.end(), [r](const auto& p) { return p.get() == r; });
    if (it != orphans_.end()) orphans_.erase(it);
}

void RegistrationCache::lru_push(Registration* r) noexcept {
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

void RegistrationCache::lru_remove(Registration* r) noexcept {
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

void RegistrationCache::trim_lru() {
    while (lru_size_ > config_.max_unused) {
        ++stats_.evictions;
        destroy(lru_head_);
    }
}

}  // namespace transit::openib
