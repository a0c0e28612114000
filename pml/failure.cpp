// Peer failures: a transport reports a peer gone (its process died, its
// connection broke); every request that waits on that peer completes with
// Status::peer_failed and new operations to it fail at once, so nothing hangs.
//
// The btl's error callback may run anywhere inside the btl (in its progress,
// or inside a send we are making), so it only marks the peer.  The requests
// are failed from drain_pending(), a point where no pml loop is walking them.
#include "pml/engine.hpp"

namespace transit::pml {

void Engine::on_btl_error(btl::Module* m, std::uint32_t flags, Rank peer, const char* info,
                          void* cbdata) noexcept {
    auto* e = static_cast<Engine*>(cbdata);
    if (!info) info = "";
    if (peer != any_rank) {
        // The transports report a lost peer as nonfatal (the module itself
        // still works) and fatal alike; either way that peer's messages and
        // replies can no longer all arrive, so its protocol state is dead.
        e->mark_failed(peer, info);
        return;
    }
    if (!(flags & btl::error_flags::fatal)) {
        e->out_.verbose(1, "{} reported: {}", m->name(), info);
        return;
    }
    // The module is unusable: peers it alone carried are lost with it.
    for (const auto& p : e->peers_) {
        if (!p || !p->ep || p->failed) continue;
        bool only_m = true;
        for (const bml::BtlRef& b : p->ep->eager) only_m = only_m && b.module == m;
        if (only_m) e->mark_failed(p->rank, info);
    }
}

// The launcher's word that a rank is gone (Runtime::lost_count): it covers a
// peer no transport knows of, one never talked to or one on another node with
// nothing in flight, which would otherwise leave a receive from it waiting
// for good.  It is acted on after a grace period: a transport that holds
// operations with the peer sees the loss too and reports it in its own order
// (what the peer sent first, then the loss, then its operations ended).
// Failing the peer ahead of that left a rendezvous send over ofi/tcp waiting
// for good in 2 runs of 40 under load.  One atomic read per call; low
// priority, so every 8th progress.
int Engine::check_launcher(void* self) noexcept {
    auto* e = static_cast<Engine*>(self);
    if (e->runtime_->lost_count() == e->lost_seen_) [[likely]]
        return 0;
    const auto now = std::chrono::steady_clock::now();
    if (!e->launcher_grace_end_) {
        e->launcher_grace_end_ = now + e->settings_.launcher_grace;
        return 0;
    }
    if (now < *e->launcher_grace_end_) return 0;
    e->launcher_grace_end_.reset();
    std::vector<Rank> lost;
    try {
        lost = e->runtime_->lost_ranks();
    } catch (...) {
        return 0;  // out of memory: asked again on the next pass
    }
    for (std::size_t i = e->lost_seen_; i < lost.size(); ++i)
        e->mark_failed(lost[i], "the launcher reported its process gone");
    e->lost_seen_ = lost.size();
    return 1;
}

void Engine::mark_failed(Rank r, const char* info) noexcept {
    if (r == rank_) return;  // our own loopback cannot lose us
    if (Peer* p = peer(r)) declare_failed(p, info);
}

void Engine::declare_failed(Peer* p, const char* info) noexcept {
    if (p->failed) return;
    p->failed = true;
    any_failed_ = true;
    failures_to_handle_ = true;
    has_pending_ = true;  // so progress() reaches handle_failures()
    out_.verbose(1, "rank {} is gone: {}", p->rank, info);
}

// A control message is never dropped while its peer lives, so one the
// transport refuses for good is sent again; a transport that refuses them
// all, and never reports the peer lost, would have us retry for good while
// both sides wait on the messages.  Past the grace, the peer is failed here
// (even our own rank: a loopback that refuses everything is as good as gone).
void Engine::control_refused(Peer* p, Status s) noexcept {
    if (!p || p->failed) return;
    const auto now = std::chrono::steady_clock::now();
    if (!p->control_refused_since) {
        p->control_refused_since = now;
        return;
    }
    const auto refused_for = now - *p->control_refused_since;
    if (refused_for < settings_.control_refusal_grace) return;
    log::error(
        "pml: the transport to rank {} has refused every control message for {} ms "
        "(last: '{}'); the peer is taken as failed",
        p->rank, std::chrono::duration_cast<std::chrono::milliseconds>(refused_for).count(),
        to_string(s));
    declare_failed(p, "its transport refused our control messages");
}

void Engine::handle_failures() noexcept {
    failures_to_handle_ = false;  // first: failing requests may run handlers that progress
    for (const auto& p : peers_) {
        if (!p || !p->failed || p->failure_handled) continue;
        p->failure_handled = true;
        drop_queued_to(p.get());
        fail_peer_requests(p.get());
        write_off_completions(p.get());
    }
    update_pending();
}

// Messages and descriptors queued for the peer can never be delivered.
void Engine::drop_queued_to(Peer* p) noexcept {
    for (RawMsg* m = pending_ctrl_.front(); m;) {
        RawMsg* next = m->next;
        if (m->src == p->rank) {
            pending_ctrl_.erase(m);
            drop(m);
        }
        m = next;
    }
    // The pml's descriptors always have a callback (frag_done counts fragments).
    for (auto it = pending_desc_.begin(); it != pending_desc_.end();) {
        if (it->rank != p->rank) {
            ++it;
            continue;
        }
        const PendingDesc pd = *it;
        it = pending_desc_.erase(it);
        end_desc(pd, Status::peer_failed);
    }
    for (RawMsg* m = p->out_of_order.front(); m; m = p->out_of_order.front()) {
        p->out_of_order.erase(m);  // waits for an earlier message that will never come
        drop(m);
    }
    // Replies the target would have sent: written off so flush returns.
    if (p->osc_emulated) p->osc_lost = true;
    p->osc_outstanding -= p->osc_emulated;
    osc_outstanding_total_ -= p->osc_emulated;
    p->osc_emulated = 0;
}

void Engine::fail_peer_requests(Peer* p) noexcept {
    std::size_t failed = 0;
    // Receives posted for exactly this peer (wildcards stay posted).
    while (Req* r = p->posted.pop_front()) {
        r->posted = false;
        r->st().status = Status::peer_failed;
        complete(r);
        ++failed;
    }
    // Requests in flight with it: queued, or waiting for an ack, fin or data.
    reqs_.for_each([&](Req* r) {
        if (r->stage == Req::Stage::done || r->peer != p) return;
        if (r->kind == Req::Kind::recv && !r->matched) return;
        fail_req(r);
        ++failed;
    });
    if (failed > 0)
        log::error("pml: rank {} failed; {} pending request(s) to or from it completed with '{}'",
                   p->rank, failed, to_string(Status::peer_failed));
}

void Engine::fail_req(Req* r) noexcept {
    if (r->queued) {
        (r->kind == Req::Kind::send ? pending_sends_ : pending_gets_).erase(r);
        r->queued = false;
    }
    r->st().status = Status::peer_failed;
    if (r->kind == Req::Kind::send) {
        // Fragments still in the transport complete it from frag_done.
        r->conv.seek(r->total);
        // Split puts still in the transport complete it from rdma_done.
        r->rdma_offset = r->rdma_end;
        if (r->frags_out == 0 && r->rdma_pending == 0) complete(r);
        return;
    }
    // Gets still in the transport complete it from rdma_done.
    r->rdma_offset = r->rdma_end;
    if (r->rdma_pending == 0) complete(r);
}

}  // namespace transit::pml
