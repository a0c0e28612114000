// A request of the pml: every send and receive, the user's and the pml's own
// (the target side of a large active message, the origin of one).  Sends and
// receives share one type and one pool: the request limit counts both, the
// failure sweep walks both, and the rdma mover serves both (gets for a
// receive, the split puts for a send).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "bml/r2.hpp"
#include "transit/btl/types.hpp"
#include "transit/transit.hpp"

namespace transit::pml {

struct Peer;

struct Req : Request {
    enum class Kind : std::uint8_t { send, recv };
    // Where a live request stands.  Completion itself is the Request's done
    // flag alone (set by complete, and while the request is free).
    enum class Stage : std::uint8_t {
        none,      // waiting for the peer (ack, fin, data)
        eager,     // its one fragment waits for room
        rndv_hdr,  // its rendezvous header waits for room
        frags,     // streaming (sender) or receiving fragments
        gets,      // the receiver's gets
        puts,      // the sender's half of a split
        fin_wait,  // the sender's half of a split is in: waiting for the fin
        ended,     // ended inside its own send: the sender completes it on return
    };

    Req() noexcept { set_done(); }  // free requests are never live (see Failure)

    Req* next = nullptr;  // on a List (posted receives, queued sends)
    Req* prev = nullptr;
    Req* next_free = nullptr;  // the pool's
    bool in_use = false;
    std::uint32_t slot = ~std::uint32_t{0};  // the pool's: what names it to peers
    std::uint32_t generation = 0;
    Kind kind = Kind::send;
    Stage stage = Stage::none;
    bool internal = false;  // no user handle: released by the pml on completion
    bool matched = false;
    bool posted = false;  // on a posted-receive list
    bool is_am = false;
    bool queued = false;   // on the Sender's pending sends or the Receiver's pending gets
    bool issuing = false;  // inside pump_frags / issue_rdma: callbacks must not complete it
    Peer* peer = nullptr;  // for sends; the matched peer for receives
    std::uint32_t tag = 0;
    std::uint32_t seq = 0;
    std::uint64_t post_seq = 0;

    // receive side
    Rank src_filter = any_rank;
    std::uint32_t tag_filter = 0;
    void* buf = nullptr;  // contiguous buffer, or null when iov is used
    const iovec* iov = nullptr;
    std::size_t iov_count = 0;
    std::size_t capacity = 0;
    std::size_t received = 0;  // bytes of the message accounted for (placed or dropped)
    // The message's length; for a receive, the bytes it completes at (fewer
    // when the sender gave up: frag_abort).
    std::size_t total = 0;
    std::uint64_t remote_req = 0;  // the peer's handle of its request (sreq or rreq)
    std::uint64_t remote_addr = 0;
    // Rdma in flight: gets (receiver) or the split puts (sender) of [rdma_offset, rdma_end).
    std::uint32_t rdma_pending = 0;
    std::size_t rdma_offset = 0;
    std::size_t rdma_end = 0;
    // A split rendezvous: the receiver still waits for the sender's half
    // (split_wait) and has its own half in (own_done).
    bool split_wait = false;
    bool own_done = false;
    // A split in which the receiver gets nothing (the sender puts it all): the
    // receiver never reads the sender's buffer, so the sender ends with its
    // split_fin and the receiver sends no fin.
    bool put_all = false;
    bml::BtlRef rdma{};
    btl::RegistrationHandle* local_handle = nullptr;
    btl::Module* handle_module = nullptr;
    std::uint16_t remote_handle_len = 0;
    std::uint32_t rdma_component = 0;
    std::uint32_t am_header_len = 0;  // sender of an am: user header after the handle bytes
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> remote_handle{};

    // active messages
    AmCompletionFn am_done = nullptr;
    void* am_user = nullptr;
    CounterRef am_target_counter = 0;  // a handle of the target's counter table
    // Sender: our token of the completion counter (Peer::owed); target: the
    // origin's, echoed back in am_done.
    std::uint64_t am_completion_token = 0;
    Counter* origin_counter = nullptr;
    std::uint32_t am_handler = 0;

    // send side
    btl::Convertor conv;
    std::uint32_t frags_out = 0;
    std::size_t frag_bytes_sent = 0;  // payload of the fragments the btls took

    // A recycled request, as new.
    void reset(Kind k, void* user_data) noexcept {
        kind = k;
        stage = Stage::none;
        user = user_data;
        peer = nullptr;
        internal = matched = posted = is_am = queued = issuing = false;
        received = total = 0;
        frags_out = rdma_pending = 0;
        frag_bytes_sent = 0;
        split_wait = own_done = put_all = false;
        peer = nullptr;  // a stale one may name a dynamic peer's record since erased
        local_handle = nullptr;
        handle_module = nullptr;
        origin_counter = nullptr;
        am_done = nullptr;
        am_target_counter = 0;
        am_completion_token = 0;
        am_header_len = 0;
        remote_handle_len = 0;
        remote_addr = 0;
        rdma_component = 0;
        status_ = RequestStatus{};
        reset_done();
    }
    // A rendezvous moving its data by rdma over a module that also sends: its
    // header, fin and split messages go the same way, so that a transport
    // carrying nothing else stays idle (its polling paced) while bulk data
    // streams.  Sequence numbers keep the matching order across modules.
    // Only a message of `bytes` that fits the module's eager frames goes so:
    // a transport with small frames and rdma must not leave one unsendable.
    const bml::BtlRef* data_path(std::size_t bytes) const noexcept {
        if (remote_addr == 0 || !rdma.module) return nullptr;
        const auto& a = rdma.module->attributes();
        return (a.flags & btl::flags::send) && bytes <= a.eager_limit ? &rdma : nullptr;
    }
    void set_done() noexcept { done_.store(true, std::memory_order_release); }
    void reset_done() noexcept { done_.store(false, std::memory_order_relaxed); }
    RequestStatus& st() noexcept { return status_; }
};

}  // namespace transit::pml
