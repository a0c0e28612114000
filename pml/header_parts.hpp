// Where the variable parts of a pml message lie: the registration handle, the
// user header and the data that follow a fixed header.  A peer's lengths are
// checked here against the bytes that arrived, before any handler reads them.
#pragma once
#include <cstddef>
#include <cstring>
#include <optional>
#include <span>

#include "pml/headers.hpp"

namespace transit::pml::wire {

struct Parts {
    std::span<const std::byte> handle;
    std::span<const std::byte> user_header;
    std::span<const std::byte> data;
};

// The fixed header Hdr, then `handle_len` and `header_len` bytes, then data;
// nullopt when the message is shorter than its header says.
template <class Hdr>
std::optional<Parts> parts_after(std::span<const std::byte> msg, std::size_t handle_len,
                                 std::size_t header_len) noexcept {
    if (msg.size() < sizeof(Hdr)) return std::nullopt;
    const std::size_t room = msg.size() - sizeof(Hdr);
    if (handle_len > room || header_len > room - handle_len) return std::nullopt;
    auto rest = msg.subspan(sizeof(Hdr));
    return Parts{rest.first(handle_len), rest.subspan(handle_len, header_len),
                 rest.subspan(handle_len + header_len)};
}

template <class Hdr>
Hdr header_of(std::span<const std::byte> msg) noexcept {
    Hdr h;
    std::memcpy(&h, msg.data(), sizeof h);
    return h;
}

// rndv: handle, then (for an active message) the user header.
inline std::optional<Parts> rndv_parts(std::span<const std::byte> msg) noexcept {
    if (msg.size() < sizeof(RndvHdr)) return std::nullopt;
    const auto h = header_of<RndvHdr>(msg);
    return parts_after<RndvHdr>(msg, h.handle_len, h.kind == kind_am ? h.am_header_len : 0);
}

// am: user header, then data.
inline std::optional<Parts> am_parts(std::span<const std::byte> msg) noexcept {
    if (msg.size() < sizeof(AmHdr)) return std::nullopt;
    return parts_after<AmHdr>(msg, 0, header_of<AmHdr>(msg).header_len);
}

// split: the receive buffer's handle.
inline std::optional<Parts> split_parts(std::span<const std::byte> msg) noexcept {
    if (msg.size() < sizeof(SplitHdr)) return std::nullopt;
    return parts_after<SplitHdr>(msg, header_of<SplitHdr>(msg).handle_len, 0);
}

// A ping asking for gets (probe_fetch): its FetchProbeHdr after the
// KeepAliveHdr and the handle; nullopt unless the handle has the module's
// size (`handle_size`) and fits, and 0 < length <= max_length.
struct FetchParts {
    FetchProbeHdr probe;
    std::span<const std::byte> handle;
};
inline std::optional<FetchParts> fetch_parts(std::span<const std::byte> msg,
                                             std::size_t handle_size,
                                             std::size_t max_length) noexcept {
    if (msg.size() < sizeof(KeepAliveHdr) + sizeof(FetchProbeHdr)) return std::nullopt;
    const auto body = msg.subspan(sizeof(KeepAliveHdr));
    const auto probe = header_of<FetchProbeHdr>(body);
    if (probe.handle_size != handle_size || probe.length == 0 || probe.length > max_length)
        return std::nullopt;
    const auto p = parts_after<FetchProbeHdr>(body, handle_size, 0);
    if (!p) return std::nullopt;
    return FetchParts{probe, p->handle};
}

}  // namespace transit::pml::wire
