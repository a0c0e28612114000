// Peers outside the job (PVFS2 BMI's client/server model): listen gives an
// address, connect names a server by it, disconnect forgets a peer.  A client
// needs no call at the server: its transport admits it (rt::DynamicPeers) and
// its first message arrives like any other.
#include "pml/address.hpp"
#include "pml/engine.hpp"

namespace transit::pml {

std::string Engine::listen() {
    const rt::PeerAddress a = listening_address(*runtime_, framework_->modules());
    if (a.blobs.empty())
        throw std::runtime_error(
            "listen: no selected transport carries peers outside the job (tcp does)");
    c_.any_dynamic = c_.receive_checks = true;
    return format_address(a);
}

Status Engine::connect(std::string_view address, Rank& peer) {
    peer = any_rank;
    rt::PeerAddress a;
    if (const std::string bad = parse_address(address, a); !bad.empty()) {
        log::error("pml: connect: not a Transit address: {}", bad);
        return Status::bad_param;
    }
    const Rank id = runtime_->add_server(std::move(a));
    if (id == any_rank) return Status::out_of_resource;
    c_.any_dynamic = c_.receive_checks = true;
    // The endpoint is made here, with bounded work: tcp opens its connection
    // (a server gone refuses it), the handshake goes on from progress.
    if (!c_.peers.send_peer(id)) {
        // The bml has logged why (once: it explains every unreachable peer).
        // No transport holds anything of it (a release in the bml would
        // build its endpoint, and connect, again): only its records go.
        if (Peer* p = c_.peers.peer(id)) c_.peers.erase(p);
        runtime_->release(id);
        return Status::unreachable;
    }
    peer = id;
    return Status::success;
}

Status Engine::disconnect(Rank peer, Disconnect how) noexcept {
    if (peer < c_.size || peer >= runtime_->id_limit()) return Status::bad_param;
    Peer* p = c_.peers.peer(peer);
    Status result = Status::success;
    if (how == Disconnect::graceful && p && !p->failed &&
        c_.settings.disconnect_linger.count() > 0) {
        Peer* const one[] = {p};
        farewell(one);
        if (!farewell_done(*p)) result = p->gone_for_good() ? p->gone_status() : Status::timeout;
    }
    if (p && !p->failed) {
        p->departed = true;
        failure_.declare_failed(p, "disconnected");
    }
    // A peer whose own bye we acked meanwhile lingers: released once its
    // transport closes (farewell.cpp), so our ack is not cut off.
    if (!p || !p->linger_until) release_peer(p, peer);
    drain_pending();  // its requests end now, with peer_departed
    return result;
}

// Its transports close what they hold (tcp says goodbye) and the runtime
// forgets it; the Peer record stays until nothing names it.
void Engine::release_peer(Peer* p, Rank peer) noexcept {
    if (p) {
        if (p->released) return;
        p->released = true;
        c_.peers.forget_endpoint(p);
    }
    bml_->release(peer);
    runtime_->release(peer);
}

// Whether anything still points at a released peer's record: a request in
// flight with it, a message it sent that no receive took yet (a wildcard
// receive may still take it), a one-sided operation or a completion owed.
bool Engine::named(const Peer& p) noexcept {
    if (!p.unexpected.empty() || !p.posted.empty() || !p.out_of_order.empty() ||
        p.osc_outstanding != 0 || p.owes_completions() || p.saying_bye || p.in_byes)
        return true;
    for (std::size_t c = 0; c < c_.reqs.chunk_count(); ++c)
        for (const Req& r : c_.reqs.chunk_items(c))
            if (r.peer == &p && !r.done()) return true;
    return false;
}

// Peers outside the job that departed or failed, once their requests have
// ended: released (their transport endpoints and buffers go), reported
// (on_peer_event), and their records erased once nothing names them, so a
// server running for days keeps nothing of its clients.  A record still
// named (by messages no receive took) is looked at again at the next
// departure or failure.
void Engine::release_gone_peers() noexcept {
    erasable_.clear();
    c_.peers.for_each([&](Peer& p) {
        if (p.rank < c_.size || !p.failure_handled) return;
        if (p.linger_until) return;  // released once it closes, or at its linger time
        if (!p.released) outbox_.drop_queued_to(&p);  // an ack kept for its linger
        release_peer(&p, p.rank);
        if (!p.left_reported) {
            p.left_reported = true;
            queue_event(p.rank, p.departed ? PeerEventKind::departed : PeerEventKind::failed);
        }
        if (named(p)) return;
        try {
            erasable_.push_back(&p);
        } catch (...) {
            // Kept for now: the next pass erases it.
        }
    });
    for (Peer* p : erasable_) {
        receiver_.forget(p);
        c_.peers.erase(p);
    }
    erasable_.clear();
}

void Engine::on_admit(void* self, Rank peer) noexcept {
    static_cast<Engine*>(self)->queue_event(peer, PeerEventKind::joined);
}

void Engine::queue_event(Rank peer, PeerEventKind kind) noexcept {
    if (!event_fn_) return;
    try {
        events_.push_back({peer, kind});
    } catch (...) {
        log::error("pml: out of memory: the event of peer {} is lost", peer);
        return;
    }
    c_.has_pending = true;
}

// From drain_pending: fn may call the Context, which may queue events or
// drain again, so it is given a batch of its own.
void Engine::deliver_events() noexcept {
    if (!delivering_.empty()) return;  // a handler's own call: its batch goes on first
    delivering_.swap(events_);
    for (const PeerEvent& e : delivering_)
        if (event_fn_ && c_.ctx) event_fn_(*c_.ctx, e, event_user_);
    delivering_.clear();
}

Engine::DynamicRecords Engine::dynamic_records() noexcept {
    DynamicRecords d;
    d.pml = c_.peers.dynamic_count();
    d.runtime = runtime_->live_count();
    d.bml = bml_->dynamic_count();
    for (btl::Module* m : framework_->modules())
        if (auto* r = btl::capability<btl::DynamicPeerRecords>(*m)) {
            d.transports += r->dynamic_endpoints();
            d.fast_paths += r->dynamic_fast_paths();
        }
    return d;
}

}  // namespace transit::pml
