// The peers outside the job of a vader module (btl::Listener and
// btl::DynamicPeerRecords): a listening process publishes how to open its
// segment; a client on the same node maps it, and its first references (a
// join, then a join fragment with the token) make the server map the
// client's segment and admit it.  See the README's "Peers outside the job";
// the wire is vader_dynamic.hpp.
//
// Owns the endpoints of those peers (by peer id and by channel), the clients
// joining, the spare fast boxes, the state of each link (OutsideLinks), the
// watch of the peers holding orphaned fragments of ours, the endpoints deleted
// or departed that wait for the next progress pass, and the making of the
// segment of a process alone on its node (ensure_segment).  Borrows from the
// module its segment (made here; VaderModule::format_segment decides single
// copy and lays it out), its configuration (read only),
// fragments and FIFO (VaderModule::take_frag, ring, receive, return_frag,
// complete), the polling of fast boxes (VaderModule::read_box, unpoll,
// poll_box), the setup of an endpoint (VaderPeers::attach_peer,
// VaderModule::probe_single_copy), the exit watch (VaderPeerWatch::rebuild,
// reserve), the module's progress callback (VaderProgressHook::start,
// stop_if_idle), the module's segment header (`header`, null until
// ensure_segment), the module's pass state that every progress pass reads
// (vader_pass.hpp: `in_pass`, a pass or the exit watch's check runs; `chores`,
// the next pass starts with its chores) and the peer bookkeeping of the "used
// by VaderOutside" section of vader_module.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "components/vader/vader_endpoint.hpp"
#include "components/vader/vader_fifo.hpp"
#include "components/vader/vader_frag.hpp"
#include "components/vader/vader_layout.hpp"
#include "components/vader/vader_pass.hpp"
#include "components/vader/vader_segment.hpp"
#include "components/vader/vader_spare_boxes.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/free_list.hpp"
#include "transit/btl/util/outside_links.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/log.hpp"
#include "transit/runtime.hpp"

namespace transit::vader {

struct Config;
class VaderModule;
class VaderPeerWatch;
class VaderPeers;
class VaderProgressHook;

class VaderOutside final : public btl::Listener, public btl::DynamicPeerRecords {
  public:
    VaderOutside(VaderModule& module, rt::Runtime& runtime, SharedFile& segment,
                 SegmentHeader* const& header, VaderPass& pass, btl::util::FreeList<Frag>& frags,
                 const Config& config, const Layout& layout, VaderPeers& peers,
                 VaderPeerWatch& peer_watch, VaderProgressHook& progress_hook,
                 const log::Stream& out) noexcept
        : module_(module),
          runtime_(runtime),
          segment_(segment),
          header_(header),
          pass_(pass),
          frags_(frags),
          config_(config),
          layout_(layout),
          peers_(peers),
          peer_watch_(peer_watch),
          progress_hook_(progress_hook),
          out_(out) {}
    VaderOutside(const VaderOutside&) = delete;
    VaderOutside& operator=(const VaderOutside&) = delete;

    Status listen() override;
    std::size_t dynamic_endpoints() const noexcept override {
        return dynamic_.size() + joining_.size();
    }
    std::size_t dynamic_fast_paths() const noexcept override { return spares_.in_use(); }

