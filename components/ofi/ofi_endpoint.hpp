// Per-peer state of an ofi module: the peer's index in the address vector.
#pragma once

#include <rdma/fabric.h>

#include "transit/btl/module.hpp"

namespace transit::ofi {

class OfiEndpoint final : public btl::Endpoint {
  public:
    OfiEndpoint(Rank peer, fi_addr_t address) : btl::Endpoint(peer), address(address) {}

    const fi_addr_t address;
};

}  // namespace transit::ofi
