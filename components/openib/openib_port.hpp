// One active port of a device, as the module and its endpoints' queue pairs
// use it: the device, the port's attributes, the address peers connect to,
// the settings, and the completion queues and shared receive queue that all
// of the module's RC queue pairs share.  The module fills it in setup.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>

#include "openib_verbs.hpp"
#include "openib_wire.hpp"

namespace transit::openib {

class Device;
struct Config;

struct Port {
    Port(Device& device_, std::uint8_t number_, const ibv_port_attr& attr_,
         const Config& config_) noexcept
        : device(device_), number(number_), attr(attr_), config(config_) {}

    Device& device;
    const std::uint8_t number;
    const ibv_port_attr attr;
    const Config& config;  // the module's, clamped to the device's limits at setup
    wire::PortAddress address{};
    std::uint8_t gid_index = 0;
    verbs::CompletionQueue send_cq;
    verbs::CompletionQueue recv_cq;
    verbs::SharedReceiveQueue srq;
    std::uint32_t psn_state = 1;  // seeded at setup from the random device

    bool roce() const noexcept { return address.link == wire::LinkLayer::ethernet; }
    // A starting packet sequence number for a new queue pair: distinct and
    // hard to predict.
    std::uint32_t next_psn() noexcept;
    // The address handle attributes of a peer's port (`remote`) at `lid`/`gid`:
    // routed by GID over RoCE and across InfiniBand subnets.
    void fill_ah(ibv_ah_attr& ah, const wire::PortAddress& remote, std::uint16_t lid,
                 const std::array<std::uint8_t, 16>& gid) const noexcept;
};

}  // namespace transit::openib
