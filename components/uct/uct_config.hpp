// The parameters of a uct module (btl_uct_*), read by the component.
#pragma once

#include <cstddef>
#include <string>

#include "transit/btl/base_params.hpp"
#include "uct_rdma_policy.hpp"

namespace transit::uct {

// The base parameters' max_send_size 0: what the transport allows;
// exclusivity left at its default: from the device type; latency and
// bandwidth 0: from UCT's figures.
struct UctConfig : btl::BaseConfig {
    std::string transports;  // a selection, parsed at open
    std::size_t recv_ring = 256;
    std::size_t max_rdma_ops = 256;
    RdmaMode rdma = RdmaMode::automatic;
    std::size_t rdma_min_size = 0;  // 0: every size (where native is used)
    double join_timeout = 10;       // seconds a server has to answer a client's join
};

}  // namespace transit::uct
