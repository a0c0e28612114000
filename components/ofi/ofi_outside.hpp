// The peers outside the job of an ofi module (btl::Listener and
// btl::DynamicPeerRecords): the client's join, the server's answer, the
// channels their messages name, their watch and their deletion.
//
// Owns: the peers outside the job (by id, and by the channel their messages
// name), the addresses of deleted ones on their way out of the address
// vector, the state of each link (OutsideLinks), whether this process
// listens, the refusals and the reasons servers were not reached.  Borrows:
// the module's OfiFabric (address vector, endpoint, address), its
// OfiPeerWatch (process watch, loss, abandoning operations), the runtime
// (tokens, admissions, the modex) and the module for control messages,
// progress, job ranks' addresses and error reports.  The module hands it
// the joins and control messages its completion queue finds.
#pragma once

#include <rdma/fabric.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ofi_endpoint.hpp"
#include "ofi_wire.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_links.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/btl/util/unreached_reasons.hpp"
#include "transit/log.hpp"
#include "transit/runtime.hpp"

namespace transit::ofi {

class OfiModule;
class OfiPeerWatch;
struct OfiFabric;

class OfiOutside final : public btl::DynamicPeerRecords, public btl::Listener {
  public:
    // join_timeout: seconds a server has to answer our join.
    OfiOutside(OfiModule& module, OfiFabric& fabric, rt::Runtime& runtime, OfiPeerWatch& watch,
               double join_timeout, const log::Stream& out)
        : m_(module),
          f_(fabric),
          runtime_(runtime),
          watch_(watch),
          join_timeout_(join_timeout),
          out_(out) {}

    std::size_t dynamic_endpoints() const noexcept override { return dynamic_.size(); }
    Status listen() override;

    // --- for the module ---------------------------------------------------------------
    // The module's extensions this object is (peer records, listener,
    // unreached reasons), or nullptr.
    void* extension(std::uint32_t id) noexcept;
    // add_procs for the peers outside the job among `peers`: a client that
    // joined us, or a server we join now.
    void add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                   btl::Reachability& reachable);
    OfiEndpoint* dynamic_endpoint(Rank peer) const noexcept;
    void delete_dynamic(OfiEndpoint& ep) noexcept;
    // At finalize: every peer is deleted (it hears goodbye) and joins are refused.
    void leave() noexcept;
    bool listening() const noexcept { return listening_; }
    // Deleted peers' addresses wait to leave the address vector.
    bool retiring() const noexcept { return !retiring_.empty(); }
    void retire_addresses(bool all) noexcept;
    // The low-priority pass (paced): exited peers, unanswered joins, addresses due.
    void check_dynamic() noexcept;

    // --- for OfiCompletions ------------------------------------------------------------
    // The live peer whose messages name `channel`, or nullptr.
    OfiEndpoint* by_channel(std::uint32_t channel) const noexcept {
        const auto it = channels_.find(channel);
        return it == channels_.end() ? nullptr : it->second;
    }
    void on_join(const WireHeader& h, std::span<const std::byte> body) noexcept;
    void on_dynamic_control(Received what, const WireHeader& h) noexcept;

    // --- for OfiPeerWatch ---------------------------------------------------------------
    // ep's process is gone: its link ends (unless it said goodbye already).
    void lost(OfiEndpoint& ep) noexcept { links_.lost(ep.outside); }

  private:
    // Deleted peers' address-vector entries, removed once their goodbye left.
    struct Retiring {
        fi_addr_t address;
        std::chrono::steady_clock::time_point after;
    };

    bool is_dynamic(Rank peer) const noexcept;
    OfiEndpoint* join_server(Rank peer);
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
    OfiFabric& f_;
    rt::Runtime& runtime_;
    OfiPeerWatch& watch_;
    double join_timeout_;
    const log::Stream& out_;

    // Live peers only: by id, and by the channel their messages name (ours
    // for a server, the client's choice for a client).
    std::unordered_map<Rank, std::unique_ptr<OfiEndpoint>> dynamic_;
    std::unordered_map<std::uint32_t, OfiEndpoint*> channels_;
    std::vector<Retiring> retiring_;
    btl::util::UnreachedReasons unreached_;  // servers join_server could not reach
    std::mt19937 channel_rng_{std::random_device{}()};
    btl::util::RefusalLog refusals_{"clients"};
    btl::util::OutsideLinks links_;      // counts our joins no server has answered yet
    btl::util::WatchPace dynamic_pace_;  // every 16th low-priority pass, at most every 100 ms
    bool listening_ = false;
};

}  // namespace transit::ofi
