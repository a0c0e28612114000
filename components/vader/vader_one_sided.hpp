// btl::Rdma of a vader module: put and get as memcpy through the mapping of
// the peer's segment when the target lies in its mem_alloc pages, else as a
// CMA read or write of the peer's memory; the registrations peers check
// before each of them; and mem_alloc's pages.
//
// Owns the heap of mem_alloc's pages and the region table of registrations,
// both in the module's segment.  Borrows from the module its segment (the
// pages come and go through it), its configuration and log stream, the
// single-copy choice (`single_copy`: a field of the module, none from the
// first failed probe of a peer on: VaderModule::probe_single_copy), and for
// flush the module's atomics in flight (VaderAtomics::in_flight) and its
// progress (VaderProgressHook::flush_round).
#pragma once

#include <cstddef>
#include <cstdint>

#include "components/vader/vader_config.hpp"
#include "components/vader/vader_heap.hpp"
#include "components/vader/vader_layout.hpp"
#include "components/vader/vader_segment.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/region_table.hpp"
#include "transit/log.hpp"

namespace transit::vader {

class VaderAtomics;
class VaderProgressHook;

class VaderOneSided final : public btl::Rdma {
  public:
    VaderOneSided(const SingleCopy& single_copy, const VaderAtomics& atomics,
                  VaderProgressHook& progress_hook, SharedFile& segment, const Config& config,
                  const log::Stream& out) noexcept
        : single_copy_(single_copy),
          atomics_(atomics),
          progress_hook_(progress_hook),
          segment_(segment),
          config_(config),
          out_(out) {}
    VaderOneSided(const VaderOneSided&) = delete;
    VaderOneSided& operator=(const VaderOneSided&) = delete;

    // Lays out the heap and the region table in the segment just created.
    void format(const Layout& layout);

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;
    void* mem_alloc(std::size_t size) noexcept override;
    bool mem_free(void* p) noexcept override;

  private:
    const SingleCopy& single_copy_;
    const VaderAtomics& atomics_;
    VaderProgressHook& progress_hook_;  // flush_round
    SharedFile& segment_;
    const Config& config_;
    const log::Stream& out_;
    SegmentHeap heap_;          // mem_alloc's pages, after the fixed part of the segment
    btl::RegionTable regions_;  // registrations, in the segment for peers to check
};

}  // namespace transit::vader
