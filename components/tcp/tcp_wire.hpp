// The tcp wire format: frame headers, the bodies of one-sided requests and
// replies, and the connection handshake.  Everything here is a pure function
// over bytes (no sockets, no libtransit), so it is unit tested and fuzzed alone.
//
// Every frame is an 8-byte header followed by `length` bytes:
//   am       payload (the active message), tag = AM tag
//   put      RdmaRequest + data            -> target writes, answers reply
//   get      RdmaRequest                   -> target answers reply + data
//   atomic   AtomicRequest                 -> target applies, answers reply
//   reply    Reply [+ data for a get]
//   goodbye  nothing: the peer closes on purpose, EOF after it is no failure
//            (until a link with it connects again: only a peer that added us
//            again connects or accepts, so that takes the goodbye back)
// Integers are little-endian on the wire.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace transit::tcp::wire {

static_assert(std::endian::native == std::endian::little,
              "the tcp wire format is little-endian; add byte swaps for this host");

inline constexpr std::uint8_t frame_magic = 0xa7;

enum class FrameType : std::uint8_t {
    am = 1,
    put = 2,
    get = 3,
    atomic = 4,
    reply = 5,
    goodbye = 6
};

struct FrameHeader {
    std::uint8_t magic = frame_magic;
    FrameType type = FrameType::am;
    std::uint8_t tag = 0;
    std::uint8_t flags = 0;  // reserved, must be 0
    std::uint32_t length = 0;
};
inline constexpr std::size_t header_size = 8;
static_assert(sizeof(FrameHeader) == header_size);

// Limits a receiver enforces before it trusts a length (so a hostile length can
// never make it allocate or wait for more than it configured).
struct Limits {
    std::uint32_t max_am = 65536;       // largest AM payload
    std::uint32_t max_rdma = 1u << 20;  // largest put/get data in one frame
};

enum class RdmaKind : std::uint8_t { atomic_op = 1, atomic_fop = 2, atomic_cswap = 3 };

// Body of put and get frames.
// A request names the target's registration by its key: id and secret (the
// toolkit's RegistrationTable); a wrong secret is refused like a wrong id.
struct RdmaRequest {
    std::uint64_t key = 0;     // the target's registration key: its id
    std::uint64_t secret = 0;  // and its secret
    std::uint64_t address = 0;
    std::uint64_t size = 0;
    std::uint32_t op_id = 0;  // echoed in the reply
    std::uint32_t reserved = 0;
};
inline constexpr std::size_t rdma_request_size = 40;
static_assert(sizeof(RdmaRequest) == rdma_request_size);

struct AtomicRequest {
    std::uint64_t key = 0;
    std::uint64_t secret = 0;
    std::uint64_t address = 0;
    std::uint64_t operand = 0;  // value for cswap
    std::uint64_t compare = 0;  // cswap only
    std::uint32_t op_id = 0;
    std::uint16_t op = 0;  // btl::AtomicOp
    RdmaKind kind = RdmaKind::atomic_op;
    std::uint8_t atomic_flags = 0;  // btl::atomic_flags
};
inline constexpr std::size_t atomic_request_size = 48;
static_assert(sizeof(AtomicRequest) == atomic_request_size);

struct Reply {
    std::uint32_t op_id = 0;
    std::int32_t status = 0;  // transit::Status as int
    std::uint64_t value = 0;  // old value of a fetching atomic
};
inline constexpr std::size_t reply_size = 16;
static_assert(sizeof(Reply) == reply_size);

// Outcome of looking at the front of a receive buffer.
enum class ScanResult {
    need_more,  // fewer than header_size bytes
    ok,         // header valid; `header` filled
    bad_magic,
    bad_type,
    bad_flags,
    bad_length,  // impossible for the type, or over the limits
};
std::string_view to_string(ScanResult r) noexcept;

// Decodes and validates a frame header from the first bytes of `bytes`.
ScanResult scan_header(std::span<const std::byte> bytes, const Limits& limits,
                       FrameHeader& header) noexcept;

// Bytes of fixed body that follow the header of a frame of this type (before any data).
std::size_t body_size(FrameType type) noexcept;

// A link's receive buffer: bytes [head, tail) of `capacity` are received and
// not yet handled.
struct ReceiveBuffer {
    std::byte* data;
    std::size_t& head;
    std::size_t& tail;
    std::size_t capacity;
};

// The frame at the front of `b`: ok when it is buffered, header and all (only
// the header and fixed body of put and reply, whose data may stream past the
// buffer); need_more when it is not yet, having moved the partial frame to
// the front when it would not fit where it starts; any other result when the
// header is malformed.
ScanResult next_frame(ReceiveBuffer b, const Limits& limits, FrameHeader& header) noexcept;

void encode(const FrameHeader& h, std::byte* out) noexcept;
void encode(const RdmaRequest& r, std::byte* out) noexcept;
void encode(const AtomicRequest& r, std::byte* out) noexcept;
void encode(const Reply& r, std::byte* out) noexcept;
// Bodies are only decoded after scan_header said the frame carries them.
RdmaRequest decode_rdma_request(const std::byte* in) noexcept;
AtomicRequest decode_atomic_request(const std::byte* in) noexcept;
Reply decode_reply(const std::byte* in) noexcept;

// --- handshake ---------------------------------------------------------------
// The connector sends a hello; the acceptor answers accept (its own identity,
// so the connector checks it too) or reject, then closes on reject.

inline constexpr std::uint64_t handshake_magic = 0x31504354534e5254ull;  // "TRNSTCP1"
inline constexpr std::uint16_t protocol_version = 2;
inline constexpr std::size_t max_job_id = 64;
inline constexpr std::size_t handshake_size = 104;

// A client outside the job (rt::DynamicPeers) sends join instead of hello:
// `secret` holds the listening context's token, rank and job id its own (for
// messages only); the server answers welcome (its token again, rank the id
// it gave the client) or closes.
enum class HandshakeKind : std::uint8_t {
    hello = 1,
    accept = 2,
    reject = 3,
    join = 4,
    welcome = 5,
    refused = 6  // to a joining client: the token is wrong (the secret is zero)
};

struct Handshake {
    HandshakeKind kind = HandshakeKind::hello;
    std::uint16_t version = protocol_version;
    std::uint32_t rank = 0;
    std::uint32_t link = 0;  // which of the btl_tcp_links sockets this is
    // 0: the connection is for the module whose listener took it.  Else the
    // index + 1, in the acceptor's published addresses, of the address the
    // connector meant: a connection that came by another path (another
    // interface, when the first did not answer) still joins that address's
    // module, so both sides agree which module the link belongs to.
    std::uint32_t target = 0;
    std::string job_id;  // at most max_job_id bytes
    std::array<std::byte, 16> secret{};
};

// Fixed size, so a reader knows when it has the whole message.
std::array<std::byte, handshake_size> encode(const Handshake& h);

// Parses a handshake; returns "" or the reason it is malformed.  Checks only
// the form (magic, version, kind, lengths), not who sent it.
std::string decode(std::span<const std::byte> in, Handshake& out);

// Whether `h` is a valid hello/accept from a member of our job: "" or why not.
// The secret is compared in constant time.
std::string verify(const Handshake& h, std::string_view job_id,
                   const std::array<std::byte, 16>& secret);

}  // namespace transit::tcp::wire
