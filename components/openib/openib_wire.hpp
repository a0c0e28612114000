// Wire formats of the openib btl.  Everything a peer sends is decoded here and
// checked before any other code looks at it, so a corrupt or hostile packet
// becomes a protocol error instead of a wild read or write.
//
// Two channels exist:
//   - connection messages (CmMessage) travel on each module's UD queue pair,
//     whose number every process publishes in the modex;
//   - data fragments travel on the per-peer RC queue pairs, each starting with
//     a FragHeader.
// All integers are little endian on the wire, whatever the host.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace transit::openib::wire {

namespace detail {
template <typename T>
constexpr T to_le(T v) noexcept {
    if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
        return v;
    } else {
        T r = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i)
            r = static_cast<T>((r << 8) | ((v >> (8 * i)) & 0xff));
        return r;
    }
}
template <typename T>
void put(std::byte* p, std::size_t& off, T v) noexcept {
    v = to_le(v);
    std::memcpy(p + off, &v, sizeof v);
    off += sizeof v;
}
template <typename T>
T get(const std::byte* p, std::size_t& off) noexcept {
    T v;
    std::memcpy(&v, p + off, sizeof v);
    off += sizeof v;
    return to_le(v);
}
}  // namespace detail

// ---------------------------------------------------------------------------
// RC fragments
// ---------------------------------------------------------------------------

enum class FragType : std::uint8_t {
    data = 1,            // an active message for the tag in `tag`
    credit = 2,          // credits only, no payload
    atomic_request = 3,  // an atomic the target performs on our behalf
    atomic_reply = 4,    // the target's answer to an atomic_request
};

namespace frag_flags {
// This fragment also returns the control credit used by the peer's last
// credit-only message (see openib_credits.hpp).
inline constexpr std::uint8_t returns_control = 0x1;
inline constexpr std::uint8_t all = returns_control;
}  // namespace frag_flags

struct FragHeader {
    FragType type = FragType::data;
    std::uint8_t tag = 0;
    std::uint8_t flags = 0;
    std::uint16_t credits = 0;  // data credits returned to the receiver of this header

    static constexpr std::size_t size = 8;
};

inline void encode(const FragHeader& h, std::byte* out) noexcept {
    std::size_t off = 0;
    detail::put<std::uint8_t>(out, off, static_cast<std::uint8_t>(h.type));
    detail::put<std::uint8_t>(out, off, h.tag);
    detail::put<std::uint8_t>(out, off, h.flags);
    detail::put<std::uint8_t>(out, off, 0);
    detail::put<std::uint16_t>(out, off, h.credits);
    detail::put<std::uint16_t>(out, off, 0);
}

// nullopt for anything malformed: short buffer, unknown type or flag, nonzero
// reserved bytes, or a credit-only fragment that carries a payload.
inline std::optional<FragHeader> decode_frag(std::span<const std::byte> in) noexcept {
    if (in.size() < FragHeader::size) return std::nullopt;
    std::size_t off = 0;
    FragHeader h;
    auto type = detail::get<std::uint8_t>(in.data(), off);
    h.tag = detail::get<std::uint8_t>(in.data(), off);
    h.flags = detail::get<std::uint8_t>(in.data(), off);
    auto pad1 = detail::get<std::uint8_t>(in.data(), off);
    h.credits = detail::get<std::uint16_t>(in.data(), off);
    auto pad2 = detail::get<std::uint16_t>(in.data(), off);
    if (type < 1 || type > 4 || pad1 != 0 || pad2 != 0) return std::nullopt;
    if ((h.flags & ~frag_flags::all) != 0) return std::nullopt;
    h.type = static_cast<FragType>(type);
    if (h.type == FragType::credit && (in.size() != FragHeader::size || h.tag != 0))
        return std::nullopt;
    return h;
}

// Body of an atomic_request: the target checks that [remote_address,
// remote_address + width) lies inside a region it registered with remote atomic
// access under `rkey`, performs the operation, and answers.
enum class AtomicKind : std::uint8_t { op = 1, fetch_op = 2, cswap = 3 };

struct AtomicRequest {
    std::uint64_t request_id = 0;
    std::uint64_t remote_address = 0;
    std::uint64_t operand = 0;  // value for cswap
    std::uint64_t compare = 0;  // cswap only
    std::uint32_t rkey = 0;
    std::uint16_t op = 0;  // btl::AtomicOp
    AtomicKind kind = AtomicKind::op;
    std::uint8_t bits32 = 0;

    static constexpr std::size_t size = 40;
};

