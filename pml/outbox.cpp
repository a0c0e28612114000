// The outbox: control messages and descriptors waiting for a btl's room.
#include "pml/outbox.hpp"

#include <cstring>

#include "pml/failure.hpp"
#include "pml/sender.hpp"

namespace transit::pml {

std::size_t Outbox::ctrl_payload_limit(Peer* p) const noexcept {
    const auto& a = p->ep->eager[0].module->attributes();
    return a.eager_limit > sizeof(wire::OscHdr) ? a.eager_limit - sizeof(wire::OscHdr) : 0;
}

Status Outbox::send_over(Peer* p, const bml::BtlRef& b, btl::Tag tag, const void* hdr,
                         std::size_t hdr_len, const iovec* pieces, std::size_t count,
                         Refusal refusal) noexcept {
    btl::Convertor conv(std::span<const iovec>(pieces, count));
    std::size_t data_len = conv.total();
    btl::Descriptor* d = nullptr;
    Status s =
        b.module->sendi(b.endpoint, &conv, hdr, hdr_len, data_len, btl::no_order, 0, tag, &d);
    if (s == Status::completed || s == Status::success) {
        if (refusal == Refusal::retried) control_sent(p);
        return Status::success;
    }
    return pack_and_post(p, b, d, tag, hdr, hdr_len, conv, data_len, refusal);
}

Status Outbox::pack_and_post(Peer* p, const bml::BtlRef& b, btl::Descriptor* d, btl::Tag tag,
                             const void* hdr, std::size_t hdr_len, btl::Convertor& conv,
                             std::size_t data_len, Refusal refusal) noexcept {
    if (!d) d = b.module->alloc(b.endpoint, btl::no_order, hdr_len + data_len, 0);
    if (!d) return Status::out_of_resource;
    auto* at = static_cast<std::byte*>(d->segments[0].addr);
    std::memcpy(at, hdr, hdr_len);
    conv.seek(0);
    conv.pack(at + hdr_len, data_len);
    d->segments[0].len = hdr_len + data_len;
    d->segment_count = 1;
    d->flags |= btl::des_flags::btl_ownership;
    d->cbfunc = [](btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) {};
    const Status posted =
        post_desc({p->rank, b.module, b.endpoint, d, tag, refusal == Refusal::retried}, refusal);
    return ok(posted) ? Status::success : posted;
}

Status Outbox::post_desc(const PendingDesc& pd, Refusal refusal) noexcept {
    const Status s = pd.module->send(pd.endpoint, pd.desc, pd.tag);
    if (s != Status::out_of_resource) [[likely]] {
        if (!ok(s))
            end_desc(pd, s, refusal);
        else if (pd.control)
            control_sent(c_.peers.peer(pd.rank));
        return s;
    }
    try {
        pending_desc_.push_back(pd);
    } catch (...) {
        end_desc(pd, Status::out_of_resource);  // no memory to queue it: it fails, nothing leaks
        return Status::out_of_resource;
    }
    if (Peer* p = c_.peers.peer(pd.rank)) ++p->descs_waiting;
    c_.has_pending = true;
    return Status::success;
}

void Outbox::left_queue(const PendingDesc& pd) noexcept {
    if (Peer* p = c_.peers.peer(pd.rank); p && p->descs_waiting > 0) --p->descs_waiting;
}

void Outbox::end_desc(const PendingDesc& pd, Status s, Refusal refusal) noexcept {
    // An eager send completed when its data was copied, so its user saw
    // success: the log and the receiver's failed receive (wire::lost) are the
    // word that the message never left.  (A lost peer's messages are
    // accounted for by the failure report.)
    if (s != Status::peer_failed && refusal == Refusal::lost) {
        log::error("pml: a message to rank {} over {} was refused: '{}'", pd.rank,
                   pd.module->name(), to_string(s));
        if (pd.tag == wire::tag(wire::match))
            sender_->report_lost_message(pd, s);
        else if (pd.tag == wire::tag(wire::rndv))
            sender_->fail_unsent_rndv(pd, s);
    }
    if (pd.desc->cbfunc) pd.desc->cbfunc(pd.module, pd.endpoint, pd.desc, s);
    pd.module->free(pd.desc);
}

// Copies a refused control message's bytes back into the control queue (the
// peer's failure, when it comes, drops it there).  False when out of memory.
bool Outbox::requeue_control(const PendingDesc& pd) noexcept {
    Peer* p = c_.peers.send_peer(pd.rank);
    const btl::Descriptor& d = *pd.desc;
    const std::size_t len = btl::total_length(btl::segments_of(d));
    if (!p || p->failed) return false;
    RawMsg* m = c_.raws.get();
    if (!m) return false;
    m->data = c_.buffers.get(len, m->cls);
    if (!m->data) {
        c_.raws.put(m);
        return false;
    }
    btl::gather_segments(btl::segments_of(d), m->data);
    m->len = len;
    m->tag = static_cast<std::uint32_t>(len);  // all of it goes as the header
    m->btl_tag = pd.tag;
    m->src = p->rank;
    pending_ctrl_.push_back(m);
    c_.has_pending = true;
    return true;
}

Status Outbox::send_ctrlv(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                          const iovec* pieces, std::size_t count,
                          const bml::BtlRef* path) noexcept {
    if (p->failed) [[unlikely]]
        return Status::peer_failed;  // nobody would ever answer
    // Refused at once, it is kept and retried like a message with no room.
    // Behind a queued message to the same peer it queues too: control
    // messages (emulated atomics, for one) are applied in the order sent.
    if (pending_ctrl_.empty() && p->descs_waiting == 0) [[likely]] {
        const Status s = send_over(p, path ? *path : p->ep->pick_eager(), wire::tag(kind), hdr,
                                   hdr_len, pieces, count, Refusal::retried);
        if (ok(s)) [[likely]]
            return Status::success;
        if (s != Status::out_of_resource) failure_->control_refused(p, s);
    }
    // Keep a copy and retry from progress: control messages are never dropped.
    std::size_t data_len = 0;
    for (std::size_t i = 0; i < count; ++i) data_len += pieces[i].iov_len;
    RawMsg* m = c_.raws.get();
    if (!m) return Status::out_of_resource;
    m->data = c_.buffers.get(hdr_len + data_len, m->cls);
    if (!m->data) {
        c_.raws.put(m);
        return Status::out_of_resource;
    }
    std::memcpy(m->data, hdr, hdr_len);
    std::size_t at = hdr_len;
    for (std::size_t i = 0; i < count; ++i) {
        if (pieces[i].iov_len) std::memcpy(m->data + at, pieces[i].iov_base, pieces[i].iov_len);
        at += pieces[i].iov_len;
    }
    m->len = hdr_len + data_len;
    m->tag = static_cast<std::uint32_t>(hdr_len);
    m->btl_tag = wire::tag(kind);
    m->src = p->rank;
    pending_ctrl_.push_back(m);
    c_.has_pending = true;
    return Status::success;
}

int Outbox::drain() noexcept {
    int events = 0;
    while (!pending_desc_.empty()) {
        const PendingDesc pd = pending_desc_.front();
        const Status s = pd.module->send(pd.endpoint, pd.desc, pd.tag);
        if (s == Status::out_of_resource) break;
        pending_desc_.erase(pending_desc_.begin());
        left_queue(pd);
        // Refused for good (the btl lost the peer first): the descriptor never
        // went, so its callback must still come, or its request waits forever.
        // A control message goes back to the queue it would have been kept in.
        if (!ok(s)) [[unlikely]] {
            const bool requeued = pd.control && requeue_control(pd);
            end_desc(pd, s, requeued ? Refusal::retried : Refusal::lost);
            if (requeued) failure_->control_refused(c_.peers.peer(pd.rank), s);
        } else if (pd.control) {
            control_sent(c_.peers.peer(pd.rank));
        }
        ++events;
    }
    while (RawMsg* m = pending_ctrl_.front()) {
        Peer* p = c_.peers.send_peer(m->src);
        if (!p || (p->failed && !lingering_ack(*p, m->btl_tag))) [[unlikely]] {
            // Queued before the failure was handled.
            pending_ctrl_.erase(m);
            c_.drop(m);
            continue;
        }
        if (p->descs_waiting > 0) break;  // its predecessor goes first
        iovec v{m->data + m->tag, m->len - m->tag};
        const Status s = try_send(p, m->btl_tag, m->data, m->tag, &v, 1, Refusal::retried);
        if (!ok(s)) {
            if (s != Status::out_of_resource) failure_->control_refused(p, s);
            break;
        }
        pending_ctrl_.erase(m);
        c_.drop(m);
        ++events;
    }
    return events;
}

void Outbox::drop_queued_to(Peer* p) noexcept {
    for (RawMsg* m = pending_ctrl_.front(); m;) {
        RawMsg* next = m->next;
        if (m->src == p->rank && !lingering_ack(*p, m->btl_tag)) {
            pending_ctrl_.erase(m);
            c_.drop(m);
        }
        m = next;
    }
    // The pml's descriptors always have a callback (frag_done counts fragments).
    for (auto it = pending_desc_.begin(); it != pending_desc_.end();) {
        if (it->rank != p->rank || lingering_ack(*p, it->tag)) {
            ++it;
            continue;
        }
        const PendingDesc pd = *it;
        it = pending_desc_.erase(it);
        left_queue(pd);
        end_desc(pd, Status::peer_failed);
    }
}

}  // namespace transit::pml
