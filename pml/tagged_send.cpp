// Tagged sends: eager (sendi, else one packed descriptor) and the start of a
// rendezvous (rendezvous.cpp carries it on).
#include <cstring>
#include <memory>

#include "pml/active_messages.hpp"
#include "pml/tagged.hpp"

namespace transit::pml {

Status Tagged::isend_full(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count,
                          const void* buf, std::size_t len, Req*& out, void* user) noexcept {
    out = nullptr;
    Peer* p = c_.peers.send_peer(dst);
    if (!p || p->failed) [[unlikely]]
        return !p ? c_.peers.why_unsendable(dst) : p->gone_status();
    return isend_full(p, tag, iov, count, buf, len, out, user, Path::choose);
}

Status Tagged::isend_full(Peer* p, std::uint32_t tag, const iovec* iov, std::size_t count,
                          const void* buf, std::size_t len, Req*& out, void* user,
                          Path path) noexcept {
    out = nullptr;
    Req* r = c_.new_req(Req::Kind::send, user);
    if (!r) [[unlikely]]
        return Status::out_of_resource;
    r->peer = p;
    r->tag = tag;
    std::destroy_at(&r->conv);
    if (iov)
        std::construct_at(&r->conv, std::span<const iovec>(iov, count));
    else
        std::construct_at(&r->conv, buf, len);
    r->total = r->conv.total();
    RequestStatus& st = r->st();
    st.source = p->rank;
    st.tag = tag;
    st.length = st.sent_length = r->total;
    out = r;
    return start_send(r, path);
}

// The common small send: the transport takes the bytes at once (sendi), so the
// request is born complete and needs none of the state a pending send keeps.
// Anything else (no request free, the transport busy) takes the full path.
bool Tagged::send_inline(Peer* p, std::uint32_t tag, const void* buf, std::size_t len, Req*& out,
                         void* user) noexcept {
    Req* r = c_.reqs.get();
    if (!r) [[unlikely]]
        return false;
    if (!sendi_now(p, tag, buf, len)) [[unlikely]] {
        c_.reqs.put(r);
        return false;
    }
    r->kind = Req::Kind::send;
    r->stage = Req::Stage::none;
    r->internal = false;
    r->user = user;
    r->st() = RequestStatus{p->rank, tag, len, len, Status::success};
    r->set_done();
    out = r;
    return true;
}

// The message handed to the transport at once (sendi), or nothing happened:
// no descriptor is asked for (the full path packs one if it must).
bool Tagged::sendi_now(Peer* p, std::uint32_t tag, const void* buf, std::size_t len) noexcept {
    const bml::BtlRef& b = p->ep->pick_eager();
    btl::Convertor conv(buf, len);
    wire::MatchHdr h{c_.rank, tag, p->send_seq};
    Status s = b.module->sendi(b.endpoint, &conv, &h, sizeof h, len, btl::no_order, 0,
                               wire::tag(wire::match), nullptr);
    if (s != Status::completed && s != Status::success) [[unlikely]]
        return false;
    ++p->send_seq;
    return true;
}

Status Tagged::start_send(Req* r, Path path) noexcept {
    Peer* p = r->peer;
    if (!r->is_am) r->seq = p->send_seq++;
    if (path == Path::eager || (path == Path::choose && eager_fits(p, r->total))) [[likely]] {
        r->stage = Req::Stage::eager;
        if (send_eager(r, path == Path::choose)) return Status::completed;
        enqueue_send(r);
        return Status::success;
    }
    r->stage = Req::Stage::rndv_hdr;
    r->remote_addr = 0;
    r->remote_handle_len = 0;
    if (r->conv.contiguous() && r->total > 0) prepare_rdma(r);
    r->issuing = true;  // an inline FIN must not complete (and free) r under us
    bool sent = send_rndv_header(r);
    r->issuing = false;
    if (!sent) {
        enqueue_send(r);
        return Status::success;
    }
    if (r->stage == Req::Stage::ended) {
        c_.complete(r);
        return Status::completed;
    }
    return Status::success;
}

bool Tagged::advance_send(Req* r) noexcept {
    switch (r->stage) {
        case Req::Stage::eager:
            return send_eager(r, true);
        case Req::Stage::rndv_hdr: {
            r->issuing = true;
            bool sent = send_rndv_header(r);
            r->issuing = false;
            if (sent && r->stage == Req::Stage::ended) c_.complete(r);
            return sent;
        }
        case Req::Stage::frags:
            return pump_frags(r);
        case Req::Stage::puts:
            return issue_puts(r);
        default:
            return true;
    }
}

// `try_sendi`: false when sendi just refused this message (send_inline).
bool Tagged::send_eager(Req* r, bool try_sendi) noexcept {
    Peer* p = r->peer;
    const bml::BtlRef& b = p->ep->pick_eager();
    wire::MatchHdr h{c_.rank, r->tag, r->seq};
    btl::Descriptor* d = nullptr;
    if (try_sendi) {
        Status s = b.module->sendi(b.endpoint, &r->conv, &h, sizeof h, r->total, btl::no_order, 0,
                                   wire::tag(wire::match), &d);
        if (s == Status::completed || s == Status::success) [[likely]] {
            c_.complete(r);
            return true;
        }
    }
    const Status s = outbox_.pack_and_post(p, b, d, wire::tag(wire::match), &h, sizeof h, r->conv,
                                           r->total, Outbox::Refusal::lost);
    if (s == Status::out_of_resource) return false;
    if (!ok(s)) r->st().status = s;
    // The data is copied: the user's buffer is free again.
    c_.complete(r);
    return true;
}

// Each queued request gets one attempt per call; one that is still blocked
// goes to the back (sequence numbers keep matching order regardless).
int Tagged::drain() noexcept {
    int events = 0;
    for (std::size_t n = pending_sends_.size(); n > 0; --n) {
        Req* r = pending_sends_.pop_front();
        r->queued = false;
        if (advance_send(r))
            ++events;
        else
            enqueue_send(r);
    }
    for (std::size_t n = pending_gets_.size(); n > 0; --n) {
        Req* r = pending_gets_.pop_front();
        r->queued = false;
        if (!issue_gets(r)) {
            r->queued = true;
            pending_gets_.push_back(r);
            break;
        }
        ++events;
    }
    return events;
}

// An eager tagged message that never left: without a word its receiver would
// hold every later message from us for good, waiting for its sequence number.
// The stand-in (wire::lost) takes its place and fails the receive it matches.
void Tagged::report_lost_message(const PendingDesc& pd, Status s) noexcept {
    Peer* p = c_.peers.send_peer(pd.rank);
    const btl::Descriptor& d = *pd.desc;
    if (!p || p->failed || d.segment_count == 0 || d.segments[0].len < sizeof(wire::MatchHdr))
        return;
    const std::size_t len = btl::total_length(btl::segments_of(d));
    wire::LostHdr h{};
    std::memcpy(&h.m, d.segments[0].addr, sizeof h.m);
    h.status = static_cast<std::int32_t>(s);
    h.total = len - sizeof(wire::MatchHdr);
    outbox_.send_ctrl(p, wire::lost, &h, sizeof h);
}

// A rendezvous header that never left: its send would wait for an answer for
// good.  It fails with the refusal; a tagged one's receiver gets the stand-in
// for its sequence number, an active message's completion counter the loss.
void Tagged::fail_unsent_rndv(const PendingDesc& pd, Status s) noexcept {
    const btl::Descriptor& d = *pd.desc;
    if (d.segment_count == 0 || d.segments[0].len < sizeof(wire::RndvHdr)) [[unlikely]]
        return;
    wire::RndvHdr h;
    std::memcpy(&h, d.segments[0].addr, sizeof h);
    Req* r = c_.reqs.find(h.sreq);  // our own header: it names a live request
    if (!r) [[unlikely]]
        return;
    Peer* p = c_.peers.send_peer(pd.rank);
    if (h.kind == wire::kind_tagged && p && !p->failed) {
        const wire::LostHdr lost{h.m, static_cast<std::int32_t>(s), h.total};
        outbox_.send_ctrl(p, wire::lost, &lost, sizeof lost);
    } else if (h.kind == wire::kind_am && r->am_completion_token) {
        c_.am->settle_completion(r->peer, r->am_completion_token, true);
    }
    r->st().status = s;
    r->stage = Req::Stage::ended;
    if (!r->issuing) c_.complete(r);  // else the sender completes it when it returns
}

}  // namespace transit::pml