inline void encode(const AtomicRequest& r, std::byte* out) noexcept {
    std::size_t off = 0;
    detail::put(out, off, r.request_id);
    detail::put(out, off, r.remote_address);
    detail::put(out, off, r.operand);
    detail::put(out, off, r.compare);
    detail::put(out, off, r.rkey);
    detail::put(out, off, r.op);
    detail::put<std::uint8_t>(out, off, static_cast<std::uint8_t>(r.kind));
    detail::put<std::uint8_t>(out, off, r.bits32);
}

inline std::optional<AtomicRequest> decode_atomic_request(std::span<const std::byte> in) noexcept {
    if (in.size() != AtomicRequest::size) return std::nullopt;
    std::size_t off = 0;
    AtomicRequest r;
    r.request_id = detail::get<std::uint64_t>(in.data(), off);
    r.remote_address = detail::get<std::uint64_t>(in.data(), off);
    r.operand = detail::get<std::uint64_t>(in.data(), off);
    r.compare = detail::get<std::uint64_t>(in.data(), off);
    r.rkey = detail::get<std::uint32_t>(in.data(), off);
    r.op = detail::get<std::uint16_t>(in.data(), off);
    auto kind = detail::get<std::uint8_t>(in.data(), off);
    r.bits32 = detail::get<std::uint8_t>(in.data(), off);
    if (kind < 1 || kind > 3 || r.bits32 > 1) return std::nullopt;
    r.kind = static_cast<AtomicKind>(kind);
    return r;
}

struct AtomicReply {
    std::uint64_t request_id = 0;
    std::uint64_t old_value = 0;
    std::int32_t status = 0;  // transit::Status of the target's attempt

    static constexpr std::size_t size = 24;
};

inline void encode(const AtomicReply& r, std::byte* out) noexcept {
    std::size_t off = 0;
    detail::put(out, off, r.request_id);
    detail::put(out, off, r.old_value);
    detail::put(out, off, static_cast<std::uint32_t>(r.status));
    detail::put<std::uint32_t>(out, off, 0);
}

inline std::optional<AtomicReply> decode_atomic_reply(std::span<const std::byte> in) noexcept {
    if (in.size() != AtomicReply::size) return std::nullopt;
    std::size_t off = 0;
    AtomicReply r;
    r.request_id = detail::get<std::uint64_t>(in.data(), off);
    r.old_value = detail::get<std::uint64_t>(in.data(), off);
    r.status = static_cast<std::int32_t>(detail::get<std::uint32_t>(in.data(), off));
    auto pad = detail::get<std::uint32_t>(in.data(), off);
    if (pad != 0 || r.status > 1 || r.status < -14) return std::nullopt;
    return r;
}

// ---------------------------------------------------------------------------
// Connection messages (UD)
// ---------------------------------------------------------------------------

enum class CmType : std::uint8_t {
    request = 1,  // "here is my RC QP, connect yours to it"
    reply = 2,    // "done, here is mine" (echoes the requester's QPN)
    ready = 3,    // "my QP is ready to send too"; lets the replier start sending
    reject = 4,   // "I cannot take this connection" (no receive resources)
};

inline constexpr std::uint32_t cm_magic = 0x4f49424d;  // "OIBM"
inline constexpr std::uint8_t cm_version = 1;

// Where a QP can be reached: the RC QP number and its address on the fabric.
struct QpAddress {
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0;  // first packet sequence number
    std::uint16_t lid = 0;  // InfiniBand
    std::uint8_t mtu = 0;   // enum ibv_mtu, 1 (256) .. 5 (4096)
    // RDMA reads and atomics this QP accepts at once as a target: the peer must
    // not have more outstanding towards it (0 is read as 1).
    std::uint8_t rd_atomic = 0;
    std::array<std::uint8_t, 16> gid{};  // RoCE and routed InfiniBand
};

struct CmMessage {
    CmType type = CmType::request;
    std::uint32_t src_rank = 0;
    std::uint32_t dst_rank = 0;
    // First 8 bytes of the job secret: a packet from another job (stale LID/QPN
    // reuse on a shared fabric) is dropped.
    std::uint64_t job_key = 0;
    QpAddress src;              // the sender's RC QP
    std::uint32_t dst_qpn = 0;  // reply/ready/reject: the QP this answers
    std::uint16_t credits = 0;  // request/reply: data credits granted to the peer

    static constexpr std::size_t size = 64;
};

