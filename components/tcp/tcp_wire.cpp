#include "tcp_wire.hpp"

#include <cstring>
#include <type_traits>

namespace transit::tcp::wire {

namespace {

// The structs are padding-free and the wire is little-endian like the host
// (checked in the header), so their bytes are the wire form.
template <typename T>
void store(const T& v, std::byte* out) noexcept {
    static_assert(std::is_trivially_copyable_v<T> && std::has_unique_object_representations_v<T>);
    std::memcpy(out, &v, sizeof v);
}

template <typename T>
T load(const std::byte* in) noexcept {
    T v;
    std::memcpy(&v, in, sizeof v);
    return v;
}

bool known_type(std::uint8_t t) noexcept {
    return t >= static_cast<std::uint8_t>(FrameType::am) &&
           t <= static_cast<std::uint8_t>(FrameType::goodbye);
}

bool length_fits(const FrameHeader& h, const Limits& limits) noexcept {
    const std::uint64_t len = h.length;
    switch (h.type) {
        case FrameType::am:
            return len <= limits.max_am;
        case FrameType::put:
            return len >= rdma_request_size && len - rdma_request_size <= limits.max_rdma;
        case FrameType::get:
            return len == rdma_request_size;
        case FrameType::atomic:
            return len == atomic_request_size;
        case FrameType::reply:
            return len >= reply_size && len - reply_size <= limits.max_rdma;
        case FrameType::goodbye:
            return len == 0;
    }
    return false;
}

}  // namespace

std::string_view to_string(ScanResult r) noexcept {
    switch (r) {
        case ScanResult::need_more:
            return "incomplete header";
        case ScanResult::ok:
            return "ok";
        case ScanResult::bad_magic:
            return "bad frame magic";
        case ScanResult::bad_type:
            return "unknown frame type";
        case ScanResult::bad_flags:
            return "reserved frame flags set";
        case ScanResult::bad_length:
            return "impossible frame length";
    }
    return "unknown";
}

ScanResult scan_header(std::span<const std::byte> bytes, const Limits& limits,
                       FrameHeader& header) noexcept {
    if (bytes.size() < header_size) return ScanResult::need_more;
    const auto magic = static_cast<std::uint8_t>(bytes[0]);
    const auto type = static_cast<std::uint8_t>(bytes[1]);
    if (magic != frame_magic) return ScanResult::bad_magic;
    if (!known_type(type)) return ScanResult::bad_type;
    if (bytes[3] != std::byte{0}) return ScanResult::bad_flags;
    header = load<FrameHeader>(bytes.data());
    if (!length_fits(header, limits)) return ScanResult::bad_length;
    return ScanResult::ok;
}

std::size_t body_size(FrameType type) noexcept {
    switch (type) {
        case FrameType::put:
        case FrameType::get:
            return rdma_request_size;
        case FrameType::atomic:
            return atomic_request_size;
        case FrameType::reply:
            return reply_size;
        case FrameType::am:
        case FrameType::goodbye:
            return 0;
    }
    return 0;
}

ScanResult next_frame(ReceiveBuffer b, const Limits& limits, FrameHeader& header) noexcept {
    const std::size_t avail = b.tail - b.head;
    const ScanResult r = scan_header({b.data + b.head, avail}, limits, header);
    if (r != ScanResult::ok) return r;
    const bool streams = header.type == FrameType::put || header.type == FrameType::reply;
    const std::size_t needed = header_size + (streams ? body_size(header.type) : header.length);
    if (avail >= needed) return ScanResult::ok;
    if (b.head + needed > b.capacity) {
        std::memmove(b.data, b.data + b.head, avail);
        b.head = 0;
        b.tail = avail;
    }
    return ScanResult::need_more;
}

void encode(const FrameHeader& h, std::byte* out) noexcept {
    store(h, out);
}
void encode(const RdmaRequest& r, std::byte* out) noexcept {
    store(r, out);
}
void encode(const AtomicRequest& r, std::byte* out) noexcept {
    store(r, out);
}
void encode(const Reply& r, std::byte* out) noexcept {
    store(r, out);
}
RdmaRequest decode_rdma_request(const std::byte* in) noexcept {
    return load<RdmaRequest>(in);
}
AtomicRequest decode_atomic_request(const std::byte* in) noexcept {
    return load<AtomicRequest>(in);
}
Reply decode_reply(const std::byte* in) noexcept {
    return load<Reply>(in);
}

// Handshake layout (104 bytes):
//   0 magic u64 | 8 version u16 | 10 kind u8 | 11 job id length u8 | 12 rank u32
//   16 job id [64] | 80 secret [16] | 96 link u32 | 100 reserved u32 (zero)
namespace {
constexpr std::size_t off_version = 8;
constexpr std::size_t off_kind = 10;
constexpr std::size_t off_job_len = 11;
constexpr std::size_t off_rank = 12;
constexpr std::size_t off_job = 16;
constexpr std::size_t off_secret = off_job + max_job_id;
constexpr std::size_t off_link = off_secret + 16;
static_assert(off_link + 8 == handshake_size);
}  // namespace

std::array<std::byte, handshake_size> encode(const Handshake& h) {
    std::array<std::byte, handshake_size> out{};
    store(handshake_magic, out.data());
    store(h.version, out.data() + off_version);
    out[off_kind] = static_cast<std::byte>(h.kind);
    const std::size_t n = h.job_id.size() < max_job_id ? h.job_id.size() : max_job_id;
    out[off_job_len] = static_cast<std::byte>(n);
    store(h.rank, out.data() + off_rank);
    std::memcpy(out.data() + off_job, h.job_id.data(), n);
    std::memcpy(out.data() + off_secret, h.secret.data(), h.secret.size());
    store(h.link, out.data() + off_link);
    store(h.target, out.data() + off_link + 4);
    return out;
}

std::string decode(std::span<const std::byte> in, Handshake& out) {
    if (in.size() < handshake_size) return "handshake too short";
    if (load<std::uint64_t>(in.data()) != handshake_magic) return "bad handshake magic";
    out.version = load<std::uint16_t>(in.data() + off_version);
    if (out.version != protocol_version)
        return "unsupported protocol version " + std::to_string(out.version);
    const auto kind = static_cast<std::uint8_t>(in[off_kind]);
    if (kind < static_cast<std::uint8_t>(HandshakeKind::hello) ||
        kind > static_cast<std::uint8_t>(HandshakeKind::refused))
        return "unknown handshake kind " + std::to_string(kind);
    out.kind = static_cast<HandshakeKind>(kind);
    const auto job_len = static_cast<std::size_t>(in[off_job_len]);
    if (job_len > max_job_id) return "job id length " + std::to_string(job_len) + " too long";
    out.rank = load<std::uint32_t>(in.data() + off_rank);
    out.job_id.assign(reinterpret_cast<const char*>(in.data() + off_job), job_len);
    std::memcpy(out.secret.data(), in.data() + off_secret, out.secret.size());
    out.link = load<std::uint32_t>(in.data() + off_link);
    out.target = load<std::uint32_t>(in.data() + off_link + 4);
    return {};
}

std::string verify(const Handshake& h, std::string_view job_id,
                   const std::array<std::byte, 16>& secret) {
    if (h.job_id != job_id.substr(0, max_job_id)) return "job id '" + h.job_id + "' is not ours";
    // Constant time, so timing does not reveal how much of a guess was right.
    unsigned diff = 0;
    for (std::size_t i = 0; i < secret.size(); ++i)
        diff |= static_cast<unsigned>(h.secret[i] ^ secret[i]);
    if (diff != 0) return "wrong job secret";
    return {};
}

}  // namespace transit::tcp::wire
