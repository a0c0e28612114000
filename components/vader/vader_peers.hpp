// The job's local peers of a vader module: mapping a peer's segment when it
// is added (or when it sends to us first: VaderModule::endpoint_for), its
// endpoint set up from its segment header (attach_peer, for the peers outside
// the job too), and a deleted peer's endpoint kept and revived if the peer is
// added again.
//
// Owns the deleted peers' endpoints (`retired_`) and the note of the peers
// whose segment we counted as mapped (`counted_`).  Borrows from the module
// the runtime (modex), the configuration, the layout, our local index, the
// fast-box readers of our segment, the job's endpoints (`endpoints` by local
// index: the receive path reads them, so they stay the module's), the local
// indexes in use (`active`), the exit watch (VaderPeerWatch::watch_exit,
// rebuild), and the module's poll_from and probe_single_copy (the "used by
// VaderPeers" and "used by VaderOutside" sections of vader_module.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "components/vader/vader_endpoint.hpp"
#include "components/vader/vader_fastbox.hpp"
#include "components/vader/vader_layout.hpp"
#include "transit/log.hpp"
#include "transit/runtime.hpp"

namespace transit::vader {

struct Config;
class VaderModule;
class VaderPeerWatch;

class VaderPeers {
  public:
    VaderPeers(VaderModule& module, rt::Runtime& runtime, const Config& config,
               const Layout& layout, const std::uint32_t& my_index,
               std::vector<FastboxReader>& readers,
               std::vector<std::unique_ptr<VaderEndpoint>>& endpoints,
               std::vector<std::uint32_t>& active, VaderPeerWatch& peer_watch,
               const log::Stream& out) noexcept
        : module_(module),
          runtime_(runtime),
          config_(config),
          layout_(layout),
          my_index_(my_index),
          readers_(readers),
          endpoints_(endpoints),
          active_(active),
          peer_watch_(peer_watch),
          out_(out) {}
    VaderPeers(const VaderPeers&) = delete;
    VaderPeers& operator=(const VaderPeers&) = delete;

    // The tables for the segment just formatted, one entry per local peer.
    void format();
    // Maps the segment of the job's local peer `peer` (or revives its deleted
    // endpoint); nullptr when it cannot.
    VaderEndpoint* connect(Rank peer, std::uint32_t local_index);
    // What the peer's segment header says, for the endpoint (the segment is
    // checked: segment_usable); its process joins the exit watch.
    void attach_peer(VaderEndpoint& ep);
    // A deleted peer's endpoint: kept mapped, revived if it is added again.
    void retire(std::uint32_t local_index) noexcept {
        retired_[local_index] = std::move(endpoints_[local_index]);
    }
    // The deleted peers' endpoints go (the module's finalize).
    void finalize() noexcept {
        for (auto& ep : retired_) ep.reset();
    }

  private:
    VaderEndpoint* revive(std::uint32_t local_index);

    VaderModule& module_;
    rt::Runtime& runtime_;
    const Config& config_;
    const Layout& layout_;
    const std::uint32_t& my_index_;
    std::vector<FastboxReader>& readers_;                     // by sender's local index
    std::vector<std::unique_ptr<VaderEndpoint>>& endpoints_;  // by local index
    std::vector<std::uint32_t>& active_;                      // local indexes with an endpoint
    VaderPeerWatch& peer_watch_;
    const log::Stream& out_;
    // Deleted peers' endpoints, by local index, kept mapped and revived if the
    // peer is added again: its segment loses its name once every local peer
    // mapped it, and our fast-box position in it must carry on where it was.
    std::vector<std::unique_ptr<VaderEndpoint>> retired_;
    std::vector<bool> counted_;  // peers whose segment we counted as mapped
};

}  // namespace transit::vader
