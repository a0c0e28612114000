// Memory registrations that bound what a peer may do, for components whose
// origin touches the target's memory itself (shared memory, loopback): a table
// of live regions the owner keeps (vader: in its shared segment), read by the
// origin of every put, get and atomic before it touches the target's memory.
//
// A registration handle names a slot and the slot's generation when it was
// registered.  The owner bumps the generation to an odd value once the slot's
// bounds are written and to the next even value when it deregisters, so a
// handle stays valid exactly as long as its registration: like an RDMA NIC's
// memory key, a stale or forged handle grants nothing.  The origin reads the
// slot as a sequence lock (generation, bounds, generation again).
//
// An operation the origin has checked may still land just after the owner
// deregistered (the same race as with a NIC's in-flight operation).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "transit/btl/types.hpp"
#include "transit/status.hpp"

namespace transit::btl {

struct RegionSlot {
    std::atomic<std::uint64_t> generation;  // odd: registered
    std::atomic<std::uint64_t> base;
    std::atomic<std::uint64_t> size;
    std::atomic<std::uint32_t> access;  // reg_flags
    std::uint32_t reserved;
};
static_assert(sizeof(RegionSlot) == 32);

// The packed form of a vader registration handle.
struct RegionKey {
    std::uint32_t slot;
    std::uint32_t reserved;
    std::uint64_t generation;
};
inline constexpr std::uint32_t no_slot = 0xffffffffu;

// Whether [address, address + size) lies inside a registration of
// [base, base + len) granting `granted`, for `access`: success,
// access_denied (not that access) or bad_param (outside its bounds).  No sum
// is formed, so bounds near 2^64 cannot wrap into a pass.
constexpr Status range_permits(std::uint64_t base, std::uint64_t len, std::uint32_t granted,
                               std::uint64_t address, std::uint64_t size,
                               std::uint32_t access) noexcept {
    if ((granted & access) != access) [[unlikely]]
        return Status::access_denied;
    if (address < base || size > len || address - base > len - size) [[unlikely]]
        return Status::bad_param;
    return Status::success;
}

// Whether the registration `handle` names in `table` (the owner's, through our
// mapping) is live and covers [address, address + size) with `access`:
// success, access_denied (no such live registration or not that access) or
// bad_param (outside its bounds).
inline Status region_permits(std::span<const RegionSlot> table, const RegistrationHandle* handle,
                             std::uint64_t address, std::uint64_t size,
                             std::uint32_t access) noexcept {
    if (handle == nullptr) [[unlikely]]
        return Status::access_denied;
    RegionKey key;
    std::memcpy(&key, static_cast<const void*>(handle), sizeof key);
    if (key.slot >= table.size() || (key.generation & 1) == 0) [[unlikely]]
        return Status::access_denied;
    const RegionSlot& s = table[key.slot];
    if (s.generation.load(std::memory_order_acquire) != key.generation) [[unlikely]]
        return Status::access_denied;
    const std::uint64_t base = s.base.load(std::memory_order_relaxed);
    const std::uint64_t len = s.size.load(std::memory_order_relaxed);
    const std::uint32_t granted = s.access.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.generation.load(std::memory_order_relaxed) != key.generation) [[unlikely]]
        return Status::access_denied;
    return range_permits(base, len, granted, address, size, access);
}

// The owner's side: hands out slots of its table and the handles naming them.
class RegionTable {
  public:
    RegionTable() = default;
    RegionTable(RegionSlot* slots, std::uint32_t count)
        : slots_(slots, count), keys_(count), free_(count) {
        for (std::uint32_t i = 0; i < count; ++i) {
            keys_[i] = RegionKey{i, 0, 0};
            free_[i] = count - 1 - i;  // lowest slot first
        }
    }

    // A handle for [base, base + size) with `access`; nullptr when every slot
    // is taken.  A registration without remote access needs no slot.
    RegistrationHandle* add(const void* base, std::uint64_t size, std::uint32_t access) noexcept {
        constexpr std::uint32_t remote =
            reg_flags::remote_read | reg_flags::remote_write | reg_flags::remote_atomic;
        if ((access & remote) == 0) return as_handle(&local_only_);
        if (free_.empty()) return nullptr;
        const std::uint32_t i = free_.back();
        free_.pop_back();
        RegionSlot& s = slots_[i];
        s.base.store(reinterpret_cast<std::uint64_t>(base), std::memory_order_relaxed);
        s.size.store(size, std::memory_order_relaxed);
        s.access.store(access, std::memory_order_relaxed);
        const std::uint64_t live = s.generation.load(std::memory_order_relaxed) + 1;
        s.generation.store(live, std::memory_order_release);
        keys_[i].generation = live;
        return as_handle(&keys_[i]);
    }

    // Ends the registration: from now on a peer holding its handle is refused.
    Status remove(RegistrationHandle* handle) noexcept {
        auto* key = reinterpret_cast<RegionKey*>(handle);
        if (key == &local_only_) return Status::success;
        if (key < keys_.data() || key >= keys_.data() + keys_.size() || (key->generation & 1) == 0)
            return Status::not_found;
        RegionSlot& s = slots_[key->slot];
        s.generation.store(key->generation + 1, std::memory_order_release);
        key->generation = 0;
        free_.push_back(key->slot);
        return Status::success;
    }

  private:
    static RegistrationHandle* as_handle(RegionKey* key) noexcept {
        return reinterpret_cast<RegistrationHandle*>(key);
    }

    std::span<RegionSlot> slots_;
    std::vector<RegionKey> keys_;  // keys_[i] names slot i while it is registered
    std::vector<std::uint32_t> free_;
    RegionKey local_only_{no_slot, 0, 1};
};

}  // namespace transit::btl
