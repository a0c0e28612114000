// What a transport may ask of the job it runs in: identity, locality, the modex
// (address exchange through the launcher) and the job secret.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transit/status.hpp"

namespace transit {

using Rank = std::uint32_t;
inline constexpr Rank any_rank = 0xffffffffu;

namespace rt {

using Secret = std::array<std::byte, 16>;

// Peers outside the job: servers this process connected to by address, and
// clients that connected to its listening context.  Their ids follow the
// job's ranks (>= size()) and are never reused within the process's life.
// Only transports whose attributes carry btl::flags::dynamic_peers are asked
// about them; modex_recv answers with what the address (or nothing, for a
// client) gave.
class DynamicPeers {
  public:
    // Whether `peer` names a dynamic peer that is not released.
    virtual bool is_dynamic(Rank peer) const noexcept = 0;
    // Whether `token` opens this process's listening context (compared in
    // constant time); false when it does not listen.
    virtual bool token_matches(const Secret& token) const noexcept = 0;
    // The token to present to `peer` (a server we connected to), or nullptr
    // when the peer is a client that connected to us.
    virtual const Secret* token_for(Rank peer) const noexcept = 0;
    // A client presented the right token: its new id, or any_rank when no id
    // is left.
    virtual Rank admit() noexcept = 0;

  protected:
    ~DynamicPeers() = default;
};

class Runtime {
  public:
    virtual ~Runtime() = default;

    virtual Rank rank() const noexcept = 0;
    virtual std::uint32_t size() const noexcept = 0;
    virtual std::uint32_t local_rank() const noexcept = 0;
    virtual std::uint32_t local_size() const noexcept = 0;
    virtual const std::string& job_id() const noexcept = 0;
    // Identifies the node and the namespace the process runs in: two containers
    // on one host get different node ids.
    virtual const std::string& node_id() const noexcept = 0;
    virtual bool is_singleton() const noexcept = 0;

    // Ranks on this node (this process included), sorted.
    virtual std::span<const Rank> local_peers() const noexcept = 0;
    virtual bool on_this_node(Rank peer) const noexcept = 0;

    // 128 random bits shared by every rank of the job and by no other job.
    virtual const Secret& job_secret() const noexcept = 0;

    // Publishes a blob under `key` (by convention "btl.<component>.<version>";
    // no '#').  Visible to peers after the next fence().  Publishing the same
    // key again replaces the value peers read.
    virtual Status modex_send(std::string_view key, std::span<const std::byte> blob) = 0;
    // Reads a peer's latest visible blob; not_found when the peer never
    // published `key`.
    virtual Status modex_recv(Rank peer, std::string_view key, std::vector<std::byte>& blob) = 0;
    // Exchanges everything published so far.  Returns peer_failed when a rank
    // died (the survivors' data is still exchanged), never hangs.
    virtual Status fence() = 0;

    // Topology (hwloc): the NUMA node this process is bound to (-1: unknown or
    // unbound), its binding as a cpuset string, and the NUMA distance from this
    // process to a PCI device (e.g. "0000:3b:00.0"), lower is closer; -1 if unknown.
    virtual int numa_node() const noexcept = 0;
    virtual std::string binding() const = 0;
    virtual int distance_to_device(std::string_view pci_bus_id) const = 0;

    // Peers the launcher reported lost: their process ended without closing
    // its runtime (a PMIx event, under `transit_run --keep-going` or another
    // PMIx launcher that sends one).  lost_count() is one atomic read, cheap
    // enough to poll; lost_ranks() lists them in the order reported.  This
    // covers peers no transport could notice: one never talked to, or one on
    // another node with nothing in flight.
    virtual std::uint32_t lost_count() const noexcept { return 0; }
    virtual std::vector<Rank> lost_ranks() const { return {}; }
    // Tells the runtime a peer is gone that a transport found dead (the pml
    // does, at shutdown): later fences are among the survivors only.  Some
    // launchers never report a death (mpirun keeps the job running with
    // --enable-recovery but sends no event), and a fence the dead rank
    // cannot join would wait for good.  Idempotent.
    virtual void report_lost(Rank) noexcept {}

    // The peers outside the job, when the context offers them (the pml's
    // runtime does); nullptr otherwise.
    virtual DynamicPeers* dynamic_peers() noexcept { return nullptr; }
};

}  // namespace rt
}  // namespace transit
