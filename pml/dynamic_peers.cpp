// Peers outside the job (PVFS2 BMI's client/server model): listen gives an
// address, connect names a server by it, disconnect forgets a peer.  A client
// needs no call at the server: its transport admits it (rt::DynamicPeers) and
// its first message arrives like any other.
#include "pml/address.hpp"
#include "pml/engine.hpp"

namespace transit::pml {

std::string Engine::listen() {
    rt::PeerAddress a;
    a.token = runtime_->listen_token();
    a.node_id = runtime_->node_id();
    for (btl::Module* m : framework_->modules()) {
        if (!(m->attributes().flags & btl::flags::dynamic_peers)) continue;
        const std::string prefix = "btl." + m->component().name() + ".";
        for (const auto& [key, blob] : runtime_->published())
            if (key.starts_with(prefix)) a.blobs[key] = blob;
    }
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
    // Only the endpoint is made here (bounded work); the transport connects
    // when the first message leaves.
    if (!c_.peers.send_peer(id)) {
        log::error("pml: connect: {}", bml_->last_error());
        release_peer(id);
        return Status::unreachable;
    }
    peer = id;
    return Status::success;
}

Status Engine::disconnect(Rank peer) noexcept {
    if (peer < c_.size || peer >= runtime_->id_limit()) return Status::bad_param;
    Peer* p = c_.peers.peer(peer);
    if (p && !p->failed) {
        p->departed = true;
        failure_.declare_failed(p, "disconnected");
    }
    release_peer(peer);
    drain_pending();  // its requests end now, with peer_departed
    return Status::success;
}

void Engine::release_peer(Rank peer) noexcept {
    if (Peer* p = c_.peers.peer(peer)) c_.peers.forget_endpoint(p);
    bml_->release(peer);  // the transports close what they hold (tcp says goodbye)
    runtime_->release(peer);
}

// Peers outside the job that departed or failed are released once their
// requests have ended: a server running for days keeps nothing of its
// clients but their (small) Peer state.
void Engine::release_gone_peers() noexcept {
    c_.peers.for_each([&](Peer& p) {
        if (p.rank >= c_.size && p.failure_handled && runtime_->is_dynamic(p.rank))
            release_peer(p.rank);
    });
}

}  // namespace transit::pml
