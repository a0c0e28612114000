// The openib module's records: what goes on a send queue (a send, an RDMA
// operation or an atomic), a receive buffer, and a registration handle.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openib_rcache.hpp"
#include "openib_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::openib {

class Endpoint;

// Everything that goes on a send queue, with an intrusive link for the
// per-endpoint pending queue.  The first member of SendFrag is the descriptor
// the upper layer sees.
enum class FragKind : std::uint8_t { send, rdma, control, ud };

struct Frag : btl::Descriptor {
    FragKind kind = FragKind::send;
    Frag* next = nullptr;
    Endpoint* endpoint = nullptr;
};

struct SendFrag : Frag {
    btl::Segment segment{};
    std::byte* buffer = nullptr;  // FragHeader, then up to max_send_size bytes
    std::uint32_t lkey = 0;
    wire::FragType type = wire::FragType::data;
    btl::Tag tag = 0;
    bool in_use = false;
    bool inline_done = false;  // sendi: freed by the module on completion, no callback
    SendFrag* next_free = nullptr;
};

enum class RdmaOp : std::uint8_t { put, get, hw_fetch_add, hw_cswap, emulated_atomic };

struct RdmaFrag : Frag {
    RdmaOp op = RdmaOp::put;
    void* local_address = nullptr;
    std::uint32_t lkey = 0;
    std::uint64_t remote_address = 0;
    std::uint32_t rkey = 0;
    std::size_t size = 0;
    std::uint64_t operand = 0;
    std::uint64_t compare = 0;
    btl::AtomicOp atomic = btl::AtomicOp::add;
    wire::AtomicKind atomic_kind = wire::AtomicKind::op;
    bool bits32 = false;
    btl::RegistrationHandle* local_handle = nullptr;
    btl::RdmaCompletionFn cbfunc = nullptr;
    void* cbcontext = nullptr;
    void* user_cbdata = nullptr;
    std::uint32_t index = 0;       // in the pool, names the request on the wire
    std::uint32_t generation = 0;  // bumped on every reuse: a stale reply is refused
    bool in_use = false;
    RdmaFrag* next_free = nullptr;
};

struct RecvFrag {
    std::byte* buffer = nullptr;
    std::uint32_t lkey = 0;
    std::uint32_t length = 0;  // bytes received (while deferred)
    RecvFrag* next = nullptr;  // deferred atomic requests of one endpoint
};

// A registration handle: the first `packed_size` bytes are what peers receive.
struct Handle {
    static constexpr std::size_t packed_size = wire::RemoteKey::size;
    // address u64, length u64, rkey u32, btl::reg_flags u32 (little endian)
    std::byte packed[packed_size];
    std::uint32_t lkey = 0;
    Registration* registration = nullptr;
    Handle* next_free = nullptr;
    bool in_use = false;
};

static_assert(wire::access::remote_atomic == btl::reg_flags::remote_atomic &&
              wire::access::all == btl::reg_flags::access_any);
using wire::RemoteKey;
// Reads a peer's packed handle; false when it is malformed.
bool unpack_handle(const btl::RegistrationHandle* h, RemoteKey& out) noexcept;

// Whether the caller's registration `h` covers [addr, addr + len) and, with
// `write`, lets the device write there (a get's buffer, a fetched value),
// which verbs allows only on memory registered for local write.
bool local_ok(const btl::RegistrationHandle* h, const void* addr, std::size_t len,
              bool write = false) noexcept;

}  // namespace transit::openib
