// btl/unix: what travels on the sockets.
//
// The sockets are AF_UNIX SOCK_DGRAM: on Linux a datagram between two local
// sockets is never lost or reordered, keeps its boundaries, and a non-blocking
// sendmsg() queues all of it or nothing (EAGAIN).  So there is no framing, no
// partial write to resume and no acknowledgement.  Every message is one Header
// followed by its payload.
#pragma once

#include <cstdint>

#include <transit/btl/types.hpp>

namespace unix_btl {

struct Header {
    std::uint32_t rank;     // the sender: datagrams carry no connection to know it by
    transit::btl::Tag tag;  // whose callback gets the payload
    std::uint8_t unused[3] = {};
};
static_assert(sizeof(Header) == 8, "the header is part of the wire protocol");

}  // namespace unix_btl
