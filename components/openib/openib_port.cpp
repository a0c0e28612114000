// The packet sequence numbers and address handles of a port (openib_port.hpp).
#include "openib_port.hpp"

#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

std::uint32_t Port::next_psn() noexcept {
    // xorshift: distinct, unpredictable-enough starting PSNs for each QP.
    psn_state ^= psn_state << 13;
    psn_state ^= psn_state >> 17;
    psn_state ^= psn_state << 5;
    return psn_state & 0xffffff;
}

void Port::fill_ah(ibv_ah_attr& ah, const wire::PortAddress& remote, std::uint16_t lid,
                   const std::array<std::uint8_t, 16>& gid) const noexcept {
    ah = {};
    ah.port_num = number;
    ah.sl = config.service_level;
    ah.dlid = lid;
    // RoCE always routes by GID; InfiniBand only across subnets.
    if (roce() || remote.subnet_prefix != address.subnet_prefix) {
        ah.is_global = 1;
        std::memcpy(ah.grh.dgid.raw, gid.data(), 16);
        ah.grh.sgid_index = gid_index;
        ah.grh.hop_limit = 64;
        ah.grh.traffic_class = config.traffic_class;
    }
}

}  // namespace transit::openib
