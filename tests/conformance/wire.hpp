// The suite's own little protocol between the driver (the side that runs a case)
// and the service (the side that owns the target memory and answers).  In
// loopback both are the same process, talking to itself over the module under
// test; with two processes rank 0 drives and rank 1 services.  The same
// messages flow either way, so a case is written once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transit/btl/am_table.hpp"

namespace transit::conformance {

inline constexpr btl::Tag tag_request = btl::AmTable::tag(btl::TagRange::user, 0);
inline constexpr btl::Tag tag_reply = btl::AmTable::tag(btl::TagRange::user, 1);
inline constexpr btl::Tag tag_chain = btl::AmTable::tag(btl::TagRange::user, 2);
// The concurrent case's pings and pongs (threads_echo.hpp), apart from the
// fixture's own traffic, which one thread owns.
inline constexpr btl::Tag tag_threads = btl::AmTable::tag(btl::TagRange::user, 3);

enum class Kind : std::uint32_t {
    echo = 1,    // request and reply: the fragment is sent back unchanged
    read,        // request: send region[base, base + length) back as read_data
    fill,        // request: fill region[base, base + length) with pattern(seq), then ack
    write,       // request: payload goes to region[base + offset]; ack once all arrived
    bye,         // request: the case is over; ack and stop servicing
    hello,       // reply: where the service's registered region is (RegionInfo)
    read_data,   // reply: one fragment of a read
    ack,         // reply: request `msg` is done
    chain,       // on tag_chain: bounce back to the sender with length - 1 hops
    reregister,  // request: deregister the region, register it again, answer a new hello
    ping,        // on tag_threads: thread `msg`'s message `seq`; answered by a pong
    pong,        // on tag_threads: the ping sent back unchanged but for its kind
};

// In front of every fragment.  Both sides run on one machine (or the same
// architecture), so it travels in host byte order.
struct WireHeader {
    Kind kind;
    std::uint32_t seq;     // position in the driver's stream (ordering); fill: pattern seed
    std::uint64_t msg;     // message id chosen by the driver
    std::uint64_t offset;  // of this fragment's payload within the message
    std::uint64_t length;  // whole message length (chain: hops left)
    std::uint64_t base;    // region offset for read / fill / write
};

inline constexpr std::size_t wire_header_size = sizeof(WireHeader);

// The payload of hello: the registered region and its packed handle.
struct RegionInfo {
    std::uint64_t address;
    std::uint64_t size;
    std::uint64_t handle_size;
    // followed by handle_size bytes of packed registration handle
};

// The bytes a received message holds, all segments together.
inline std::size_t total_length(const btl::ReceiveDescriptor& d) noexcept {
    std::size_t n = 0;
    for (std::size_t i = 0; i < d.segment_count; ++i) n += d.segments[i].len;
    return n;
}

// Copies len bytes, starting at byte `from` of the segments laid end to end: a
// transport may cut the header and the payload anywhere.
inline void gather(const btl::ReceiveDescriptor& d, std::size_t from, void* dst,
                   std::size_t len) noexcept {
    auto* out = static_cast<std::byte*>(dst);
    for (std::size_t i = 0; i < d.segment_count && len > 0; ++i) {
        const std::size_t seg = d.segments[i].len;
        if (from >= seg) {
            from -= seg;
            continue;
        }
        const std::size_t n = std::min(seg - from, len);
        std::memcpy(out, static_cast<const std::byte*>(d.segments[i].addr) + from, n);
        out += n;
        len -= n;
        from = 0;
    }
}

// Deterministic, position-dependent content, so a misplaced or duplicated
// fragment shows up as a mismatch at an exact offset.
constexpr std::byte pattern(std::uint64_t seed, std::uint64_t i) noexcept {
    const std::uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (seed * 0xbf58476d1ce4e5b9ull);
    return static_cast<std::byte>((x >> 29) ^ (x >> 7) ^ i);
}

}  // namespace transit::conformance
