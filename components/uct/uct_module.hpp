// The uct module: one UCT interface (a transport on a device, e.g. posix on
// "memory" or tcp on "eth0") with its own worker, connected to each peer's
// interface.
//
// Active messages go out with uct_ep_am_short (when header + payload fit) or
// uct_ep_am_bcopy, both complete when they return.  The AM handler delivers a
// message with nothing queued before it at once and copies anything else into
// a ring, delivered after UCT's progress returns (UctReceiver).
// Put, get and atomics are performed by the target through active messages,
// which check the handle, or, only where the target's device checks the
// remote key (rc, dc on a cluster), by UCT's own put_zcopy/get_zcopy and
// atomics with a remote key carried in the registration handle.  The module
// owns them as members: UctOneSided (btl::Rdma) and UctAtomics (btl::Atomics),
// the objects the upper layer calls, the operations in flight they share
// (UctOps), the target's side (UctTarget), the send side (UctSender), the full
// FIFO (UctSendQueue), the
// peers outside the job (UctOutside, its Listener and DynamicPeerRecords),
// the goodbyes (UctFarewells), the receive side (UctReceiver), peer loss
// (UctPeerWatch) and the UCT objects it opened (UctInterface).
#pragma once

#include <uct/api/uct.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "transit/btl/am_table.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/idle_pacer.hpp"
#include "transit/btl/util/outside_links.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/btl/util/unreached_reasons.hpp"
#include "transit/log.hpp"
#include "transit/progress.hpp"
#include "uct_atomics.hpp"
#include "uct_config.hpp"
#include "uct_deleters.hpp"
#include "uct_endpoint.hpp"
#include "uct_farewells.hpp"
#include "uct_frag.hpp"
#include "uct_gather.hpp"
#include "uct_interface.hpp"
#include "uct_one_sided.hpp"
#include "uct_ops.hpp"
#include "uct_outside.hpp"
#include "uct_peer_watch.hpp"
#include "uct_rdma_policy.hpp"
#include "uct_receiver.hpp"
#include "uct_regions.hpp"
#include "uct_resource.hpp"
#include "uct_send_queue.hpp"
#include "uct_sender.hpp"
#include "uct_target.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

// The default exclusivity of a shared-memory transport (below vader), the
// highest a module gets unless btl_uct_exclusivity says otherwise.
inline constexpr std::uint32_t shm_exclusivity = 32768;

// Over tcp, btl_uct_eager_limit left at its default: 64 KiB of payload and
// the pml's 12-byte header, as with the tcp btl.
inline constexpr std::size_t tcp_eager_limit = 65600;
// The receive ring's slots hold messages up to this size: a shared-memory
// transport's largest (posix: 8256 bytes with its header) and UCT tcp's
// default segment; larger ones (over tcp's widened segments) are kept beside
// the slot.  The ring's memory is slots x this, touched at setup.
inline constexpr std::size_t ring_slot_max = (8 << 10) + 128;

class UctModule final : public btl::Module {
  public:
    // Opens the memory domain, worker and interface; throws std::runtime_error
    // with the reason when the transport cannot be used.
    UctModule(btl::Component& component, const Resource& resource, const UctConfig& config,
              rt::Runtime& runtime, ProgressEngine& progress, btl::AmTable& am_table,
              std::shared_ptr<Regions> regions, const log::Stream& out);
    ~UctModule() override;

    std::string name() const override { return "uct:" + resource_.name(); }
    const std::vector<std::byte>& address() const noexcept { return uct_.address(); }
    std::string modex_key() const { return "btl.uct." + resource_.tl_name; }

