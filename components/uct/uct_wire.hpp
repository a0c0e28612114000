// What travels between uct modules, inside one UCT active message (AM id 0).
//
// Every message starts with a WireHeader, which is also the 64-bit header of
// uct_ep_am_short.  Messages for the upper layer carry the Transit tag and the
// payload; one-sided operations are performed by the target, which answers
// with a reply the initiator matches to its operation by (index, generation).
// Everything is read with memcpy: a peer's bytes are never trusted for
// alignment, lengths or indexes.
#pragma once

#include <cstdint>

#include "transit/runtime.hpp"

namespace transit::uct {

inline constexpr std::uint8_t am_id = 0;
inline constexpr std::uint8_t wire_version = 2;

enum class Kind : std::uint8_t {
    message = 1,  // upper-layer active message: tag + payload
    put = 2,      // RdmaRequest + data: write at the target
    put_ack = 3,  // RdmaReply: the data is in place
    get_req = 4,  // RdmaRequest: send back `length` bytes
    get_rep = 5,  // RdmaReply + data
    amo_req = 6,  // AtomicRequest
    amo_rep = 7,  // AtomicReply
};

struct WireHeader {
    std::uint8_t kind;
    std::uint8_t tag;
    std::uint8_t version;
    std::uint8_t reserved;
    Rank source;
};
static_assert(sizeof(WireHeader) == 8);

// put and get_req: one piece of an operation, at `offset` inside it.
struct RdmaRequest {
    std::uint32_t op;
    std::uint32_t generation;
    std::uint64_t key;      // the target's registration
    std::uint64_t address;  // where this piece starts at the target
    std::uint64_t length;
    std::uint64_t offset;
};
static_assert(sizeof(RdmaRequest) == 40);

// put_ack and get_rep.
struct RdmaReply {
    std::uint32_t op;
    std::uint32_t generation;
    std::int32_t status;  // transit::Status
    std::uint32_t reserved;
    std::uint64_t offset;
    std::uint64_t length;
};
static_assert(sizeof(RdmaReply) == 32);

enum class AtomicMode : std::uint8_t { post = 0, fetch = 1, cswap = 2 };

struct AtomicRequest {
    std::uint32_t op;
    std::uint32_t generation;
    std::uint64_t key;
    std::uint64_t address;
    std::uint64_t operand;
    std::uint64_t compare;
    std::uint16_t amo;  // btl::AtomicOp
    std::uint8_t mode;  // AtomicMode
    std::uint8_t bits32;
    std::uint32_t reserved;
};
static_assert(sizeof(AtomicRequest) == 48);

struct AtomicReply {
    std::uint32_t op;
    std::uint32_t generation;
    std::int32_t status;
    std::uint32_t reserved;
    std::uint64_t value;  // the old value (fetch, cswap)
};
static_assert(sizeof(AtomicReply) == 24);

// The modex blob: {magic, version, device address length, interface address
// length, process id} and the two addresses.  The process id lets a peer on
// the node notice this process has exited: shared-memory transports never
// tell (UCX gives them no peer-failure detection).
struct AddressHeader {
    std::uint32_t magic;
    std::uint16_t version;
    std::uint16_t reserved;
    std::uint16_t device_len;
    std::uint16_t iface_len;
    std::uint32_t pid;
};
static_assert(sizeof(AddressHeader) == 16);
inline constexpr std::uint32_t address_magic = 0x31544355;  // "UCT1"

// The packed (remote) form of a registration: the target looks the key up and
// checks bounds and access itself; the initiator checks them first.
struct PackedHandle {
    std::uint64_t key;
    std::uint64_t base;
    std::uint64_t len;
    std::uint32_t access;  // btl::reg_flags
    std::uint32_t magic;
};
static_assert(sizeof(PackedHandle) == 32);
inline constexpr std::uint32_t handle_magic = 0x48544355;  // "UCTH"

}  // namespace transit::uct
