// Per-peer state of the pml, and the table of it by rank.
//
// The bml keeps its own table of endpoints (which modules reach a rank); each
// Peer points at its rank's endpoint.  The pml's state stays in a table of its
// own because it exists for ranks the bml has no endpoint for: a receive may
// name a rank no transport reaches, and a rank reported lost by the launcher
// is failed here whether or not a transport knew it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bml/r2.hpp"
#include "pml/pools.hpp"
#include "pml/request.hpp"
#include "transit/btl/types.hpp"

namespace transit::pml {

// A message kept for later: unexpected, out of order, or a queued control message.
struct RawMsg {
    RawMsg* next = nullptr;  // on a List (unexpected, out of order, queued)
    RawMsg* prev = nullptr;
    RawMsg* next_free = nullptr;  // the pool's
    bool in_use = false;
    btl::Tag btl_tag = 0;
    Rank src = any_rank;  // sender (unexpected) or destination (queued)
    std::uint32_t tag = 0;
    std::uint32_t seq = 0;
    std::uint64_t arrival = 0;
    std::size_t total = 0;  // message length (for probe)
    std::byte* data = nullptr;
    std::size_t len = 0;
    int cls = 0;
};

struct Peer {
    Rank rank = any_rank;
    bml::Endpoint* ep = nullptr;  // the bml's, once a transport reaches the rank
    std::uint32_t send_seq = 0;
    std::uint32_t expect_seq = 0;
    List<Req> posted;
    List<RawMsg> unexpected;
    List<RawMsg> out_of_order;
    bool throttled = false;   // the peer asked us to stop sending eagerly
    bool throttling = false;  // we asked the peer to stop
    bool has_unexpected_listed = false;
    std::uint64_t osc_outstanding = 0;
    std::uint64_t osc_emulated = 0;  // the part of osc_outstanding the target answers
    bool failed = false;             // a transport reported it gone
    bool failure_handled = false;    // its requests were failed
    bool osc_lost = false;           // one-sided operations to it were lost
    // The first one-sided operation to it that its target refused since the
    // last flush of it (returned, then cleared, by flush and flush_all).
    Status osc_refused = Status::success;
    // Completion counters of active messages sent to it, with how many
    // completions each still waits for: lost if the peer fails.
    std::vector<std::pair<Counter*, std::uint64_t>> owed_completions;
    // Since when its transport has refused our control messages for good with
    // none sent in between: past settings' grace, the peer is failed.
    std::optional<std::chrono::steady_clock::time_point> control_refused_since;
};

// Every rank's Peer, made at setup (one allocation).
class PeerTable {
  public:
    void init(std::uint32_t size, bml::R2* bml) {
        peers_ = std::make_unique<Peer[]>(size);
        size_ = size;
        bml_ = bml;
        for (Rank r = 0; r < size; ++r) peers_[r].rank = r;
    }
    // State, no endpoint needed; nullptr outside the job.
    Peer* peer(Rank r) noexcept { return r < size_ ? &peers_[r] : nullptr; }
    // State with an endpoint; nullptr when no transport reaches the rank.
    Peer* send_peer(Rank r) noexcept {
        Peer* p = peer(r);
        if (p && p->ep) [[likely]]
            return p;
        return connect(p);
    }
    bool failed(Rank r) const noexcept { return r < size_ && peers_[r].failed; }
    // Its requests were failed: what it still sends refers to requests that
    // are complete (maybe reused), and to replies already written off.
    bool written_off(Rank r) const noexcept { return r < size_ && peers_[r].failure_handled; }
    Peer* begin() noexcept { return peers_.get(); }
    Peer* end() noexcept { return peers_.get() + size_; }

  private:
    Peer* connect(Peer* p) noexcept {
        if (!p) return nullptr;
        p->ep = bml_->endpoint(p->rank);
        return p->ep ? p : nullptr;
    }
    std::unique_ptr<Peer[]> peers_;
    std::uint32_t size_ = 0;
    bml::R2* bml_ = nullptr;
};

}  // namespace transit::pml
