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
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bml/r2.hpp"
#include "pml/peer_watch.hpp"
#include "pml/pools.hpp"
#include "pml/request.hpp"
#include "transit/btl/types.hpp"
#include "transit/runtime.hpp"

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
    // The keep-alive's (keepalive.hpp); `heard` is set by every message from it.
    PeerWatch watch;
    // A barrier round waits for its signal: outstanding work for the keep-alive.
    bool awaited = false;
    List<Req> posted;
    List<RawMsg> unexpected;
    List<RawMsg> out_of_order;
    bool throttled = false;   // the peer asked us to stop sending eagerly
    bool throttling = false;  // we asked the peer to stop
    // Our descriptors to it that its transport refused for now (out of
    // resources) and the outbox holds: new fragments wait behind them.
    std::uint32_t descs_waiting = 0;
    bool has_unexpected_listed = false;
    std::uint64_t osc_outstanding = 0;
    std::uint64_t osc_emulated = 0;  // the part of osc_outstanding the target answers
    bool failed = false;             // a transport reported it gone
    bool failure_handled = false;    // its requests were failed
    bool departed = false;           // a peer outside the job disconnected on purpose
    bool released = false;           // a peer outside the job: its transports let it go
    bool left_reported = false;      // its PeerEvent (departed or failed) was queued
    std::string gone_reason;         // what reported it failed, for the log
    // Graceful disconnect (farewell.cpp).  Ours: we are saying bye (its
    // record stays meanwhile), sent it after all we sent the peer, and the
    // peer acked it: it had all of it.  Its: its bye came in sequence (so
    // did all it sent), and is acked at the next progress (listed in
    // Core::byes); once acked, its transport endpoint stays until its
    // transport reports it gone or until linger_until, so the ack is not
    // cut off behind us.
    bool saying_bye = false;
    bool bye_sent = false;
    bool bye_acked = false;
    bool bye_heard = false;
    bool in_byes = false;         // listed in Core::byes
    bool transport_lost = false;  // a transport reported it gone (or departed)
    std::optional<std::chrono::steady_clock::time_point> linger_until;
    bool osc_lost = false;  // one-sided operations to it were lost
    // The first one-sided operation to it that its target refused since the
    // last flush of it (returned, then cleared, by flush and flush_all).
    Status osc_refused = Status::success;
    // Completion counters of active messages sent to it, with how many
    // completions each still waits for: lost if the peer fails.  A slot's
    // index and generation are the token the peer echoes back (am_done), so
    // it can settle only what it owes.
    struct Owed {
        Counter* counter = nullptr;  // nullptr: a free slot
        std::uint64_t count = 0;
        std::uint32_t generation = 1;  // moved on when the slot is freed
    };
    std::vector<Owed> owed_completions;
    // Some active message sent to it still waits for its completion (the
    // slots of owed_completions stay, free, once settled).
    bool owes_completions() const noexcept {
        for (const Owed& o : owed_completions)
            if (o.counter) return true;
        return false;
    }
    // Since when its transport has refused our control messages for good with
    // none sent in between: past settings' grace, the peer is failed.
    std::optional<std::chrono::steady_clock::time_point> control_refused_since;

    bool refused = false;  // it refused us (our access token): access_denied
    // What its failed requests end with.
    Status gone_status() const noexcept {
        if (refused) return Status::access_denied;
        return departed ? Status::peer_departed : Status::peer_failed;
    }
    // Gone with no confirmation still to come: failed, or departed by a
    // transport's word rather than its bye (whose ack to ours may follow).
    bool gone_for_good() const noexcept { return failed && (!bye_heard || transport_lost); }
};

// Every rank's Peer, made at setup (one allocation), and the Peers of peers
// outside the job (ids >= size, made when first named; see rt::DynamicPeers).
// A job rank's Peer pointer stays valid for the table's life; a dynamic
// peer's until erase(), which the engine calls once the peer is released and
// nothing names it (no request, no kept message, no one-sided operation).
class PeerTable {
  public:
    PeerTable() = default;
    PeerTable(const PeerTable&) = delete;  // last_ may point into it
    PeerTable& operator=(const PeerTable&) = delete;

