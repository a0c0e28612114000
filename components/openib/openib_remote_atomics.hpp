// btl::Atomics of an openib module, both sides.  The origin posts verbs
// fetch-add and compare-swap when the device's atomics are coherent with the
// CPU's, and otherwise (every other op, every 32-bit op, devices without
// IBV_ATOMIC_GLOB) sends an atomic_request fragment; the target performs such
// a request with CPU atomics on a registration of its own, so the two kinds
// never mix on one location incoherently.
//
// Owns the choice of path and the scratch word non-fetching device atomics
// write their old value into.  Borrows from the module its RDMA fragments
// (Module::take_rdma_frag, start_rdma, rdma_frag, complete_rdma) and, on the
// target, the registrations of its OneSided.
#pragma once

#include <cstdint>

#include "openib_frag.hpp"
#include "openib_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::openib {

class Module;
class OneSided;

// How atomics run on a port: a mix is only safe when device atomics are
// coherent with the target CPU's.
enum class AtomicPath : std::uint8_t { hybrid, hardware_only, emulated };

class RemoteAtomics final : public btl::Atomics {
  public:
    RemoteAtomics(Module& module, const OneSided& one_sided) noexcept
        : module_(module), one_sided_(one_sided) {}

    // The path the module chose at setup, and the registered word (with its
    // lkey) that non-fetching device atomics write to.
    void open(AtomicPath path, std::byte* scratch, std::uint32_t scratch_lkey) noexcept {
        path_ = path;
        scratch_ = scratch;
        scratch_lkey_ = scratch_lkey;
    }
    AtomicPath path() const noexcept { return path_; }
    // Whether a completed operation's local address is the scratch word (no
    // caller's buffer to report).
    bool is_scratch(const void* p) const noexcept { return p == scratch_; }

    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    // The target: performs a peer's request on a registration of ours that
    // allows remote atomics and covers the word, and fills the reply.
    void perform(Endpoint& ep, const wire::AtomicRequest& r,
                 wire::AtomicReply& reply) const noexcept;
    // The origin: a peer's reply to one of our emulated atomics.
    void finish(Endpoint& ep, const wire::AtomicReply& r) noexcept;

  private:
    Status start(const btl::AtomicRequest& req, wire::AtomicKind kind) noexcept;

    Module& module_;
    const OneSided& one_sided_;
    AtomicPath path_ = AtomicPath::emulated;
    std::byte* scratch_ = nullptr;
    std::uint32_t scratch_lkey_ = 0;
};

}  // namespace transit::openib