    btl::Rdma* rdma() noexcept override { return &one_sided_; }
    btl::Atomics* atomics() noexcept override { return &atomics_; }
    void* extension(std::uint32_t id) noexcept override {
        if (id == btl::DynamicPeerRecords::id)
            return static_cast<btl::DynamicPeerRecords*>(&outside_);
        if (id == btl::Listener::id) return static_cast<btl::Listener*>(&outside_);
        if (id == btl::UnreachedReason::id) return static_cast<btl::UnreachedReason*>(&unreached_);
        return nullptr;
    }
    Status add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                     btl::Reachability& reachable) override;
    Status del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) override;

    btl::Descriptor* alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                           std::uint32_t flags) noexcept override;
    Status free(btl::Descriptor* descriptor) noexcept override;
    btl::Descriptor* prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                 std::uint8_t order, std::size_t reserve, std::size_t& size,
                                 std::uint32_t flags) noexcept override;
    Status send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                btl::Tag tag) noexcept override;
    Status sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                 std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                 std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept override;

    void dump(btl::Endpoint* endpoint, int verbosity) override;
    Status finalize() override;

    // --- for the objects it owns (UctSendQueue, UctOps, UctTarget, UctOneSided, UctAtomics,
    // UctReceiver, UctPeerWatch, UctSender)
    // Whether e is one of this module's live endpoints (inline: the sender's
    // short paths check every message).
    bool valid(const btl::Endpoint* e) const noexcept {
        if (e == nullptr) return false;
        const Rank peer = e->peer();
        if (peer < by_rank_.size()) [[likely]]
            return by_rank_[peer].get() == e;
        return outside_.valid(e);
    }
    WireHeader wire(Kind kind, btl::Tag tag = 0) const noexcept {
        return WireHeader{static_cast<std::uint8_t>(kind), tag, wire_version, 0, self_};
    }
    // The header of a message to ep (its wire source).
    static WireHeader wire(Kind kind, btl::Tag tag, const UctEndpoint* ep) noexcept {
        return WireHeader{static_cast<std::uint8_t>(kind), tag, wire_version, 0, ep->wire_source};
    }
    // Work for attend() appeared: the next poll looks.
    void attend_soon() noexcept { attention_ = true; }
    // Joins or leaves the progress engine as the module's work says.
    void update_progress() noexcept;
    // The endpoint of a job peer or a peer outside the job: for a job peer
    // not added yet (it added us first), connected now; nullptr when it cannot be.
    UctEndpoint* peer_endpoint(Rank peer) noexcept;
    // A UCT status as a Transit one; a lost peer marks ep failed (reported
    // from attend()).
    Status from_ucs(ucs_status_t s, UctEndpoint* ep) noexcept;
    // from_ucs, where cma reports a dying peer as an I/O error.
    Status native_error(ucs_status_t s, UctEndpoint* ep) noexcept;
    // One pass of progress, and the failures it found reported (flush's wait).
    void progress_once() noexcept;
    // --- for UctOutside ---------------------------------------------------------------
    // The endpoint to a job peer, or to a server outside the job (joined by
    // UctOutside); nullptr, with the reason, when it cannot be made.
    UctEndpoint* connect(Rank peer, std::string* why);
    // The UCT objects it opened.
    UctInterface& uct() noexcept { return uct_; }
    // An endpoint goes: its queued sends and its operations end (cancelled).
    void cancel_pending(UctEndpoint& e) noexcept;
    // A peer's error, to whoever registered for them.
    void report(std::uint32_t flags, Rank peer, const char* info) noexcept {
        report_error(flags, peer, info);
    }

  private:
    void choose_attributes();
    void setup_pools();

    // Progress.
    static int progress_cb(void* self) noexcept;
    int poll() noexcept;
    int attend() noexcept;
    bool needs_attention() const noexcept;
    // Work the next poll must not wait for: operations, queued sends,
    // deliveries or replies, or something for attend().
    bool in_flight() const noexcept {
        return attention_ || ops_.pending() > 0 || send_queue_.pending() || receiver_.waiting() ||
               target_.waiting();
    }

    Resource resource_;
    UctConfig config_;
    rt::Runtime& runtime_;
    ProgressEngine& progress_;
    btl::AmTable& am_table_;
    log::Stream out_;
    Rank self_;

    UctInterface uct_{resource_, config_, out_, name()};
    std::vector<std::unique_ptr<UctEndpoint>> by_rank_;
    int attend_depth_ = 0;  // attend() nested in a callback: no endpoint is freed
    UctFarewells farewells_{*this, send_queue_, out_};
    std::size_t peer_count_ = 0;
    // The poll's hot state, together: whether anything besides UCT's own
    // progress needs a look (set wherever such work appears, cleared only by
    // attend() from the real state) and the poll count (the re-entry guard
    // is the receiver's).
    bool attention_ = false;
    std::uint32_t polls_ = 0;  // local peers' liveness is checked every few polls
    // Across nodes the path measurement may leave this module unused beside
    // another transport: polled then on every 16th pass only.
    btl::util::IdlePacer pacer_;

    FragPool frags_;
    // The receive side (uct_receiver.cpp): UCT's AM handler and the ring.
    UctReceiver receiver_{*this, am_table_, by_rank_, outside_, target_, ops_, farewells_};
    // The full FIFO (uct_send_queue.cpp), after the pool it returns fragments to.
    UctSendQueue send_queue_{*this, sender_, frags_};
    // The send side (uct_sender.cpp): sendi's paths, send and transmit.
    UctSender sender_{*this, frags_, send_queue_};
    bool warned_mismatch_ = false;  // a peer's message sizes did not fit ours
    ProgressEngine::Handle progress_handle_;

    std::shared_ptr<Regions> regions_;
    // The one-sided capabilities, after what they refer to (regions_); each
    // refers to the others it works with, declared beside it.
    UctOps ops_{*this, sender_, one_sided_, out_};
    UctTarget target_{*this, sender_, *regions_, out_};
    UctOneSided one_sided_{*this, ops_, atomics_, *regions_, resource_, config_, out_};
    UctAtomics atomics_{*this, ops_, resource_, config_, out_};
    UctOutside outside_{*this, peer_watch_, receiver_, runtime_, resource_, config_, out_};
    // Peer loss (uct_peer_watch.cpp).
    UctPeerWatch peer_watch_{*this, by_rank_, outside_, send_queue_, ops_, receiver_, out_};
    // Why add_procs left a peer unreached, for the bml's explanation.
    btl::util::UnreachedReasons unreached_;
};

}  // namespace transit::uct
