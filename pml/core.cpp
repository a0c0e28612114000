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
    if (r == last_->rank) return last_;
    if (auto it = by_id_.find(r); it != by_id_.end()) return last_ = it->second;
    if (!dynamic_peers_ || !dynamic_peers_->is_dynamic(r)) return nullptr;
    try {
        dynamic_.reserve(dynamic_.size() + 1);
        auto p = std::make_unique<Peer>();
        p->rank = r;
        by_id_.emplace(r, p.get());
        dynamic_.push_back(std::move(p));
    } catch (...) {
        by_id_.erase(r);
        return nullptr;
    }
    return last_ = dynamic_.back().get();
}

void PeerTable::erase(Peer* p) noexcept {
    const std::size_t i = p->rank - std::size_t{size_};
    try {
        if (gone_.size() <= i) gone_.resize(i + 1);
    } catch (...) {
        return;  // out of memory: the record stays, whole
    }
    gone_[i] = p->refused ? gone_refused : p->departed ? gone_departed : gone_failed;
    by_id_.erase(p->rank);
    if (last_ == p) last_ = &none_;
    for (auto& slot : dynamic_) {
        if (slot.get() != p) continue;
        std::swap(slot, dynamic_.back());
        dynamic_.pop_back();
        return;
    }
}

}  // namespace transit::pml