inline void encode(const CmMessage& m, std::byte* out) noexcept {
    std::size_t off = 0;
    detail::put(out, off, cm_magic);
    detail::put(out, off, cm_version);
    detail::put<std::uint8_t>(out, off, static_cast<std::uint8_t>(m.type));
    detail::put<std::uint16_t>(out, off, 0);
    detail::put(out, off, m.src_rank);
    detail::put(out, off, m.dst_rank);
    detail::put(out, off, m.job_key);
    detail::put(out, off, m.src.qpn);
    detail::put(out, off, m.src.psn);
    detail::put(out, off, m.src.lid);
    detail::put(out, off, m.src.mtu);
    detail::put(out, off, m.src.rd_atomic);
    std::memcpy(out + off, m.src.gid.data(), 16);
    off += 16;
    detail::put(out, off, m.dst_qpn);
    detail::put(out, off, m.credits);
    detail::put<std::uint16_t>(out, off, 0);
    detail::put<std::uint32_t>(out, off, 0);
}

inline std::optional<CmMessage> decode_cm(std::span<const std::byte> in) noexcept {
    if (in.size() < CmMessage::size) return std::nullopt;
    const std::byte* p = in.data();
    std::size_t off = 0;
    CmMessage m;
    if (detail::get<std::uint32_t>(p, off) != cm_magic) return std::nullopt;
    if (detail::get<std::uint8_t>(p, off) != cm_version) return std::nullopt;
    auto type = detail::get<std::uint8_t>(p, off);
    auto pad1 = detail::get<std::uint16_t>(p, off);
    m.src_rank = detail::get<std::uint32_t>(p, off);
    m.dst_rank = detail::get<std::uint32_t>(p, off);
    m.job_key = detail::get<std::uint64_t>(p, off);
    m.src.qpn = detail::get<std::uint32_t>(p, off);
    m.src.psn = detail::get<std::uint32_t>(p, off);
    m.src.lid = detail::get<std::uint16_t>(p, off);
    m.src.mtu = detail::get<std::uint8_t>(p, off);
    m.src.rd_atomic = detail::get<std::uint8_t>(p, off);
    std::memcpy(m.src.gid.data(), p + off, 16);
    off += 16;
    m.dst_qpn = detail::get<std::uint32_t>(p, off);
    m.credits = detail::get<std::uint16_t>(p, off);
    auto pad3 = detail::get<std::uint16_t>(p, off);
    auto pad4 = detail::get<std::uint32_t>(p, off);
    if (type < 1 || type > 4 || pad1 || pad3 || pad4) return std::nullopt;
    m.type = static_cast<CmType>(type);
    // QP numbers and PSNs are 24-bit quantities.
    if (m.src.qpn == 0 || m.src.qpn > 0xffffff || m.src.psn > 0xffffff || m.dst_qpn > 0xffffff)
        return std::nullopt;
    if (m.src.mtu < 1 || m.src.mtu > 5) return std::nullopt;
    bool grants = m.type == CmType::request || m.type == CmType::reply;
    if (grants != (m.credits != 0)) return std::nullopt;
    if (m.type != CmType::request && m.dst_qpn == 0) return std::nullopt;
    return m;
}

// ---------------------------------------------------------------------------
// Registration handles: the bytes a process hands to peers for its memory.
// ---------------------------------------------------------------------------

namespace access {  // the same bits as btl::reg_flags, kept here so the wire is self-contained
inline constexpr std::uint32_t local_write = 0x1;
inline constexpr std::uint32_t remote_read = 0x2;
inline constexpr std::uint32_t remote_write = 0x4;
inline constexpr std::uint32_t remote_atomic = 0x8;
inline constexpr std::uint32_t all = 0xf;
}  // namespace access

struct RemoteKey {
    std::uint64_t address = 0;  // what the owner registered, not page rounded
    std::uint64_t length = 0;
    std::uint32_t rkey = 0;
    std::uint32_t access = 0;  // access bits the owner asked for

    static constexpr std::size_t size = 24;

    // The range lies inside and the owner allowed `needed`.  Checked before
    // posting: a bad remote access would kill the whole connection.
    bool allows(std::uint64_t addr, std::size_t len, std::uint32_t needed) const noexcept {
        return (access & needed) == needed && addr >= address && addr + len >= addr &&
               addr + len <= address + length;
    }
};

inline void encode(const RemoteKey& k, std::byte* out) noexcept {
    std::size_t off = 0;
    detail::put(out, off, k.address);
    detail::put(out, off, k.length);
    detail::put(out, off, k.rkey);
    detail::put(out, off, k.access);
}

// nullopt for an empty or wrapping range or unknown access bits.
inline std::optional<RemoteKey> decode_remote_key(const std::byte* in) noexcept {
    if (in == nullptr) return std::nullopt;
    std::size_t off = 0;
    RemoteKey k;
    k.address = detail::get<std::uint64_t>(in, off);
    k.length = detail::get<std::uint64_t>(in, off);
    k.rkey = detail::get<std::uint32_t>(in, off);
    k.access = detail::get<std::uint32_t>(in, off);
    if ((k.access & ~access::all) != 0 || k.length == 0 || k.address + k.length < k.address)
        return std::nullopt;
    return k;
}