    // --- used by VaderModule ----------------------------------------------------------
    // The spare fast boxes of the segment just formatted.
    void format() { spares_ = SpareBoxes(layout_.fbox_count - layout_.local_size); }
    // Goodbyes to the peers that still listen; every record goes.
    void finalize() noexcept;
    bool is_dynamic(Rank peer) noexcept;
    VaderEndpoint* connect_server(Rank peer);
    bool send_join(VaderEndpoint* ep) noexcept;
    void join_answered(Frag* f) noexcept;
    // A FIFO reference with the dynamic bit.
    void dynamic_ref(std::uint64_t ref) noexcept;
    void delete_dynamic(VaderEndpoint* ep) noexcept;
    // The start of a progress pass: endpoints deleted in the last one are
    // freed, departures that came in it reported.
    void pass_chores() noexcept;
    // Nothing to progress for: no peer outside the job, no listening, no box parked.
    bool idle() const noexcept { return dynamic_.empty() && !listening_ && !spares_.any_parked(); }
    // The live peers outside the job, for the module's exit watch.
    void add_watched(std::vector<VaderEndpoint*>& polled) const;
    // VaderPeerWatch::check's share: joining clients that exited, and when due parked
    // boxes, joins no server answered, owners of orphaned fragments.
    void watch() noexcept {
        if (!joining_.empty()) [[unlikely]]
            forget_joining_exited();
        if ((spares_.any_parked() || links_.joining() != 0 || !orphan_owners_.empty()) &&
            dynamic_pace_.due()) [[unlikely]]
            watch_dynamic();
    }
    // The peer is given up: a join it did not answer counts no more.
    void lost(VaderEndpoint& ep) noexcept { links_.lost(ep.outside); }

  private:
    // The own segment, made now if the process is alone on its node.
    bool ensure_segment() noexcept;

    // A client whose join reference arrived (its segment is mapped) and whose
    // join fragment, with the token, has not yet.
    struct Joining {
        SharedFile segment;
        Fifo fifo;
        btl::util::ProcessWatch process;
    };

    void handle_join(std::uint32_t pid, std::uint32_t fd) noexcept;
    void admit(std::uint32_t pid, Joining& j, std::uint64_t ref) noexcept;
    void forget_joining_exited() noexcept;
    void report_departures() noexcept;
    void refused(std::uint32_t pid, const std::string& reason) noexcept;
    void give_spare(VaderEndpoint& ep) noexcept;
    void write_into(VaderEndpoint& ep, std::uint32_t box) noexcept;
    void release_boxes(VaderEndpoint* ep) noexcept;
    void watch_dynamic() noexcept;
    void expire_joins() noexcept;
    void orphan(Frag* frag, VaderEndpoint* ep, Status status) noexcept;
    void reap_orphans() noexcept;

    VaderModule& module_;
    rt::Runtime& runtime_;
    SharedFile& segment_;
    SegmentHeader* const& header_;  // the own segment's (after ensure_segment)
    // The module's pass state: in_pass (a caller up the stack may still hold
    // an endpoint deleted now), chores (the next pass starts with them).
    VaderPass& pass_;
    btl::util::FreeList<Frag>& frags_;
    const Config& config_;
    const Layout& layout_;
    VaderPeers& peers_;                 // attach_peer
    VaderPeerWatch& peer_watch_;        // its peers join the exit watch (rebuild, reserve)
    VaderProgressHook& progress_hook_;  // start, stop_if_idle
    const log::Stream& out_;
    // By peer id, and by the channel their references carry (a client's pid,
    // or the number this process gave a server).
    std::unordered_map<Rank, std::unique_ptr<VaderEndpoint>> dynamic_;
    std::unordered_map<std::uint32_t, VaderEndpoint*> channels_;
    std::unordered_map<std::uint32_t, Joining> joining_;     // by client pid
    std::vector<std::unique_ptr<VaderEndpoint>> graveyard_;  // deleted, freed at the next pass
    std::vector<VaderEndpoint*> departing_;  // said goodbye, reported at the next pass
    SpareBoxes spares_;  // the module's readers [local_size + i] for peers outside the job
    std::uint32_t next_channel_ = 1;
    bool listening_ = false;
    bool warned_dynamic_ = false;  // ensure_segment failed once
    btl::util::RefusalLog refusals_{"clients"};
    btl::util::WatchPace joining_pace_;
    btl::util::WatchPace dynamic_pace_;  // parked boxes, unanswered joins
    btl::util::OutsideLinks links_;      // counts our joins no server has answered yet
    // Peers outside the job that hold orphaned fragments of ours.
    std::vector<btl::util::ProcessWatch> orphan_owners_;
};

}  // namespace transit::vader
