// The peers outside the job of an ofi module (btl::Listener and
// btl::DynamicPeerRecords): the client's join, the server's answer, the
// channels their messages name, their watch and their deletion.  The module
// owns this object, hands it the joins and control messages its receive path
// finds, and keeps the state (the peers by id and by channel, the addresses
// on their way out) that its progress and finalize also read.
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ofi_endpoint.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/module.hpp"

namespace transit::ofi {

class OfiModule;

class OfiOutside final : public btl::DynamicPeerRecords, public btl::Listener {
  public:
    explicit OfiOutside(OfiModule& module) noexcept : m_(module) {}

    std::size_t dynamic_endpoints() const noexcept override;
    Status listen() override;

    // --- for the module ---------------------------------------------------------------
    bool is_dynamic(Rank peer) const noexcept;
    OfiEndpoint* dynamic_endpoint(Rank peer) const noexcept;
    OfiEndpoint* join_server(Rank peer);
    void on_join(const WireHeader& h, std::span<const std::byte> body) noexcept;
    void on_dynamic_control(Received what, const WireHeader& h) noexcept;
    void delete_dynamic(OfiEndpoint& ep) noexcept;
    void check_dynamic() noexcept;
    void retire_addresses(bool all) noexcept;

  private:
    // Why join_server did not reach `peer`: verbose here, the bml's error if
    // no other module reaches it (btl::UnreachedReason).
    void unreached(Rank peer, std::string why);
    void keep_address(fi_addr_t address) noexcept;
    void retire(fi_addr_t address) noexcept;
    std::uint32_t new_channel() noexcept;
    bool address_taken(fi_addr_t address) const noexcept;
    bool refused(const std::string& who, const char* why) noexcept;
    void answer_refusal(fi_addr_t address, std::uint32_t channel, bool token) noexcept;
    void drop_address(fi_addr_t address) noexcept;

    OfiModule& m_;
};

}  // namespace transit::ofi