    void init(std::uint32_t size, bml::R2* bml, rt::DynamicPeers* dynamic) {
        peers_ = std::make_unique<Peer[]>(size);
        size_ = size;
        bml_ = bml;
        dynamic_peers_ = dynamic;
        for (Rank r = 0; r < size; ++r) peers_[r].rank = r;
    }
    // State, no endpoint needed; nullptr outside the job (save a known
    // dynamic peer's).
    // init() has run: messages can be taken (before it, Engine holds them).
    bool ready() const noexcept { return peers_ != nullptr; }
    Peer* peer(Rank r) noexcept {
        if (r < size_) [[likely]]
            return &peers_[r];
        if (r == any_rank) return nullptr;
        if (r == last_->rank) return last_;
        return dynamic_peer(r);
    }
    // State with an endpoint; nullptr when no transport reaches the rank.
    Peer* send_peer(Rank r) noexcept {
        Peer* p = peer(r);
        if (p && p->ep) [[likely]]
            return p;
        return connect(p);
    }
    bool failed(Rank r) const noexcept {
        const Peer* p = find(r);
        return p ? p->failed : erased(r);
    }
    // Its requests were failed: what it still sends refers to requests that
    // are complete (maybe reused), and to replies already written off.
    bool written_off(Rank r) const noexcept {
        const Peer* p = find(r);
        return p ? p->failure_handled : erased(r);
    }
    // What an operation naming `r` ends with when r names no Peer: the gone
    // status of a dynamic peer erased, else bad_param.
    Status missing(Rank r) const noexcept {
        if (const Peer* p = find(r); p && p->failed) return p->gone_status();
        if (!erased(r)) return Status::bad_param;
        switch (gone_[r - size_]) {
            case gone_refused:
                return Status::access_denied;
            case gone_departed:
                return Status::peer_departed;
            default:
                return Status::peer_failed;
        }
    }
    // What an operation with a failed peer `r` ends with.
    Status gone_status(Rank r) const noexcept {
        const Peer* p = find(r);
        return p ? p->gone_status() : missing(r);
    }
    // Why send_peer(r) gave nullptr: unreachable for a job rank, else missing(r).
    Status why_unsendable(Rank r) const noexcept {
        return r < size_ ? Status::unreachable : missing(r);
    }
    // Every Peer: the job's ranks, then the dynamic peers.
    template <typename F>
    void for_each_dynamic(F f) {
        for (std::size_t i = 0; i < dynamic_.size(); ++i) f(*dynamic_[i]);
    }
    template <typename F>
    void for_each(F f) {
        for (Rank r = 0; r < size_; ++r) f(peers_[r]);
        for (std::size_t i = 0; i < dynamic_.size(); ++i)  // f may name a new peer
            f(*dynamic_[i]);
    }
    // A dynamic peer released: its endpoint is gone, its state stays (failed)
    // for the requests that still point at it.
    void forget_endpoint(Peer* p) noexcept { p->ep = nullptr; }
    // A released dynamic peer's record goes; what stays of it is one byte
    // (departed, failed or refused), for operations that still name its id.  Not
    // during for_each.
    void erase(Peer* p) noexcept;
    std::size_t dynamic_count() const noexcept { return dynamic_.size(); }

  private:
    const Peer* find(Rank r) const noexcept {
        if (r < size_) [[likely]]
            return &peers_[r];
        if (r == any_rank) return nullptr;
        if (r == last_->rank) return last_;
        auto it = by_id_.find(r);
        return it == by_id_.end() ? nullptr : it->second;
    }
    // Given, released and its record gone (an id given but not yet named here
    // is still dynamic).
    bool erased(Rank r) const noexcept {
        return r >= size_ && r != any_rank && r - size_ < gone_.size() && !by_id_.count(r) &&
               !dynamic_peers_->is_dynamic(r);
    }
    Peer* dynamic_peer(Rank r) noexcept;
    Peer* connect(Peer* p) noexcept {
        if (!p) return nullptr;
        if (p->rank >= size_ && (p->failed || !dynamic_peers_->is_dynamic(p->rank)))
            return nullptr;  // departed or released: never connected again
        p->ep = bml_->endpoint(p->rank);
        return p->ep ? p : nullptr;
    }
    std::unique_ptr<Peer[]> peers_;
    std::uint32_t size_ = 0;
    bml::R2* bml_ = nullptr;
    rt::DynamicPeers* dynamic_peers_ = nullptr;
    std::vector<std::unique_ptr<Peer>> dynamic_;  // live dynamic peers, in no order
    std::unordered_map<Rank, Peer*> by_id_;       // the same, by id
    // The dynamic peer named last: a server answering a client names the
    // same peer for the receive, the match and the reply, and a hash look-up
    // for each (about 35 instructions) cost a fifth of what the message costs.
    // Never null: a placeholder of rank any_rank, which callers test for
    // first, so a hit is one compare.
    Peer none_{};
    Peer* last_ = &none_;
    // By id - size, up to the highest id erased: how it went (one byte per id).
    static constexpr std::uint8_t gone_failed = 0, gone_departed = 1, gone_refused = 2;
    std::vector<std::uint8_t> gone_;
};

}  // namespace transit::pml
