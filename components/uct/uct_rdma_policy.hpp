// The device-independent parts of the uct module's native RDMA path, kept
// apart so they can be tested without UCX: which transports may carry UCT's
// own put/get/atomics (only those whose device checks the remote key), the
// choice between them and the active-message path (btl_uct_rdma,
// btl_uct_rdma_min_size), and the per-endpoint cache of unpacked remote keys.
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
    automatic,  // "auto": UCT's put/get where the device checks keys, above the threshold
    am,         // "am": every one-sided operation by active messages
    transport,  // "transport": as auto, and a path that cannot check says why at level 1
};

inline constexpr std::string_view rdma_mode_choices = "auto,am,transport";

// btl_uct_rdma and btl_uct_rdma_min_size (the registry refuses any other
// value of btl_uct_rdma, naming the parameter, its source and the choices).
inline constexpr params::Decl rdma_params[] = {
    {"rdma", params::Type::enumeration, "auto",
     "How put, get and atomics move data: auto (UCT's own zero-copy put/get and atomics where "
     "the target's device checks the remote key on every access -- rc and dc on InfiniBand -- "
     "active messages performed by the target otherwise), am (always active messages), "
     "transport (as auto, for every size; where the device cannot check keys -- shared memory, "
     "cma, tcp -- native is declined with the reason at btl_base_verbose 1 and active messages "
     "carry everything)",
     4, rdma_mode_choices},
    params::Decl{"rdma_min_size", params::Type::size, "0",
                 "Smallest put/get sent with UCT's own put/get where it is used; smaller ones go "
                 "by active messages. 0: every size",
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

// Why UCT's native put/get/atomics must not be used on a transport, or
// nullopt where they may.  Every byte from a peer is untrusted: a native
// operation is allowed only where the *target's device* checks the remote key
// on every access, so that a deregistered region or a forged key is refused
// without the target's software.  UCT says which memory domains register
// memory but not who checks the key, so the transports are named: rc and dc
// (InfiniBand/RoCE verbs, rc_verbs, rc_mlx5, dc_mlx5), whose HCA checks rkeys.
// Everything else goes by active messages, where the target checks the handle:
// shared memory (posix, sysv: a peer that attached a segment writes any
// address in it, and a deregistration cannot take it back), cma/knem/xpmem (the
// initiator copies with its own rights over the target's memory), tcp (the
// target's UCX writes where the initiator says; its memory domain registers
// nothing and packs an empty key).
constexpr std::optional<std::string_view> native_refusal(std::string_view tl_name,
                                                         bool md_registers,
                                                         std::size_t rkey_packed_size) noexcept {
    if (tl_name == "posix" || tl_name == "sysv" || tl_name == "self")
        return "the peer writes shared memory directly, so the target cannot refuse a stale or "
               "forged key";
    if (tl_name == "cma" || tl_name == "knem" || tl_name == "xpmem")
        return "the initiator copies with its own rights over the target's memory, so the "
               "target cannot refuse a stale or forged key";
    if (tl_name == "tcp")
        return "UCT's tcp writes wherever the initiator says, so the target cannot refuse a "
               "stale or forged key";
    if (!md_registers || rkey_packed_size == 0)
        return "its memory domain registers nothing or packs no remote key, so nothing checks "
               "the key";
    if (!tl_name.starts_with("rc") && !tl_name.starts_with("dc"))
        return "it is not known to check remote keys in the device (only rc and dc are)";
    return std::nullopt;
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
