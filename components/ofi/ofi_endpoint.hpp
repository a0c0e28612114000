// Per-peer state of an ofi module: the peer's index in the address vector,
// what is known of its leaving, and for a peer outside the job the channels
// each side names the other by.
#pragma once

#include <rdma/fabric.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_link.hpp"
#include "transit/btl/util/process_watch.hpp"

namespace transit::ofi {

class OfiEndpoint final : public btl::Endpoint {
  public:
    OfiEndpoint(Rank peer, fi_addr_t address) : btl::Endpoint(peer), address(address) {}

    const fi_addr_t address;
    btl::util::ProcessWatch process;  // a peer on this node, watched for exit (or nothing)
    bool failed = false;              // lost: sends and one-sided operations fail at once
    bool goodbye = false;             // it said it is leaving: its exit is no failure

    // A peer outside the job (a server we joined, a client that joined us).
    bool dynamic = false;
    std::uint32_t channel_in = 0;   // the source of its messages to us
    std::uint32_t channel_out = 0;  // the source of ours to it
    std::size_t rdma_live = 0;      // its one-sided operations in flight, not abandoned
    // A server's joining until it welcomes our join (due by its deadline); a
    // client's open from its admission (the module's OutsideLinks changes it).
    btl::util::OutsideLink outside;
};

}  // namespace transit::ofi