// ---------------------------------------------------------------------------
// Modex blob: one entry per module (active port) of a process.
// ---------------------------------------------------------------------------

enum class LinkLayer : std::uint8_t { infiniband = 1, ethernet = 2 };

struct PortAddress {
    LinkLayer link = LinkLayer::infiniband;
    std::uint8_t port = 0;
    std::uint8_t mtu = 0;  // enum ibv_mtu (active MTU of the port)
    std::uint16_t lid = 0;
    std::uint64_t subnet_prefix = 0;  // upper half of the GID, host order
    std::array<std::uint8_t, 16> gid{};
    std::uint32_t ud_qpn = 0;  // where connection messages go
    std::uint32_t qkey = 0;
    // Bytes each receive buffer holds (header included): a peer must never
    // send a larger fragment, so modules with different sizes do not connect.
    std::uint32_t recv_size = 0;

    static constexpr std::size_t size = 44;
};

inline constexpr std::uint32_t modex_magic = 0x4f494241;  // "OIBA"
inline constexpr std::size_t modex_header = 8;
inline constexpr std::size_t max_ports_in_modex = 64;

inline void encode(const PortAddress& a, std::byte* out) noexcept {
    std::size_t off = 0;
    detail::put<std::uint8_t>(out, off, static_cast<std::uint8_t>(a.link));
    detail::put(out, off, a.port);
    detail::put(out, off, a.mtu);
    detail::put<std::uint8_t>(out, off, 0);
    detail::put(out, off, a.lid);
    detail::put<std::uint16_t>(out, off, 0);
    detail::put(out, off, a.subnet_prefix);
    std::memcpy(out + off, a.gid.data(), 16);
    off += 16;
    detail::put(out, off, a.ud_qpn);
    detail::put(out, off, a.qkey);
    detail::put(out, off, a.recv_size);
}

inline std::optional<PortAddress> decode_port(std::span<const std::byte> in) noexcept {
    if (in.size() != PortAddress::size) return std::nullopt;
    const std::byte* p = in.data();
    std::size_t off = 0;
    PortAddress a;
    auto link = detail::get<std::uint8_t>(p, off);
    a.port = detail::get<std::uint8_t>(p, off);
    a.mtu = detail::get<std::uint8_t>(p, off);
    auto pad1 = detail::get<std::uint8_t>(p, off);
    a.lid = detail::get<std::uint16_t>(p, off);
    auto pad2 = detail::get<std::uint16_t>(p, off);
    a.subnet_prefix = detail::get<std::uint64_t>(p, off);
    std::memcpy(a.gid.data(), p + off, 16);
    off += 16;
    a.ud_qpn = detail::get<std::uint32_t>(p, off);
    a.qkey = detail::get<std::uint32_t>(p, off);
    a.recv_size = detail::get<std::uint32_t>(p, off);
    if (a.recv_size < FragHeader::size) return std::nullopt;
    if (link < 1 || link > 2 || pad1 || pad2) return std::nullopt;
    if (a.port == 0 || a.mtu < 1 || a.mtu > 5 || a.ud_qpn == 0 || a.ud_qpn > 0xffffff)
        return std::nullopt;
    a.link = static_cast<LinkLayer>(link);
    return a;
}

// The blob: magic, count, then `count` PortAddress entries.
template <typename Out>
void encode_modex(std::span<const PortAddress> ports, Out& out) {
    out.resize(modex_header + ports.size() * PortAddress::size);
    std::size_t off = 0;
    detail::put(out.data(), off, modex_magic);
    detail::put(out.data(), off, static_cast<std::uint32_t>(ports.size()));
    for (const PortAddress& a : ports) {
        encode(a, out.data() + off);
        off += PortAddress::size;
    }
}

// False when the blob is malformed (then `ports` is left empty).
template <typename Vec>
bool decode_modex(std::span<const std::byte> in, Vec& ports) {
    ports.clear();
    if (in.size() < modex_header) return false;
    std::size_t off = 0;
    if (detail::get<std::uint32_t>(in.data(), off) != modex_magic) return false;
    auto count = detail::get<std::uint32_t>(in.data(), off);
    if (count > max_ports_in_modex || in.size() != modex_header + count * PortAddress::size)
        return false;
    for (std::uint32_t i = 0; i < count; ++i) {
        auto a = decode_port(in.subspan(off, PortAddress::size));
        if (!a) {
            ports.clear();
            return false;
        }
        ports.push_back(*a);
        off += PortAddress::size;
    }
    return true;
}

}  // namespace transit::openib::wire
