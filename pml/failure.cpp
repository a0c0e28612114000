// Peer failures: marking a peer failed, then failing what waits on it.
#include "pml/failure.hpp"

#include "pml/active_messages.hpp"
#include "pml/one_sided.hpp"
#include "pml/outbox.hpp"
#include "pml/receiver.hpp"
#include "pml/sender.hpp"

namespace transit::pml {

void Failure::on_btl_error(btl::Module* m, std::uint32_t flags, Rank peer, const char* info,
                           void* cbdata) noexcept {
    auto* e = static_cast<Failure*>(cbdata);
    if (!info) info = "";
    if (peer != any_rank) {
        // The transports report a lost peer as nonfatal (the module itself
        // still works) and fatal alike; either way that peer's messages and
        // replies can no longer all arrive, so its protocol state is dead.
        if (Peer* p = e->c_.peers.peer(peer)) {
            if ((flags & btl::error_flags::departed) && !p->failed) p->departed = true;
            if ((flags & btl::error_flags::refused) && !p->failed) {
                // The one line that says why: its operations end access_denied.
                p->refused = true;
                log::error("pml: peer {}: {}", peer, info);
            }
            e->transport_lost(p);
        }
        e->mark_failed(peer, info);
        return;
    }
    if (!(flags & btl::error_flags::fatal)) {
        e->c_.out.verbose(1, "{} reported: {}", m->name(), info);
        return;
    }
    // The module is unusable: peers it alone carried are lost with it.
    e->c_.peers.for_each([&](const Peer& p) {
        if (!p.ep || p.failed) return;
        bool only_m = true;
        for (const bml::BtlRef& b : p.ep->eager) only_m = only_m && b.module == m;
        if (only_m) e->mark_failed(p.rank, info);
    });
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
int Failure::check_launcher(void* self) noexcept {
    auto* e = static_cast<Failure*>(self);
    if (e->runtime_.lost_count() == e->lost_seen_) [[likely]]
        return 0;
    const auto now = std::chrono::steady_clock::now();
    if (!e->launcher_grace_end_) {
        e->launcher_grace_end_ = now + e->c_.settings.launcher_grace;
        return 0;
    }
    if (now < *e->launcher_grace_end_) return 0;
    e->launcher_grace_end_.reset();
    std::vector<Rank> lost;
    try {
        lost = e->runtime_.lost_ranks();
    } catch (...) {
        return 0;  // out of memory: asked again on the next pass
    }
    for (std::size_t i = e->lost_seen_; i < lost.size(); ++i)
        e->mark_failed(lost[i], "the launcher reported its process gone");
    e->lost_seen_ = lost.size();
    return 1;
}

// A peer that said bye and was acked lingers until its transport closes
// (farewell.cpp): that is now, and it is released at the next progress.
void Failure::transport_lost(Peer* p) noexcept {
    p->transport_lost = true;
    if (!p->linger_until) return;
    p->linger_until.reset();
    to_handle_ = true;
    c_.has_pending = true;
}

void Failure::mark_failed(Rank r, const char* info) noexcept {
    if (r == c_.rank) return;  // our own loopback cannot lose us
    if (Peer* p = c_.peers.peer(r)) declare_failed(p, info);
}

void Failure::declare_failed(Peer* p, const char* info) noexcept {
    if (p->failed) return;
    p->failed = true;
    try {
        p->gone_reason = info;
    } catch (...) {
        // Out of memory: the log says less.
    }
    c_.any_failed = true;
    c_.receive_checks = true;
    to_handle_ = true;
    c_.has_pending = true;  // so progress() reaches handle()
    c_.out.verbose(1, "rank {} is gone: {}", p->rank, info);
}

// A control message is never dropped while its peer lives, so one the
// transport refuses for good is sent again; a transport that refuses them
// all, and never reports the peer lost, would have us retry for good while
// both sides wait on the messages.  Past the grace, the peer is failed here
// (even our own rank: a loopback that refuses everything is as good as gone).
void Failure::control_refused(Peer* p, Status s) noexcept {
    if (!p || p->failed) return;
    const auto now = std::chrono::steady_clock::now();
    if (!p->control_refused_since) {
        p->control_refused_since = now;
        return;
    }
    const auto refused_for = now - *p->control_refused_since;
    if (refused_for < c_.settings.control_refusal_grace) return;
    log::error(
        "pml: the transport to rank {} has refused every control message for {} ms "
        "(last: '{}'); the peer is taken as failed",
        p->rank, std::chrono::duration_cast<std::chrono::milliseconds>(refused_for).count(),
        to_string(s));
    declare_failed(p, "its transport refused our control messages");
}

void Failure::handle() noexcept {
    to_handle_ = false;  // first: failing requests may run handlers that progress
    c_.peers.for_each([&](Peer& p) {
        if (!p.failed || p.failure_handled) return;
        p.failure_handled = true;
        drop_queued_to(&p);
        fail_peer_requests(&p);
        am_.write_off_completions(&p);
    });
}

// Messages and descriptors queued for the peer can never be delivered.
void Failure::drop_queued_to(Peer* p) noexcept {
    outbox_.drop_queued_to(p);
    for (RawMsg* m = p->out_of_order.front(); m; m = p->out_of_order.front()) {
        p->out_of_order.erase(m);  // waits for an earlier message that will never come
        c_.drop(m);
    }
    osc_.write_off(p);
}

void Failure::fail_peer_requests(Peer* p) noexcept {
    std::size_t failed = 0;
    // Receives posted for exactly this peer (wildcards stay posted).
    while (Req* r = p->posted.pop_front()) {
        r->posted = false;
        r->st().status = p->gone_status();
        c_.complete(r);
        ++failed;
    }
    // Requests in flight with it: queued, or waiting for an ack, fin or data.
    // Chunk by chunk, so that requests made while failing these (by the
    // callbacks) are visited too; requests never move.
    for (std::size_t c = 0; c < c_.reqs.chunk_count(); ++c) {
        for (Req& r : c_.reqs.chunk_items(c)) {
            // Done (or free), or ended inside its own send (its sender completes it).
            if (r.done() || r.stage == Req::Stage::ended || r.peer != p) continue;
            if (r.kind == Req::Kind::recv && !r.matched) continue;
            fail_req(&r);
            ++failed;
        }
    }
    if (failed > 0 && (p->departed || p->refused))
        c_.out.verbose(1, "peer {} departed; {} pending request(s) with it completed with '{}'",
                       p->rank, failed, to_string(p->gone_status()));
    else if (failed > 0)
        log::error(
            "pml: {} {} failed ({}); {} pending request(s) to or from it completed "
            "with '{}'",
            p->rank < c_.size ? "rank" : "peer outside the job", p->rank, p->gone_reason, failed,
            to_string(Status::peer_failed));
}

void Failure::fail_req(Req* r) noexcept {
    if (r->kind == Req::Kind::send)
        sender_.unqueue(r);
    else
        receiver_.unqueue(r);
    r->st().status = r->peer->gone_status();
    if (r->kind == Req::Kind::send) {
        // Fragments still in the transport complete it from frag_done.
        r->conv.seek(r->total);
        // Split puts still in the transport complete it from Sender::put_done.
        r->rdma_offset = r->rdma_end;
        if (r->frags_out == 0 && r->rdma_pending == 0) c_.complete(r);
        return;
    }
    // Gets still in the transport complete it from Receiver::get_done.
    r->rdma_offset = r->rdma_end;
    if (r->rdma_pending == 0) c_.complete(r);
}

}  // namespace transit::pml
