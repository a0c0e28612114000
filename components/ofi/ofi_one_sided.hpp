// btl::Rdma of an ofi module: put and get are fi_write/fi_read, registrations
// go through the registration cache, flush waits for the count of operations
// in flight.
//
// Owns: the records of one-sided operations (a bounded pool, registered once
// for FI_MR_LOCAL providers), the counts of those in flight (all, live ones,
// live ones per rank) and the table of registrations handed out, which carry
// the provider's id.  Borrows: the module's OfiFabric (endpoint, cache,
// attributes), its completion queue (flush polls it, which ends operations
// through complete and fail), and the module for its endpoint check and
// name.  OfiAtomics issues through start_rdma and issued, so a flush covers
// the atomics too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ofi_frag.hpp"
#include "ofi_rcache.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/registration_table.hpp"
#include "transit/log.hpp"

namespace transit::ofi {

class OfiCompletions;
class OfiEndpoint;
class OfiModule;
struct OfiFabric;

class OfiOneSided final : public btl::Rdma {
  public:
    // provider_id: the provider's, in the handles this object packs.
    OfiOneSided(OfiModule& module, OfiFabric& fabric, OfiCompletions& completions,
                std::uint64_t provider_id, const log::Stream& out)
        : m_(module), f_(fabric), completions_(completions), provider_id_(provider_id), out_(out) {}

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;

    // --- for the module -------------------------------------------------------------
    // Fills the record pool (max_ops records) and the per-rank counts (ranks);
    // throws std::runtime_error when the pool cannot be registered.
    void setup(std::size_t max_ops, std::size_t ranks);
    // Operations the provider holds (abandoned ones too).
    std::size_t pending() const noexcept { return pending_; }
    std::size_t registrations() const noexcept { return registrations_.live_count(); }
    void clear_registrations() noexcept { registrations_.clear(); }

    // --- for OfiCompletions -----------------------------------------------------------
    // The provider completed `op`: the caller hears of it unless its peer was lost before.
    void complete(OfiRdma* op) noexcept;
    // The provider failed `op` (error `err`, described by `why`).
    void fail(OfiRdma* op, int err, const char* why) noexcept;

    // --- for OfiPeerWatch -------------------------------------------------------------
    // Operations to ep in flight and not abandoned.
    std::size_t in_flight_to(const OfiEndpoint& ep) const noexcept;
    // Ends with `status` every operation to `peer` in flight (see OfiPeerWatch).
    void abandon(Rank peer, Status status) noexcept;

    // --- for OfiAtomics -----------------------------------------------------------
    void* local_desc(btl::RegistrationHandle* handle, const void* address,
                     std::size_t size) noexcept;
    // The records' registration, for operands and compare values (FI_MR_LOCAL).
    void* record_desc() const noexcept { return record_desc_; }
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
    // An operation the provider completed (or failed): its temporary
    // registration and record go back.  False when its peer was lost before.
    bool retire(OfiRdma* op) noexcept;
    void call_back(const OfiRdma& op, Status status) noexcept;

    std::size_t& live_to(OfiEndpoint& ep) noexcept;
    // A job rank's count outlives its endpoint; a peer outside the job's
    // operations are abandoned before its endpoint goes.
    std::size_t& live_to(const OfiRdma& op) noexcept;
    void end_live(const OfiRdma& op) noexcept {
        --live_;
        --live_to(op);
    }

    OfiModule& m_;
    OfiFabric& f_;
    OfiCompletions& completions_;
    std::uint64_t provider_id_;
    const log::Stream& out_;

    Pool<OfiRdma> records_;
    void* record_desc_ = nullptr;
    std::size_t pending_ = 0;  // one-sided operations the provider holds
    // Of those, the ones not abandoned: all, and per rank (outliving the
    // endpoint).  flush waits for these alone.
    std::size_t live_ = 0;
    std::vector<std::size_t> live_to_rank_;
    btl::util::RegistrationTable<OfiRegistration> registrations_;
};

}  // namespace transit::ofi
