// Everything an ofi module hands to libfabric as an operation context: send
// fragments, receive buffers and one-sided operations.  Each starts with the
// fi_context2 the provider may use (FI_CONTEXT / FI_CONTEXT2 modes) and a kind,
// so a completion entry leads back to its object without a lookup.
//
// All of them come from bounded pools filled at module setup: the send,
// receive and progress paths only pop and push intrusive lists.
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>

#include "ofi_wire.hpp"
#include "transit/btl/types.hpp"
#include "transit/btl/util/free_list.hpp"

namespace transit::ofi {

class OfiEndpoint;

enum class OpKind : std::uint8_t { send, recv, rdma };

struct OpContext {
    fi_context2 fi{};  // first: the provider sees a pointer to it
    OpKind kind = OpKind::send;
};

// A send fragment: buffer = WireHeader + up to `capacity` bytes of payload.
struct OfiFrag : OpContext, btl::Descriptor {
    btl::Segment seg{};
    std::byte* buffer = nullptr;
    std::size_t capacity = 0;
    OfiEndpoint* endpoint = nullptr;
    void* desc = nullptr;      // local registration descriptor (FI_MR_LOCAL)
    bool internal = false;     // sendi's own fragment: freed at completion, no callback
    bool posted = false;       // in the provider's hands until its completion
    bool abandoned = false;    // its peer was lost: completed already, the provider's
                               // completion only frees it
    bool freed_early = false;  // freed by its owner while still posted
    bool in_use = false;       // catches double frees
    OfiFrag* next_free = nullptr;
};

// A preposted receive buffer.
struct OfiRecv : OpContext {
    std::byte* buffer = nullptr;
    std::size_t size = 0;
    OfiRecv* next_repost = nullptr;  // queued when reposting met FI_EAGAIN
};

// A put, get or atomic in flight.
struct OfiRdma : OpContext {
    btl::RdmaCompletionFn cbfunc = nullptr;
    void* cbcontext = nullptr;
    void* cbdata = nullptr;
    OfiEndpoint* endpoint = nullptr;
    Rank peer = any_rank;  // endpoint's: read where the endpoint may be gone
    void* local_address = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    std::uint64_t operand = 0;  // atomics read these until completion
    std::uint64_t compare = 0;
    void* temp_registration = nullptr;  // a CacheEntry held until completion
    bool abandoned = false;             // its peer was lost: completed already
    bool in_use = false;
    OfiRdma* next_free = nullptr;
};

// The module's pools are the toolkit's free list, made whole at setup.
template <typename T>
using Pool = btl::util::FreeList<T>;

// Send fragments of one size class: a WireHeader in front of `capacity` bytes
// of payload, the buffers in one block (one registration when the provider
// needs local registrations).
using FragPool = Pool<OfiFrag>;

}  // namespace transit::ofi
