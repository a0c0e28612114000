// libFuzzer target for the pml's message decoding: the first byte picks the
// message kind (as the btl tag does), the rest is the message.  Every kind is
// held to its fixed header; rndv, am and split messages are split into the
// handle, user header and data their handlers read.  See pml_wire.cmake.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "pml/header_parts.hpp"

namespace wire = transit::pml::wire;

namespace {

// Accepted parts follow the header back to back, inside the message.
void check(std::span<const std::byte> msg, std::size_t header, const wire::Parts& p,
           std::size_t handle_len, std::size_t header_len) {
    const std::byte* at = msg.data() + header;
    if (p.handle.data() != at || p.handle.size() != handle_len) __builtin_trap();
    at += handle_len;
    if (p.user_header.data() != at || p.user_header.size() != header_len) __builtin_trap();
    at += header_len;
    if (p.data.data() != at || at + p.data.size() != msg.data() + msg.size()) __builtin_trap();
}

void decode(wire::Kind k, std::span<const std::byte> msg) {
    const std::size_t fixed = wire::header_size(k);
    if (fixed == 0 || wire::name(k) == nullptr) __builtin_trap();
    if (msg.size() < fixed) return;  // dropped before any handler
    if (k == wire::rndv) {
        const auto h = wire::header_of<wire::RndvHdr>(msg);
        const std::size_t uh = h.kind == wire::kind_am ? h.am_header_len : 0;
        const auto p = wire::rndv_parts(msg);
        const bool fits = msg.size() - fixed >= std::size_t{h.handle_len} + uh;
        if (p.has_value() != fits) __builtin_trap();
        if (p) check(msg, fixed, *p, h.handle_len, uh);
    } else if (k == wire::am) {
        const auto h = wire::header_of<wire::AmHdr>(msg);
        const auto p = wire::am_parts(msg);
        if (p.has_value() != (msg.size() - fixed >= h.header_len)) __builtin_trap();
        if (p) check(msg, fixed, *p, 0, h.header_len);
    } else if (k == wire::ping) {
        // A path measurement's bulk probe (fetch_probes.hpp): the handle
        // size the module expects is the message's own second byte, so both
        // sizes that match and sizes that do not are tried.
        const std::size_t want = msg.size() > 1 ? std::to_integer<std::size_t>(msg[1]) : 0;
        const std::size_t max_length = 1 << 20;
        const auto f = wire::fetch_parts(msg, want, max_length);
        const std::size_t at = sizeof(wire::KeepAliveHdr) + sizeof(wire::FetchProbeHdr);
        if (f) {
            if (f->probe.handle_size != want || f->probe.length == 0 ||
                f->probe.length > max_length)
                __builtin_trap();
            if (f->handle.data() != msg.data() + at || f->handle.size() != want ||
                at + want > msg.size())
                __builtin_trap();
        } else if (msg.size() >= at) {
            const auto p =
                wire::header_of<wire::FetchProbeHdr>(msg.subspan(sizeof(wire::KeepAliveHdr)));
            if (p.handle_size == want && p.length > 0 && p.length <= max_length &&
                msg.size() - at >= want)
                __builtin_trap();  // well formed, yet refused
        }
    } else if (k == wire::split) {
        const auto h = wire::header_of<wire::SplitHdr>(msg);
        const auto p = wire::split_parts(msg);
        if (p.has_value() != (msg.size() - fixed >= h.handle_len)) __builtin_trap();
        if (p) check(msg, fixed, *p, h.handle_len, 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const auto k = static_cast<wire::Kind>(data[0] % wire::kind_count);
    decode(k, {reinterpret_cast<const std::byte*>(data) + 1, size - 1});
    return 0;
}
