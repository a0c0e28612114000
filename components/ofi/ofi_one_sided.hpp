// btl::Rdma of an ofi module: put and get are fi_write/fi_read, registrations
// go through the module's registration cache, flush waits for the module's
// count of operations in flight.  The module owns this object and keeps the
// state it works on (endpoint, record pool, cache, counts): it completes the
// operations from its completion queue.  OfiAtomics issues through
// start_rdma and issued here, so a flush covers the atomics too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "ofi_frag.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::ofi {

class OfiModule;

class OfiOneSided final : public btl::Rdma {
  public:
    explicit OfiOneSided(OfiModule& module) noexcept : m_(module) {}

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;

    // --- for OfiAtomics -----------------------------------------------------------
    void* local_desc(btl::RegistrationHandle* handle, const void* address,
                     std::size_t size) noexcept;
    Status check_remote(const btl::RegistrationHandle* handle, std::uint64_t address,
                        std::size_t size, std::uint32_t access,
                        PackedHandle& packed) const noexcept;
    OfiRdma* start_rdma(btl::Endpoint* endpoint, void* local_address,
                        btl::RegistrationHandle* local_handle, btl::RdmaCompletionFn cbfunc,
                        void* cbcontext, void* cbdata) noexcept;
    // Counts an operation the provider took (rc 0) as in flight, or gives its
    // record back and says why not.
    Status issued(OfiRdma* op, ssize_t rc) noexcept;

  private:
    // put (write) and get (!write): one path, the direction picks the access
    // checked, the size limit and the libfabric call.
    Status transfer(const btl::RdmaRequest& req, bool write) noexcept;

    OfiModule& m_;
};

}  // namespace transit::ofi
