// The module's side of its endpoints' RC send queues: posting a send
// fragment, an RDMA operation, an emulated atomic's request or a credit-only
// message, each only with what it needs - a credit where the peer's receive
// queue takes a buffer, a send slot of the queue pair, room in the module's
// send completion queue - and draining what waited in an endpoint's queue.
//
// Owns the count of free send completion queue entries.  Borrows from the
// module its send fragments (an emulated atomic travels in one) and its log.
#pragma once

#include <cstdint>

#include "openib_frag.hpp"

namespace transit::openib {

class Module;

class SendQueue {
  public:
    explicit SendQueue(Module& module) noexcept : module_(module) {}
    SendQueue(const SendQueue&) = delete;
    SendQueue& operator=(const SendQueue&) = delete;

    // The send completion queue's size.
    void open(std::uint32_t cq_entries) noexcept { cq_free_ = cq_entries; }

    // Posts f to ep's queue pair: false when a credit, a send slot or room
    // in the completion queue is short (f waits), or when the post failed
    // (the endpoint has failed then).
    bool post(Endpoint& ep, Frag* f) noexcept;
    // Posts what waits in ep's queue, in order, then a credit message if one
    // is due.
    void drain(Endpoint& ep) noexcept;
    // A work request of ep's is done (it completed, or its post failed): its
    // send slot and completion entry are free again.
    void release(Endpoint& ep) noexcept;

  private:
    bool post_send(Endpoint& ep, SendFrag* f) noexcept;
    bool post_rdma(Endpoint& ep, RdmaFrag* f) noexcept;
    bool post_credit_message(Endpoint& ep) noexcept;
    // A send slot of ep's queue pair and a completion entry, or false.
    bool reserve(Endpoint& ep) noexcept;

    Module& module_;
    std::uint32_t cq_free_ = 0;
};

}  // namespace transit::openib
