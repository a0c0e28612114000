// btl::Atomics of a tcp module.  The three atomics are one request frame
// that the target performs on its registered memory; they travel through the
// module's TcpRdma (its op table, its access check and its replies), so its
// flush covers them.
#pragma once

#include "tcp_endpoint.hpp"
#include "tcp_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::tcp {

class TcpComponent;
class TcpModule;
class TcpRdma;

class TcpAtomics final : public btl::Atomics {
  public:
    TcpAtomics(TcpModule& module, TcpComponent& tcp, TcpRdma& rdma) noexcept
        : module_(module), tcp_(tcp), rdma_(rdma) {}

    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    // The target: performs the request at the head of l's receive buffer.
    void handle_atomic(Link& l) noexcept;

  private:
    // `kind` says what the target does and whether an old value comes back.
    Status atomic(const btl::AtomicRequest& req, wire::RdmaKind kind) noexcept;

    TcpModule& module_;
    TcpComponent& tcp_;
    TcpRdma& rdma_;
};

}  // namespace transit::tcp
