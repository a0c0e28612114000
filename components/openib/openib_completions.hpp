// The RC completion queues of an openib module.  On the send queue's: a send
// or an RDMA operation is done, its send slot free again.  On the receive
// queue's: a fragment arrived, whose header is checked against the sender's
// credits before anything else; a credit-only fragment returns credits, an
// atomic request is performed and answered (or waits in its endpoint while
// no send fragment is free), an atomic reply ends an emulated atomic, and
// everything else goes to the active-message table.
//
// Owns nothing but the polling.  Borrows from the module its endpoints (by
// queue pair number), queues, fragments and atomics, and its delivery to the
// active-message table (Module::dispatch).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <span>

#include "openib_frag.hpp"
#include "openib_wire.hpp"

namespace transit::openib {

class Module;

class Completions {
  public:
    explicit Completions(Module& module) noexcept : module_(module) {}
    Completions(const Completions&) = delete;
    Completions& operator=(const Completions&) = delete;

    // Each handles a batch of completions; how many.
    int poll_sends() noexcept;
    int poll_receives() noexcept;
    // Performs a peer's atomic request and queues the answer: false when no
    // fragment is free for the answer (the request waits, nothing was done).
    bool answer_atomic(Endpoint& ep, RecvFrag* r) noexcept;
    // Ends a send fragment with s: its callback, and back to the pool when
    // the module owns it.
    void complete_send(SendFrag* f, Status s) noexcept;

  private:
    void handle_receive(const ibv_wc& wc) noexcept;
    void release_receive(Endpoint& ep, RecvFrag* r) noexcept;
    bool deliver(Endpoint& ep, const wire::FragHeader& h,
                 std::span<const std::byte> payload) noexcept;

    Module& module_;
};

}  // namespace transit::openib
