// What every Runtime implementation shares: the identity fields and the
// topology queries.  Subclasses differ only in how the modex travels.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/topology.hpp"
#include "transit/runtime.hpp"

namespace transit::rt {

struct Identity {
    Rank rank = 0;
    std::uint32_t size = 1;
    std::uint32_t local_rank = 0;
    std::string job_id;
    std::string node_id;
    std::vector<Rank> local_peers;  // sorted, includes `rank`
    Secret secret{};
};

class RuntimeBase : public Runtime {
  public:
    Rank rank() const noexcept override { return id_.rank; }
    std::uint32_t size() const noexcept override { return id_.size; }
    std::uint32_t local_rank() const noexcept override { return id_.local_rank; }
    std::uint32_t local_size() const noexcept override {
        return static_cast<std::uint32_t>(id_.local_peers.size());
    }
    const std::string& job_id() const noexcept override { return id_.job_id; }
    const std::string& node_id() const noexcept override { return id_.node_id; }
    std::span<const Rank> local_peers() const noexcept override { return id_.local_peers; }
    bool on_this_node(Rank peer) const noexcept override {
        return std::binary_search(id_.local_peers.begin(), id_.local_peers.end(), peer);
    }
    const Secret& job_secret() const noexcept override { return id_.secret; }

    int numa_node() const noexcept override { return topo::numa_node(); }
    std::string binding() const override { return topo::binding(); }
    int distance_to_device(std::string_view pci_bus_id) const override {
        return topo::distance_to_device(pci_bus_id);
    }

  protected:
    // Sorts the peers and sets local_rank to this rank's place among them.
    void set_local_peers(std::vector<Rank> peers) {
        std::sort(peers.begin(), peers.end());
        peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
        if (!std::binary_search(peers.begin(), peers.end(), id_.rank)) {
            peers.insert(std::lower_bound(peers.begin(), peers.end(), id_.rank), id_.rank);
        }
        id_.local_rank = static_cast<std::uint32_t>(
            std::lower_bound(peers.begin(), peers.end(), id_.rank) - peers.begin());
        id_.local_peers = std::move(peers);
    }

    Identity id_;
};

}  // namespace transit::rt
