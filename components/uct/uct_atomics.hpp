// btl::Atomics of a uct module.  An atomic is performed by the target through
// an active message (UctOps, UctTarget), or by UCT's own atomics where the
// target's device checks the key: posix and sysv offer them (CPU atomics on a
// peer's shared memory) only on memory their memory domain allocated, which
// mem_alloc hands out; its registrations carry the interface's own remote
// key beside the RDMA one.  Operations UCT lacks (or gets wrong) keep going
// by active messages.
//
// Owns: the native atomics' choice, the memory mem_alloc handed out (freed by
// free_allocations before the memory domain closes) and the native counters.
// Borrows: the module (endpoint checks, error handling), its UctOps (the
// operation slots), the module's memory domain and interface attributes, and
// its resource, configuration and log stream.
#pragma once

#include <uct/api/uct.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transit/btl/module.hpp"
#include "transit/log.hpp"
#include "uct_config.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"
#include "uct_regions.hpp"
#include "uct_resource.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctOps;

class UctAtomics final : public btl::Atomics {
  public:
    UctAtomics(UctModule& module, UctOps& ops, const Resource& resource, const UctConfig& config,
               const log::Stream& out) noexcept
        : module_(module), ops_(ops), resource_(resource), config_(config), out_(out) {}

    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    // Native atomics on mem_alloc memory, when the interface offers them.
    // `rdma_rkey_len`: the RDMA key a handle carries already.
    void open(uct_md_h md, const uct_iface_attr_t& iface_attr, std::size_t rdma_rkey_len);
    void* mem_alloc(std::size_t size) noexcept;
    bool mem_free(void* p) noexcept;
    void free_allocations() noexcept;
    // mem_alloc memory: the interface's own key appended to the registration's handle.
    void append_key(Registration& r, void* base, std::size_t size) noexcept;

    bool native() const noexcept { return native_amo_; }
    // What the interface's key adds to a registration handle.
    std::size_t handle_key_size() const noexcept;
    std::uint64_t native_amos() const noexcept { return native_amos_; }
    std::uint64_t fallbacks() const noexcept { return native_fallbacks_; }

  private:
    Status atomic_common(const btl::AtomicRequest& req, AtomicMode mode) noexcept;
    // `key`: the remote registration's, from its handle.
    Status native_atomic(const btl::AtomicRequest& req, std::uint64_t key,
                         AtomicMode mode) noexcept;
    bool amo_rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle, std::uint64_t key,
                      uct_rkey_t& rkey) noexcept;
    const uct_allocated_memory_t* allocation_of(const void* base, std::size_t size) const noexcept;

    UctModule& module_;
    UctOps& ops_;
    const Resource& resource_;
    const UctConfig& config_;
    const log::Stream& out_;
    uct_md_h md_ = nullptr;
    const uct_iface_attr_t* iface_attr_ = nullptr;
    bool native_amo_ = false;                          // UCT atomics on mem_alloc memory
    std::uint32_t amo_md_tag_ = 0;                     // md_tag() of the interface's memory domain
    std::size_t amo_rkey_len_ = 0;                     // its packed remote key
    std::vector<uct_allocated_memory_t> allocations_;  // mem_alloc's, from the memory domain
    std::uint64_t native_amos_ = 0;
    std::uint64_t native_fallbacks_ = 0;
};

}  // namespace transit::uct
