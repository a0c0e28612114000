// The full FIFO of a uct module: a message UCT had no room for (the peer's
// FIFO full) waits in its endpoint's queue, tried again at the next send to
// that peer and at every progress pass; what went (or failed) waits here for
// its callback, run from the module's attend(), never inside a send.
//
// Owns: the list of endpoints whose queue waits, the list of fragments whose
// callback is due, and the counters of the closing line.  Borrows: the
// module (its attention flag; the callbacks name it), its sender (transmit),
// the module's fragment pool, and each endpoint's own queue
// (UctEndpoint::queued).
#pragma once

#include <cstddef>
#include <cstdint>

#include "transit/btl/module.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"

namespace transit::uct {

class UctModule;
class UctSender;

class UctSendQueue {
  public:
    UctSendQueue(UctModule& module, UctSender& sender, FragPool& frags) noexcept
        : module_(module), sender_(sender), frags_(frags) {}

    // f waits at the back of ep's queue (kept out of the send path: it is the
    // full FIFO's case).
    [[gnu::noinline]] Status enqueue(UctEndpoint* ep, UctFrag* f, btl::Tag tag) noexcept;
    // Sends ep's queue in order until UCT has no room; true when it is empty.
    bool send_queued(UctEndpoint& ep) noexcept;
    // From attend(): every endpoint's queue tried once; then the callbacks due.
    int retry() noexcept;
    int finish() noexcept;
    // The endpoint goes (or its peer failed): what waits ends with `status`.
    void drop(UctEndpoint& ep, Status status) noexcept;
    // finalize: what is due goes back to the pool without callbacks.
    void discard_done() noexcept;

    bool pending() const noexcept { return frags_queued_ > 0 || !done_frags_.empty(); }
    std::size_t queued() const noexcept { return frags_queued_; }
    bool done_due() const noexcept { return !done_frags_.empty(); }
    std::uint64_t sends_queued() const noexcept { return sends_queued_; }
    std::uint64_t queue_retries() const noexcept { return queue_retries_; }

  private:
    UctModule& module_;
    UctSender& sender_;
    FragPool& frags_;
    FifoQueue<UctFrag> done_frags_;       // queued sends that went or failed: callbacks due
    std::size_t frags_queued_ = 0;        // in the endpoints' queues, all together
    std::uint64_t sends_queued_ = 0;      // descriptors that waited for the FIFO (closing line)
    std::uint64_t queue_retries_ = 0;     // tries of a queue's head that found no room
    UctEndpoint* waiting_eps_ = nullptr;  // endpoints whose queue is not empty
};

}  // namespace transit::uct
