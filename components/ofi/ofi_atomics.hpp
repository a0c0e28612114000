// btl::Atomics of an ofi module: libfabric atomics for the operations the
// provider reports through fi_query_atomic.
//
// Owns: what the provider offers, per operation and width.  Borrows: the
// module's OfiFabric (domain, endpoint, attributes), the module for its
// endpoint check, and its OfiOneSided, through which the atomics are issued
// (its records, its access check, its count of operations in flight), so its
// flush covers them.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "ofi_frag.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::ofi {

class OfiModule;
class OfiOneSided;
struct OfiFabric;

class OfiAtomics final : public btl::Atomics {
  public:
    OfiAtomics(OfiModule& module, OfiFabric& fabric, OfiOneSided& one_sided) noexcept
        : m_(module), f_(fabric), one_sided_(one_sided) {}

    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    // Asks the provider which atomics it offers (the fabric's domain is open).
    void query();

  private:
    // Which libfabric atomics the provider offers, per Transit op.
    struct AtomicCaps {
        bool plain = false;
        bool fetch = false;
    };
    static constexpr std::size_t op_slots = 10;

    ssize_t post_atomic(OfiRdma* rec, std::uint64_t target, std::uint64_t key, fi_datatype dt,
                        fi_op op, bool can_fetch) noexcept;
    Status check_atomic_target(const btl::AtomicRequest& req, PackedHandle& packed) const noexcept;
    Status atomic_common(const btl::AtomicRequest& req, bool fetch) noexcept;

    OfiModule& m_;
    OfiFabric& f_;
    OfiOneSided& one_sided_;
    std::array<AtomicCaps, op_slots> atomics64_{};
    std::array<AtomicCaps, op_slots> atomics32_{};
    bool cswap64_ = false;
    bool cswap32_ = false;
};

}  // namespace transit::ofi
