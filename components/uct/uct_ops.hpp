// The one-sided operations a uct module has in flight, which its put, get and
// atomics share: sent by active messages in pieces the target answers, or
// carried by UCT itself (native) and completed by its callback or a flush.
//
// Owns: the operation slots (btl_uct_max_rdma_ops), the operations with
// pieces left to send, those UCT completed (reported after its progress
// returns) and the flushes that found no room, and the count in flight.
// Borrows: the module (its progress membership, its error handling; the
// completion callbacks name it), its sender (transmit), its log stream, and the
// module's UctOneSided, whose second interface (cma) is polled only while
// an operation is in flight.
#pragma once

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "transit/btl/module.hpp"
#include "transit/btl/region_table.hpp"
#include "transit/log.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctSender;
class UctOneSided;

class UctOps {
  public:
    UctOps(UctModule& module, UctSender& sender, UctOneSided& one_sided,
           const log::Stream& out) noexcept
        : module_(module), sender_(sender), one_sided_(one_sided), out_(out) {}

    // `chunk`: the data bytes one piece of a put or get carries.
    void setup(std::size_t max_ops, std::size_t chunk);
    std::size_t chunk() const noexcept { return chunk_; }

    // The remote handle, read into p: success when it grants `access` on the
    // range, else why not.  Inline: put, get and the atomics check every
    // request before starting it.
    static Status check_remote(const btl::RegistrationHandle* handle, std::uint64_t address,
                               std::size_t size, std::uint32_t access, PackedHandle& p) noexcept {
        if (handle == nullptr) [[unlikely]]
            return Status::bad_param;
        std::memcpy(&p, handle, sizeof p);
        if (p.magic != handle_magic && p.magic != native_handle_magic) [[unlikely]]
            return Status::bad_param;
        return btl::range_permits(p.base, p.len, p.access, address, size, access);
    }
    // An operation of `kind` for the request (btl::RdmaRequest or
    // btl::AtomicRequest): its endpoint, local side and completion; nullptr
    // when none is free.
    template <typename Request>
    RdmaOp* start_op(OpKind kind, const Request& req) noexcept;
    // A slot for an operation UCT carries itself: it completes through `comp`.
    template <typename Request>
    RdmaOp* start_native(OpKind kind, const Request& req) noexcept;
    // Starts an operation by active messages: success (the callback comes
    // from progress) or nothing happened (out_of_resource, errors).
    Status launch(RdmaOp* op) noexcept;
    void release_op(RdmaOp* op) noexcept;
    // A native operation UCT reported in progress: its callback completes it.
    Status in_flight() noexcept;
    // A remote write UCT accepted (a put, a posted atomic): complete once the
    // flush after it says so.
    Status complete_after_flush(RdmaOp* op) noexcept;

    // The initiator's side of the target's answers (from the module's handle()).
    void on_rdma_reply(Kind kind, Rank source, std::span<const std::byte> body) noexcept;
    void on_atomic_reply(Rank source, std::span<const std::byte> body) noexcept;

    // From attend(), each when there is work of its kind.
    int retry() noexcept;
    int finish_native() noexcept;
    int retry_flushes() noexcept;
    bool waiting() const noexcept { return !waiting_ops_.empty(); }
    bool done_due() const noexcept { return done_head_ != nullptr; }
    bool flushes_due() const noexcept { return !flushes_.empty(); }
    std::size_t pending() const noexcept { return ops_pending_; }

    // The operations with `peer` end with `status` (a native one is UCT's
    // until it calls back, with an error).
    void end_ops(Rank peer, Status status) noexcept;
    // Whether an operation with `peer` is in flight.
    bool involves(Rank peer) const noexcept;
    // The endpoint goes: what still waits to be sent to it ends here; what
    // was sent keeps only the peer's rank and completes on the reply.
    void forget(const UctEndpoint* e) noexcept;

  private:
    // Sends the pieces not sent yet, until all are out or UCT has no room.
    Status advance(RdmaOp* op) noexcept;
    void answered(RdmaOp* op, Status s) noexcept;
    void complete_op(RdmaOp* op) noexcept;
    RdmaOp* find_op(std::uint32_t index, std::uint32_t generation, Rank peer) noexcept;
    Status native_flush(RdmaOp* op) noexcept;
    static uct_ep_h native_ep(const RdmaOp* op) noexcept;
    static void native_done_cb(uct_completion_t* comp) noexcept;
    void mark_done(RdmaOp* op) noexcept;

    UctModule& module_;
    UctSender& sender_;
    UctOneSided& one_sided_;
    const log::Stream& out_;
    std::size_t chunk_ = 0;
    Pool<RdmaOp> ops_;
    FifoQueue<RdmaOp> waiting_ops_;  // operations with pieces left to send
    RdmaOp* done_head_ = nullptr;    // completed by UCT, reported after its progress
    FifoQueue<RdmaOp> flushes_;      // puts whose flush found no resources
    std::size_t ops_pending_ = 0;
};

}  // namespace transit::uct
