// What an ofi module opens and the objects it owns share: the libfabric
// objects (fabric, domain, completion queue, address vector, endpoint), their
// attributes, the buffers handed to the endpoint (send fragments, receive
// buffers) and the registration cache.  The module owns one, opens it
// (OfiModule::open_objects, setup_buffers) and closes it; OfiOneSided,
// OfiAtomics, OfiCompletions, OfiPeerWatch and OfiOutside borrow it by
// reference, post on its endpoint and take and give back its fragments.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ofi_frag.hpp"
#include "ofi_library.hpp"
#include "ofi_listed_region.hpp"
#include "ofi_rcache.hpp"
#include "ofi_wire.hpp"

namespace transit::ofi {

struct InfoDeleter {
    void operator()(fi_info* i) const noexcept { libfabric().freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

struct OfiFabric {
    // Declaration order is teardown order in reverse: the endpoint closes
    // before the buffers it receives into, registrations before the endpoint.
    InfoPtr info;
    FidPtr<fid_fabric> fabric;
    FidPtr<fid_domain> domain;
    FidPtr<fid_cq> cq;
    FidPtr<fid_av> av;
    FragPool eager;
    FragPool large;
    std::unique_ptr<std::byte[]> recv_storage;
    std::vector<OfiRecv> recvs;
    ListedRegion region;  // a node-local provider's region, forgotten once ep closed
    FidPtr<fid_ep> ep;
    Rcache rcache;
    std::vector<CacheEntry*> pool_registrations;  // the buffers' (FI_MR_LOCAL providers)

    std::vector<std::byte> address;                    // the endpoint's, through the modex
    AddressForm address_form = AddressForm::variable;  // from fi_info's addr_format
    bool node_local = false;                           // the provider reaches this node only
    std::size_t inject_limit = 0;
    std::uint64_t mr_mode = 0;
    bool virt_addr = false;
    bool local_mr = false;
    std::uint64_t delivery_complete = 0;  // flag for puts
    void* recv_desc = nullptr;            // local registrations (FI_MR_LOCAL providers)

    OfiFrag* take(std::size_t bytes) noexcept {
        return bytes <= eager.capacity() ? eager.get() : large.get();
    }
    void release(OfiFrag* f) noexcept {
        if (eager.owns(f))
            eager.put(f);
        else
            large.put(f);
    }
    std::uint64_t target_address(const PackedHandle& p, std::uint64_t target) const noexcept {
        return virt_addr ? target : target - p.mr_base;
    }
    // Registrations, endpoint, queues, domain, fabric, in that order (the
    // buffers stay: the module may still be asked to free a descriptor).
    void close() noexcept {
        pool_registrations.clear();
        rcache.clear();
        ep.reset();
        av.reset();
        cq.reset();
        domain.reset();
        fabric.reset();
    }
};

}  // namespace transit::ofi
