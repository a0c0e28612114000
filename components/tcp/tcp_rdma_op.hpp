// A one-sided operation in flight at the origin: one slot of TcpRdma's op
// table, named on the wire by its id (index | generation << 16) so that a
// late or forged reply cannot complete a slot that was reused.
#pragma once

#include <cstdint>

#include "tcp_wire.hpp"
#include "transit/btl/types.hpp"

namespace transit::tcp {

class TcpEndpoint;

struct RdmaOp {
    btl::RdmaCompletionFn cbfunc = nullptr;
    void* cbcontext = nullptr;
    void* cbdata = nullptr;
    void* local = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    TcpEndpoint* endpoint = nullptr;
    std::uint64_t size = 0;
    std::uint16_t generation = 0;
    wire::FrameType type = wire::FrameType::put;
    bool in_use = false;  // taken from the op table
    bool fetch = false;   // an atomic that returns the old value
    int atomic_flags = 0;
    std::uint16_t index = 0;  // in the op table: the low half of its id
    RdmaOp* next_free = nullptr;
};

}  // namespace transit::tcp
