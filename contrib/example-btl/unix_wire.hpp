// btl/unix: what travels on the sockets.
//
// The sockets are SOCK_SEQPACKET: the kernel keeps message boundaries and a
// non-blocking sendmsg() either queues a whole message or nothing (EAGAIN), so
// there is no framing and no partial write to resume.  Every message is one
// Header followed by its payload.
#pragma once

#include <cstddef>
#include <cstdint>

#include <transit/btl/types.hpp>

namespace unix_btl {

enum class Kind : std::uint8_t {
    hello,      // first message on a connection: the connecting rank
    am,         // active message: payload goes to the tag's callback
    put,        // origin -> target: write the payload at address
    put_ack,    // target -> origin: the put of `op` is done (status)
    get,        // origin -> target: send back `length` bytes from address
    get_reply,  // target -> origin: the bytes of `op` (or an error status)
};

struct Header {
    Kind kind;
    transit::btl::Tag tag;  // am
    std::uint16_t unused = 0;
    std::int32_t status;    // put_ack, get_reply: a transit::Status
    std::uint32_t rank;     // hello
    std::uint32_t op;       // put/get and their replies: the origin's operation slot
    std::uint64_t key;      // put/get: the target's registration id
    std::uint64_t address;  // put/get: where in the target's memory
    std::uint64_t length;   // get: bytes asked for
};
static_assert(sizeof(Header) == 40, "the header is part of the wire protocol");

// Put/get operations one process may have in flight (per module).  A target
// therefore never owes one origin more than this many replies, which is what
// bounds its reply queue: see Connection.
inline constexpr std::size_t max_rdma_in_flight = 64;

// A registration handle's packed form, the first registration_handle_size bytes
// of the handle the origin passes back.  The target trusts only the id: base and
// size are checked against its own table (a peer could send anything).
struct PackedRegistration {
    std::uint64_t id;
    std::uint64_t base;
    std::uint64_t size;
};

}  // namespace unix_btl
