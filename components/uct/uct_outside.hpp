// Peers outside the job (rt::DynamicPeers) of a uct module, and the module's
// btl::Listener and btl::DynamicPeerRecords: a client connects to a server's
// interface from the server's address, sends a join with the access token
// and two channels, and may send right behind it; the server checks the
// token, connects back to the client's interface and answers with a welcome.
// See the README's "Peers outside the job".
//
// Owns: the endpoints of peers outside the job (deleted ones until reap()),
// the maps by id and by channel, the clients joined but not admitted yet,
// the links' join state (btl::util::OutsideLinks) and the log of refused
// clients.  Borrows: the module (its connect and endpoint creation, its
// address, UCT's progress, the work pending for an endpoint), its peer watch
// (a failure noted), its receiver (whether a handler runs inside UCT's
// progress: no re-entry), the runtime (tokens and ids), the module's
// resource, configuration and log stream.
#pragma once

#include <uct/api/uct.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_links.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/log.hpp"
#include "transit/runtime.hpp"
#include "uct_config.hpp"
#include "uct_endpoint.hpp"
#include "uct_resource.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctPeerWatch;
class UctReceiver;

class UctOutside final : public btl::Listener, public btl::DynamicPeerRecords {
  public:
    UctOutside(UctModule& module, UctPeerWatch& peer_watch, const UctReceiver& receiver,
               rt::Runtime& runtime, const Resource& resource, const UctConfig& config,
               const log::Stream& out) noexcept
        : module_(module),
          peer_watch_(peer_watch),
          receiver_(receiver),
          runtime_(runtime),
          resource_(resource),
          config_(config),
          out_(out) {}

    // The address is published at init; listening admits clients and keeps
    // the module in progress.
    Status listen() override;
    std::size_t dynamic_endpoints() const noexcept override {
        return dynamic_ids_.size() + joining_.size();
    }

    // --- for the module -------------------------------------------------------------
    bool is_dynamic(Rank peer) const noexcept;
    UctEndpoint* endpoint(Rank peer) const noexcept;
    // Whether e is a live endpoint of a peer outside the job (off the send path).
    [[gnu::noinline]] bool valid(const btl::Endpoint* e) const noexcept;
    // The client's side: connects to the server and joins it.
    UctEndpoint* connect_server(Rank peer, std::string* why);
    std::uint32_t new_channel() const;
    // Takes `ep` (destroyed when it fails: nullptr).
    UctEndpoint* add(Rank id, uct_ep_h ep, std::uint32_t channel, std::uint32_t wire_source,
                     std::uint32_t pid) noexcept;
    // From handle(): the source of a message a peer outside the job sent,
    // renamed to its id; false when it names no peer (dropped).
    bool rename_source(WireHeader& h) noexcept;
    void handle_join(std::span<const std::byte> body) noexcept;
    void handle_welcome(const WireHeader& h, std::span<const std::byte> body) noexcept;
    void goodbye(Rank peer) noexcept;
    // Unnamed at once; freed by reap() at the module's next safe point.
    void remove(UctEndpoint& e) noexcept;
    void reap() noexcept;
    // From attend(): joined clients that left or were lost, late welcomes.
    void check_joining() noexcept;
    void check_welcomes() noexcept;
    // UCT reported `ep` lost: a joined client's endpoint fails.
    void lost_joining(uct_ep_h ep) noexcept;
    // Joined clients whose process exited (shared memory).
    void check_joining_exits() noexcept;
    // The link of a failed endpoint, once its failure is reported.
    void lost(UctEndpoint& e) noexcept { links_.lost(e.outside); }
    // finalize: every endpoint and joined client goes.
    void close() noexcept;

    const std::vector<std::unique_ptr<UctEndpoint>>& endpoints() const noexcept { return dynamic_; }
    bool has_joining() const noexcept { return !joining_.empty(); }
    bool awaiting_welcomes() const noexcept { return links_.joining() > 0; }
    // Peers outside the job on shared memory, watched by pid: looked at every
    // 16 polls (a waiting process yields between polls, so under load 1024
    // polls can take seconds), which keeps attend() in every poll while any
    // is there.  Job peers keep the 1024-poll tick.
    bool watching() const noexcept {
        return resource_.dev_type != UCT_DEVICE_TYPE_NET &&
               (!dynamic_ids_.empty() || !joining_.empty());
    }
    bool keeps_progress() const noexcept { return listening_ || !dynamic_.empty(); }
    bool needs_attention() const noexcept {
        return dynamic_.size() != dynamic_ids_.size() || watching() || links_.joining() > 0;
    }

  private:
    // Clients whose join was accepted, by channel, admitted (given an id) by
    // their first other message: a client whose bml drops this module for
    // another right after connecting leaves without ever being a peer here.
    struct Joining {
        uct_ep_h ep = nullptr;
        std::uint32_t client_channel = 0;
        std::uint32_t pid = 0;
        std::uint32_t rank = 0;
        btl::util::ProcessWatch process;
        bool failed = false;  // UCT reported its endpoint lost
    };

    bool send_join(UctEndpoint& e, const rt::Secret& token) noexcept;
    UctEndpoint* admit(std::uint32_t channel) noexcept;
    void forget_joining(std::uint32_t channel, const char* why) noexcept;
    ssize_t send_welcome(uct_ep_h ep, std::uint32_t channel, Status status,
                         std::chrono::steady_clock::time_point deadline) noexcept;
    void answer_join(const JoinRequest& j, std::span<const std::byte> addresses,
                     Status status) noexcept;
    // Whether a client's addresses fit this transport's.
    bool fits(const JoinRequest& j) const noexcept;
    void refused(const std::string& who, const std::string& why) noexcept;

    UctModule& module_;
    UctPeerWatch& peer_watch_;
    const UctReceiver& receiver_;
    rt::Runtime& runtime_;
    const Resource& resource_;
    const UctConfig& config_;
    const log::Stream& out_;
    // Every endpoint (deleted ones until reap), and the live ones by id and
    // by the channel their messages carry.
    std::vector<std::unique_ptr<UctEndpoint>> dynamic_;
    std::unordered_map<Rank, UctEndpoint*> dynamic_ids_;
    std::unordered_map<std::uint32_t, UctEndpoint*> channels_;
    std::unordered_map<std::uint32_t, Joining> joining_;
    bool listening_ = false;
    // Counts the servers whose answer to our join is due, each given up at
    // its deadline (check_welcomes).
    btl::util::OutsideLinks links_;
    btl::util::RefusalLog refusals_{"clients"};
};

}  // namespace transit::uct
