// vader between a server and its clients outside the job (rt::DynamicPeers):
// the part of a listening address vader publishes, the FIFO references that
// name a peer outside the job, and the join fragment a client sends first.
//
// A FIFO reference from a job peer names the sender by its local index.  One
// from a peer outside the job has the dynamic bit and names its sender by a
// channel the receiver knows: a server knows a client by the client's pid
// (one vader connection per client process and server), a client knows a
// server by the number it chose and sent in its join fragment.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "components/vader/vader_layout.hpp"
#include "transit/runtime.hpp"

namespace transit::vader {

inline constexpr char listen_key[] = "btl.vader.2";

inline constexpr std::uint64_t dynamic_bit = 1ull << 62;

// A join without a spare fast box for the other side: it uses the FIFO.
inline constexpr std::uint32_t no_fast_box = ~0u;

enum class DynamicKind : std::uint8_t {
    data = 0,     // low 32 bits: a fragment of the sender's segment
    join = 1,     // channel: the client's pid; low 32 bits: its segment's descriptor
    goodbye = 2,  // the sender disconnected; nothing follows
    // The sender dropped us after we dropped it, and no longer writes into
    // the fast box of ours it had; low 32 bits: that box's index.
    release = 3,
};

constexpr std::uint64_t make_dynamic_ref(DynamicKind kind, std::uint32_t channel,
                                         std::uint32_t low) noexcept {
    return dynamic_bit | (std::uint64_t{static_cast<std::uint8_t>(kind)} << 60) |
           (std::uint64_t{channel & 0x0fffffffu} << 32) | low;
}
constexpr DynamicKind dynamic_kind(std::uint64_t ref) noexcept {
    return static_cast<DynamicKind>((ref >> 60) & 3);
}
constexpr std::uint32_t dynamic_channel(std::uint64_t ref) noexcept {
    return static_cast<std::uint32_t>(ref >> 32) & 0x0fffffffu;
}
// The same reference with another kind (a goodbye on a data channel).
constexpr std::uint64_t with_kind(std::uint64_t ref, DynamicKind kind) noexcept {
    return (ref & ~(3ull << 60)) | (std::uint64_t{static_cast<std::uint8_t>(kind)} << 60);
}

// What a listening process publishes (listen_key): how a client on the same
// node opens its segment (/proc/<pid>/fd/<fd>), and what proves it opened
// the right one.  A client in another pid namespace, or of another user,
// does not try.
struct ListenBlob {
    std::uint32_t version = 1;
    std::uint32_t pid = 0;
    std::int32_t fd = -1;
    std::uint32_t uid = 0;
    std::uint64_t nonce = 0;   // the segment header's
    std::uint64_t pid_ns = 0;  // inode of /proc/self/ns/pid (0: unknown)
};

inline std::vector<std::byte> encode(const ListenBlob& b) {
    std::vector<std::byte> out(sizeof b);
    std::memcpy(out.data(), &b, sizeof b);
    return out;
}

// What a client reads of the address of a server: nullopt unless it is a
// listen blob of this version naming a process and a descriptor.
inline std::optional<ListenBlob> decode_listen_blob(std::span<const std::byte> blob) noexcept {
    ListenBlob b;
    if (blob.size() != sizeof b) return std::nullopt;
    std::memcpy(&b, blob.data(), sizeof b);
    if (b.version != ListenBlob{}.version || b.fd < 0 || b.pid == 0) return std::nullopt;
    return b;
}

// The payload of a client's join fragment (FragKind::join).  The server
// answers in the fragment's header: atomic_status 0 when admitted, else the
// Status it refused with; `operand` the index of the fast box in the server's
// segment the client is to write into (no_fast_box: none).
struct JoinPayload {
    rt::Secret token{};         // the listening context's
    std::uint32_t channel = 0;  // the channel the server's references carry
    std::uint32_t rank = 0;     // the client's rank in its own job (for logs)
    // The fast box in the client's segment the server is to write into.
    std::uint32_t fast_box = no_fast_box;
};

// A client's join fragment, as the server finds it: `index` (from the
// client's FIFO reference) in the client's segment `seg`, which passed
// segment_usable.  No header: the index is outside the segment, there is
// nothing to answer.  A header without a payload: the fragment is no join, or
// its fragments are too small to hold one; the server answers in the header.
struct JoinFragment {
    FragHeader* header = nullptr;
    std::optional<JoinPayload> payload;
};

inline JoinFragment read_join(std::span<std::byte> seg, std::uint32_t index) noexcept {
    JoinFragment out;
    const auto& ph = *reinterpret_cast<const SegmentHeader*>(seg.data());
    if (index >= ph.frag_count) return out;
    out.header = reinterpret_cast<FragHeader*>(seg.data() + ph.frag_offset +
                                               std::size_t{index} * ph.frag_stride);
    // The fragment size is the client's word too: a payload must lie inside
    // its fragment, not in the next one or past the mapping.
    if (out.header->kind != FragKind::join || out.header->size < sizeof(JoinPayload) ||
        ph.frag_stride < frag_header_size + sizeof(JoinPayload))
        return out;
    JoinPayload p;
    std::memcpy(&p, reinterpret_cast<const std::byte*>(out.header) + frag_header_size, sizeof p);
    out.payload = p;
    return out;
}

}  // namespace transit::vader
