// btl::Rdma of a uct module: put, get, registration and flush.  A transfer
// goes by UCT's own put_zcopy/get_zcopy where the transport's device checks
// the remote key (rc, dc: native_refusal in uct_rdma_policy.hpp), with the
// remote key packed into the registration handle; everything else by active
// messages the target performs (UctOps, UctTarget).
//
// Owns: the native path's choice and its RDMA interface (the module's own,
// or a second one, cma, opened on the same worker and closed here), the
// remote key's size and the native counters.  Borrows: the module (endpoint
// checks, error handling, progress for flush), its UctOps (the operation
// slots) and UctAtomics (mem_alloc memory, whose registrations carry the
// interface's own key too), the registrations every module of the component
// shares, and the module's resource, configuration and log stream.
#pragma once

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transit/btl/module.hpp"
#include "transit/log.hpp"
#include "uct_config.hpp"
#include "uct_deleters.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"
#include "uct_regions.hpp"
#include "uct_resource.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctOps;
class UctAtomics;

class UctOneSided final : public btl::Rdma {
  public:
    UctOneSided(UctModule& module, UctOps& ops, UctAtomics& atomics, Regions& regions,
                const Resource& resource, const UctConfig& config, const log::Stream& out) noexcept
        : module_(module),
          ops_(ops),
          atomics_(atomics),
          regions_(regions),
          resource_(resource),
          config_(config),
          out_(out) {}

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    void* mem_alloc(std::size_t size) noexcept override;
    bool mem_free(void* p) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;

    // Native put/get on the module's interface, when the transport allows it.
    // Declined (with the reason at verbose level) when it does not; the
    // active-message path then serves everything.
    void open(uct_md_h md, uct_iface_h iface, const uct_iface_attr_t& iface_attr);
    // The peer's RDMA endpoint, from the addresses after its AddressHeader.
    void connect(UctEndpoint* e, const AddressHeader& h, const std::byte* addresses);
    // Before the memory domain closes: the handles stay (the active-message
    // path does not need the memory domain's registration).
    void release_registrations() noexcept;
    // The RDMA interface goes, before the module's interfaces and worker.
    void close() noexcept;
    // cma's own progress is on the worker only while an operation is in flight.
    void set_cma_progress(bool on) noexcept;

    bool native_put() const noexcept { return native_put_; }
    bool native_get() const noexcept { return native_get_; }
    std::size_t native_min() const noexcept { return native_min_; }
    // What the RDMA memory domain's key adds to a registration handle.
    std::size_t handle_key_size() const noexcept;
    std::size_t rkey_len() const noexcept { return rkey_len_; }
    // The second interface (cma) whose address the module publishes, or nullptr.
    uct_iface_h second_iface() const noexcept { return cma_iface_.get(); }
    const uct_iface_attr_t& rdma_attr() const noexcept { return rdma_attr_; }
    const std::string& rdma_name() const noexcept { return rdma_name_; }
    std::uint64_t native_ops() const noexcept { return native_ops_; }
    std::uint64_t fallbacks() const noexcept { return native_fallbacks_; }

  private:
    // Put and get differ only in the size limit, the access the remote
    // registration must grant, and which way the data goes.
    Status transfer(OpKind kind, const btl::RdmaRequest& req) noexcept;
    // not_available: this one goes by active messages.
    Status native_transfer(OpKind kind, const btl::RdmaRequest& req, std::uint64_t key) noexcept;
    bool rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle, std::uint64_t key,
                  uct_rkey_t& rkey) noexcept;
    bool local_memh(const btl::RegistrationHandle* handle, uct_mem_h& memh) const noexcept;
    void register_native(Registration& r, void* base, std::size_t size) noexcept;

    UctModule& module_;
    UctOps& ops_;
    UctAtomics& atomics_;
    Regions& regions_;
    const Resource& resource_;
    const UctConfig& config_;
    const log::Stream& out_;

    // The RDMA interface: a second one (cma) opened on the same worker, owned
    // here, or the module's own; rdma_md_/rdma_iface_ point at whichever.
    std::unique_ptr<uct_md, MdDeleter> cma_md_;
    std::unique_ptr<uct_iface, IfaceDeleter> cma_iface_;
    bool cma_progress_ = false;    // cma's progress is on the worker (operations in flight)
    uct_iface_h iface_ = nullptr;  // the module's own interface
    uct_md_h rdma_md_ = nullptr;
    uct_iface_h rdma_iface_ = nullptr;
    uct_component_h rdma_component_ = nullptr;
    uct_iface_attr_t rdma_attr_{};
    std::string rdma_name_;          // "cma/memory"
    bool native_put_ = false;        // put by UCT's put_zcopy
    bool native_get_ = false;        // get by UCT's get_zcopy
    bool rdma_need_memh_ = false;    // the local buffer needs its own registration
    std::size_t rkey_len_ = 0;       // the memory domain's packed remote key
    std::uint32_t rdma_md_tag_ = 0;  // md_tag() of the RDMA memory domain's name
    std::size_t native_min_ = 0;     // smaller transfers go by active messages
    std::uint64_t native_ops_ = 0;
    std::uint64_t native_fallbacks_ = 0;
};

}  // namespace transit::uct
