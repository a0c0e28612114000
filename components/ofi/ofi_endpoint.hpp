// Per-peer state of an ofi module: the peer's index in the address vector, and
// what is known of its leaving.
#pragma once

#include <rdma/fabric.h>

#include "transit/btl/module.hpp"
#include "transit/btl/util/process_watch.hpp"

namespace transit::ofi {

class OfiEndpoint final : public btl::Endpoint {
  public:
    OfiEndpoint(Rank peer, fi_addr_t address) : btl::Endpoint(peer), address(address) {}

    const fi_addr_t address;
    btl::util::ProcessWatch process;  // a peer on this node, watched for exit (or nothing)
    bool failed = false;              // lost: sends and one-sided operations fail at once
    bool goodbye = false;             // it said it is leaving: its exit is no failure
};

}  // namespace transit::ofi
