// The completion queue of an ofi module: poll reads it and ends the sends,
// receives and one-sided operations it names (a delivery goes to the active
// message table, its buffer is reposted).  The module owns this object; the
// pools, buffers and counts it works on stay the module's.
#pragma once

#include <cstddef>

#include "ofi_frag.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::ofi {

class OfiModule;

class OfiCompletions {
  public:
    explicit OfiCompletions(OfiModule& module) noexcept : m_(module) {}

    int poll() noexcept;
    void call_back(const OfiRdma& op, Status status) noexcept;

  private:
    void complete(OpContext* ctx, std::size_t len) noexcept;
    void complete_error() noexcept;
    void on_receive(OfiRecv* r, std::size_t len) noexcept;
    void on_control(Received what, const WireHeader& h) noexcept;
    void repost(OfiRecv* r) noexcept;
    void retry_reposts() noexcept;
    bool send_finished(OfiFrag* f) noexcept;
    bool retire_rdma(OfiRdma* op) noexcept;
    void send_done(OfiFrag* f, Status status) noexcept;

    OfiModule& m_;
};

}  // namespace transit::ofi
