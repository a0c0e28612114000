// The shared pieces' out-of-line parts.
#include "pml/core.hpp"

#include <cstring>

#include "pml/active_messages.hpp"

namespace transit::pml {

void Core::complete_internal(Req* r) noexcept {
    if (r->kind == Req::Kind::recv)
        am->finish(r);
    else if (r->origin_counter)
        r->origin_counter->add(1);
    release(r);
}

namespace {

// Whether r is at the stage that waits for a frame of kind k.
bool expects(const Req& r, wire::Kind k) noexcept {
    using S = Req::Stage;
    const bool send = r.kind == Req::Kind::send;
    switch (k) {
        case wire::ack:    // the rendezvous header went; no answer yet
        case wire::split:  // (a split needs the buffer registered for it)
            return send && r.stage == S::none && (k == wire::ack || r.rdma.module != nullptr);
        case wire::fin:  // the receiver got the data, or declined the message
            return send && (r.stage == S::none || r.stage == S::fin_wait);
        case wire::frag:
        case wire::frag_abort:
            return !send && r.matched && r.stage == S::frags;
        case wire::split_fin:
            return !send && r.stage == S::gets && r.split_wait;
        default:
            return false;
    }
}

}  // namespace

Req* Core::request_named(wire::Kind k, WireHandle h, Rank from) noexcept {
    Req* r = reqs.find(h);
    const char* why = nullptr;
    if (!r || r->done()) [[unlikely]]
        why = "it names no live request (forged, or one that ended)";
    else if (!r->peer || r->peer->rank != from) [[unlikely]]
        why = "it names a request with another peer";
    else if (!expects(*r, k)) [[unlikely]]
        why = "its request does not wait for one";
    if (!why) [[likely]]
        return r;
    drops.named(k, from, why);
    return nullptr;
}

void Core::drop(RawMsg* m) noexcept {
    buffers.put(m->data, m->cls);
    m->data = nullptr;
    raws.put(m);
}

RawMsg* Core::keep(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
    RawMsg* m = raws.get();
    if (!m) return nullptr;
    m->data = buffers.get(len ? len : 1, m->cls);
    if (!m->data) {
        raws.put(m);
        return nullptr;
    }
    std::memcpy(m->data, bytes, len);
    m->len = len;
    m->btl_tag = tag;
    return m;
}

}  // namespace transit::pml

namespace transit::pml {

Peer* PeerTable::dynamic_peer(Rank r) noexcept {
    if (r == any_rank) return nullptr;
    const std::size_t i = r - std::size_t{size_};
    if (i < dynamic_.size() && dynamic_[i]) return dynamic_[i].get();
    if (!dynamic_peers_ || !dynamic_peers_->is_dynamic(r)) return nullptr;
    try {
        if (i >= dynamic_.size()) dynamic_.resize(i + 1);
        dynamic_[i] = std::make_unique<Peer>();
    } catch (...) {
        return nullptr;
    }
    dynamic_[i]->rank = r;
    return dynamic_[i].get();
}

}  // namespace transit::pml
