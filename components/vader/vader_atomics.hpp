// btl::Atomics of a vader module, both sides.  The origin performs an atomic
// itself with a CPU atomic when the target lies in the peer's mem_alloc pages
// (mapped here too, so coherent), and otherwise sends an atomic fragment; the
// target performs that with a CPU atomic on its own memory and returns the
// fragment with the result, which completes the origin's operation.
//
// Owns nothing but the protocol.  Borrows from the module its fragments (the
// free list, VaderModule::take_frag and push) and its error report
// (VaderModule::report_peer_error).
#pragma once

#include <cstdint>

#include "components/vader/vader_frag.hpp"
#include "components/vader/vader_layout.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/free_list.hpp"

namespace transit::vader {

class VaderEndpoint;
class VaderModule;

class VaderAtomics final : public btl::Atomics {
  public:
    VaderAtomics(VaderModule& module, btl::util::FreeList<Frag>& frags) noexcept
        : module_(module), frags_(frags) {}
    VaderAtomics(const VaderAtomics&) = delete;
    VaderAtomics& operator=(const VaderAtomics&) = delete;

    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    // Some atomic fragment of ours is in flight to `endpoint` (nullptr: to any
    // peer), not counting orphans (their user saw them end): flush waits.
    bool in_flight(const btl::Endpoint* endpoint) const noexcept;

    // --- the target, for VaderModule::receive ---------------------------------------
    // Performs a peer's atomic fragment on our memory; the result and status
    // go back in its header.
    void perform(VaderEndpoint* ep, FragHeader& h) noexcept;

    // --- the origin, for VaderModule::complete ----------------------------------------
    // The peer returned our atomic fragment (or the operation ended with
    // `status`): the fetched value goes to the caller's buffer, the callback
    // runs, the fragment goes back to the list.
    void complete(Frag* f, Status status) noexcept;

  private:
    Status start(const btl::AtomicRequest& req, AtomicKind kind) noexcept;

    VaderModule& module_;
    btl::util::FreeList<Frag>& frags_;
};

}  // namespace transit::vader
