// btl::Rdma of an openib module: put and get as RDMA WRITE and READ with the
// caller's registrations, and the registrations themselves (ibv_reg_mr behind
// the registration cache; each handle carries the rkey peers name it by).
//
// Owns the registration cache and the table of live handles.  Borrows from
// the module its RDMA fragments and their posting (Module::take_rdma_frag,
// Module::start_rdma), its limits, and its endpoints and progress for flush.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "openib_frag.hpp"
#include "openib_rcache.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/registration_table.hpp"

namespace transit::openib {

class Module;

class OneSided final : public btl::Rdma {
  public:
    explicit OneSided(Module& module) noexcept;
    ~OneSided();
    OneSided(const OneSided&) = delete;
    OneSided& operator=(const OneSided&) = delete;

    // Opens the registration cache on the device's protection domain
    // (max_unused, monitor: btl_openib_rcache_max_unused and _monitor).
    void open(ibv_pd* pd, std::size_t max_unused, bool monitor);

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;

    // The live registration a peer names by `rkey` (a peer's atomic request):
    // nullptr when no handle of ours holds one.
    const Registration* find(std::uint32_t rkey) const noexcept;
    // nullptr before open (for the module's dump).
    const RegistrationCache* cache() const noexcept { return rcache_.get(); }

  private:
    class Registrar;

    // put and get: `op` is RdmaOp::put or RdmaOp::get.
    Status transfer(const btl::RdmaRequest& req, RdmaOp op) noexcept;

    Module& module_;
    // The cache goes before the registrar whose deregister_region it calls.
    std::unique_ptr<Registrar> registrar_;
    std::unique_ptr<RegistrationCache> rcache_;
    // Peers name the memory by its rkey: the table's own key is unused.
    btl::util::RegistrationTable<Handle> handles_;
};

}  // namespace transit::openib
