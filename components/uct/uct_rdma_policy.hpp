// The device-independent parts of the uct module's native RDMA path, kept
// apart so they can be tested without UCX: the choice between UCT's own
// put/get and the active-message path (btl_uct_rdma, btl_uct_rdma_min_size),
// and the per-endpoint cache of unpacked remote keys.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "transit/params.hpp"

namespace transit::uct {

// btl_uct_rdma.
enum class RdmaMode : std::uint8_t {
    automatic,  // "auto": UCT's put/get where available, above the size threshold
    am,         // "am": every one-sided operation by active messages
    transport,  // "transport": UCT's put/get for every size where available
};

inline constexpr std::string_view rdma_mode_choices = "auto,am,transport";

// btl_uct_rdma and btl_uct_rdma_min_size (the registry refuses any other
// value of btl_uct_rdma, naming the parameter, its source and the choices).
inline constexpr params::Decl rdma_params[] = {
    {"rdma", params::Type::enumeration, "auto",
     "How put and get move data: auto (UCT's own zero-copy put/get where a memory domain can "
     "register memory -- cma beside posix or sysv, the transport itself on rc/dc -- for "
     "transfers of btl_uct_rdma_min_size and more, active messages otherwise), am (always "
     "active messages performed by the target), transport (UCT's put/get for every size where "
     "available). Atomics on memory from mem_alloc use UCT's atomics where the transport "
     "offers them (posix, sysv); other atomics, and every one with am, go by active messages",
     4, rdma_mode_choices},
    params::Decl{"rdma_min_size", params::Type::size, "0",
                 "Smallest put/get sent with UCT's own put/get; smaller ones go by active "
                 "messages. 0: automatic (2k over cma with btl_uct_rdma=auto, where smaller "
                 "transfers are faster by active messages; every size with "
                 "btl_uct_rdma=transport or on a transport's own RDMA)",
                 5}
        .range(0, std::int64_t{1} << 40),
};

constexpr std::optional<RdmaMode> parse_rdma_mode(std::string_view text) noexcept {
    if (text == "auto") return RdmaMode::automatic;
    if (text == "am") return RdmaMode::am;
    if (text == "transport") return RdmaMode::transport;
    return std::nullopt;
}

// The parameter is bound to an RdmaMode by the position of its value among
// the choices: keep both in the same order.
static_assert(parse_rdma_mode("auto") == RdmaMode{0} && parse_rdma_mode("am") == RdmaMode{1} &&
              parse_rdma_mode("transport") == RdmaMode{2} &&
              rdma_mode_choices == "auto,am,transport");

// Measured on a quiet 2-core VM (see README.md): a cma get or put costs one
// system call, about 2 us; an active-message put/get through posix is cheaper
// only up to about 1 KiB and then falls behind (5x at 64 KiB).
inline constexpr std::size_t cma_auto_min_size = 2 * 1024;

// The smallest put/get sent with UCT's own put/get.  `configured` is
// btl_uct_rdma_min_size (0: automatic); `helper` says the RDMA interface is a
// second transport beside the active-message one (cma beside posix/sysv),
// whose per-operation cost is a system call, or a put-only path whose put is
// a stream the target's progress writes (tcp), rather than the transport's own
// RDMA (rc, dc, ud on a cluster), which pays from the first byte.
constexpr std::size_t rdma_threshold(RdmaMode mode, std::size_t configured, bool helper) noexcept {
    if (configured > 0) return configured;
    if (mode == RdmaMode::transport || !helper) return 0;
    return cma_auto_min_size;
}

// Remote keys unpacked for one endpoint, by the peer's registration key (keys
// are never reused within a process).  A fixed number of entries; the least
// recently used is released when a new key needs room.  `release` is called
// with each value dropped (eviction, clear), so the cache owns what it holds.
template <typename Value, std::size_t N>
class RkeyCache {
  public:
    static_assert(N > 0);

    // The value cached for `key`, or nullptr.
    Value* find(std::uint64_t key) noexcept {
        for (Entry& e : entries_) {
            if (e.used && e.key == key) {
                e.stamp = ++clock_;
                return &e.value;
            }
        }
        return nullptr;
    }

    // Caches `value` for `key` (not cached yet), evicting the least recently
    // used entry when full; returns where it is stored.
    template <typename Release>
    Value* insert(std::uint64_t key, const Value& value, Release&& release) noexcept {
        Entry* slot = nullptr;
        for (Entry& e : entries_) {
            if (!e.used) {
                slot = &e;
                break;
            }
            if (slot == nullptr || e.stamp < slot->stamp) slot = &e;
        }
        if (slot->used) {
            release(slot->value);
            ++evictions_;
        }
        slot->used = true;
        slot->key = key;
        slot->value = value;
        slot->stamp = ++clock_;
        return &slot->value;
    }

    template <typename Release>
    void clear(Release&& release) noexcept {
        for (Entry& e : entries_) {
            if (!e.used) continue;
            release(e.value);
            e.used = false;
        }
    }

    std::size_t size() const noexcept {
        std::size_t n = 0;
        for (const Entry& e : entries_) n += e.used ? 1 : 0;
        return n;
    }
    static constexpr std::size_t capacity() noexcept { return N; }
    std::size_t evictions() const noexcept { return evictions_; }

  private:
    struct Entry {
        std::uint64_t key = 0;
        std::uint64_t stamp = 0;
        bool used = false;
        Value value{};
    };
    std::array<Entry, N> entries_{};
    std::uint64_t clock_ = 0;
    std::size_t evictions_ = 0;
};

}  // namespace transit::uct
