// The send side (sender.hpp): eager (sendi, else one packed descriptor), the
// rendezvous sender (header; fragments on ack; the split's puts; fin), sends
// refused for good, and the queue of sends waiting for room.
#include "pml/sender.hpp"

#include <cstring>
#include <memory>

#include "pml/active_messages.hpp"
#include "pml/header_parts.hpp"
#include "pml/rdma_mover.hpp"

namespace transit::pml {

Status Sender::isend_full(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count,
                          const void* buf, std::size_t len, Req*& out, void* user) noexcept {
    out = nullptr;
    Peer* p = c_.peers.send_peer(dst);
    if (!p || p->failed) [[unlikely]]
        return !p ? c_.peers.why_unsendable(dst) : p->gone_status();
    return isend_full(p, tag, iov, count, buf, len, out, user, Path::choose);
}

Status Sender::isend_full(Peer* p, std::uint32_t tag, const iovec* iov, std::size_t count,
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
bool Sender::send_inline(Peer* p, std::uint32_t tag, const void* buf, std::size_t len, Req*& out,
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
bool Sender::sendi_now(Peer* p, std::uint32_t tag, const void* buf, std::size_t len) noexcept {
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

Status Sender::start_send(Req* r, Path path) noexcept {
    Peer* p = r->peer;
    if (!r->is_am) r->seq = p->send_seq++;
    if (path == Path::eager || (path == Path::choose && eager_fits(p, r->total))) [[likely]] {
        r->stage = Req::Stage::eager;
        if (send_eager(r, path == Path::choose)) return Status::completed;
        enqueue_send(r);
        return Status::success;
    }
    return start_rndv_send(r);
}

Status Sender::start_rndv_send(Req* r) noexcept {
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

bool Sender::advance_send(Req* r) noexcept {
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
bool Sender::send_eager(Req* r, bool try_sendi) noexcept {
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
int Sender::drain() noexcept {
    int events = 0;
    for (std::size_t n = pending_sends_.size(); n > 0; --n) {
        Req* r = pending_sends_.pop_front();
        r->queued = false;
        if (advance_send(r))
            ++events;
        else
            enqueue_send(r);
    }
    return events;
}

// An eager tagged message that never left: without a word its receiver would
// hold every later message from us for good, waiting for its sequence number.
// The stand-in (wire::lost) takes its place and fails the receive it matches.
void Sender::report_lost_message(const PendingDesc& pd, Status s) noexcept {
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
void Sender::fail_unsent_rndv(const PendingDesc& pd, Status s) noexcept {
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

void Sender::on_throttle(const std::byte* b, std::size_t) noexcept {
    wire::ThrottleHdr h;
    std::memcpy(&h, b, sizeof h);
    if (Peer* p = c_.peers.peer(h.src)) p->throttled = h.on != 0;
}

// The rendezvous, the sender's half.  The header (send_rndv_header) names the
// message's length and, when a module can get from the send buffer, its
// address and registration (prepare_rdma).  The receiver answers fin (it
// pulled the data), ack (we stream fragments: pump_frags) or split (we put the
// tail it names: on_split, issue_puts, then split_fin).

// Registers the send buffer with the first module that can get from it, so the
// receiver can pull the data in one rdma get.
void Sender::prepare_rdma(Req* r) noexcept {
    for (const bml::BtlRef& b : r->peer->ep->rdma) {
        const auto& a = b.module->attributes();
        if (!(a.flags & btl::flags::get)) continue;
        const void* addr = r->conv.contiguous_at(r->total);
        if (!addr) return;
        std::size_t hlen = a.registration_handle_size;
        if (hlen + r->am_header_len > r->remote_handle.size()) continue;
        btl::RegistrationHandle* h = nullptr;
        if (hlen > 0) {
            h = b.rdma->register_mem(b.endpoint, const_cast<void*>(addr), r->total,
                                     btl::reg_flags::remote_read);
            if (!h) continue;
            // The user header (am) sits behind the handle bytes: move it.
            if (r->am_header_len)
                std::memmove(r->remote_handle.data() + hlen, r->remote_handle.data(),
                             r->am_header_len);
            std::memcpy(r->remote_handle.data(), h, hlen);
        }
        r->local_handle = h;
        r->handle_module = b.module;
        r->rdma = b;  // the receiver may ask for a split: we put with it
        r->remote_handle_len = static_cast<std::uint16_t>(hlen);
        r->remote_addr = reinterpret_cast<std::uint64_t>(addr);
        r->rdma_component = c_.component_hash[b.index];
        return;
    }
}

bool Sender::send_rndv_header(Req* r) noexcept {
    wire::RndvHdr h{};
    h.m = {c_.rank, r->is_am ? r->am_handler : r->tag, r->seq};
    h.total = r->total;
    h.sreq = c_.reqs.handle(*r);
    h.addr = r->remote_addr;
    h.rdma_component = r->rdma_component;
    h.handle_len = r->remote_handle_len;
    h.kind = r->is_am ? wire::kind_am : wire::kind_tagged;
    h.am_header_len = r->am_header_len;
    h.am_target_counter = r->am_target_counter;
    h.am_completion_token = r->am_completion_token;
    iovec v{r->remote_handle.data(), std::size_t{r->remote_handle_len} + r->am_header_len};
    r->stage = Req::Stage::none;  // now waiting for an ack or a fin
    // Refused for good, it is not sent again: end_desc failed the request.
    const bml::BtlRef* path = r->data_path(sizeof h + v.iov_len);
    if (outbox_.send_over(r->peer, path ? *path : r->peer->ep->pick_eager(), wire::tag(wire::rndv),
                          &h, sizeof h, &v, 1, Outbox::Refusal::lost) == Status::out_of_resource) {
        r->stage = Req::Stage::rndv_hdr;
        return false;
    }
    return true;
}

void Sender::on_ack(const std::byte* b, std::size_t, Rank from) noexcept {
    wire::AckHdr a;
    std::memcpy(&a, b, sizeof a);
    Req* r = c_.request_named(wire::ack, a.sreq, from);
    if (!r) [[unlikely]]
        return;
    // No rdma after all: release the registration, stream fragments instead.
    if (r->local_handle) {
        r->handle_module->rdma()->deregister_mem(r->local_handle);
        r->local_handle = nullptr;
    }
    r->remote_req = a.rreq;
    r->stage = Req::Stage::frags;
    r->conv.seek(0);
    // Inside our own send of the header (a loopback btl): pump from progress.
    if (r->issuing || !pump_frags(r)) enqueue_send(r);
}

// Fragments go while the transport takes them.  At its first refusal (a
// peer queue or a descriptor pool full) the pump stops: the refused fragment
// waits in the outbox, and no new one is packed until every fragment waiting
// for that peer has gone.  Packing on would only fill the outbox, hold the
// whole descriptor pool (rendezvous headers and acks of other messages wait
// for one) and cost a refused send per fragment.
bool Sender::pump_frags(Req* r) noexcept {
    bml::Endpoint* ep = r->peer->ep;
    r->issuing = true;
    while (r->conv.remaining() > 0) {
        if (r->peer->descs_waiting > 0) {
            r->issuing = false;
            return false;
        }
        bml::BtlRef& b = ep->pick_send();
        std::size_t max = b.module->attributes().max_send_size - sizeof(wire::FragHdr);
        std::size_t size = r->conv.remaining() < max ? r->conv.remaining() : max;
        std::uint64_t offset = r->conv.position();
        constexpr std::uint32_t fl =
            btl::des_flags::btl_ownership | btl::des_flags::send_always_callback;
        btl::Descriptor* d = b.module->prepare_src(b.endpoint, r->conv, btl::no_order,
                                                   sizeof(wire::FragHdr), size, fl);
        if (!d) {
            r->issuing = false;
            return false;
        }
        wire::FragHdr fh{r->remote_req, offset};
        std::memcpy(d->segments[0].addr, &fh, sizeof fh);
        d->flags |= fl;
        d->cbfunc = &Sender::frag_done;
        d->cbdata = r;
        d->context = this;
        ++r->frags_out;
        // A refused fragment was counted back and its status kept by frag_done.
        if (!ok(outbox_.post_desc({r->peer->rank, b.module, b.endpoint, d, wire::tag(wire::frag)})))
            [[unlikely]]
            r->conv.seek(r->total);
    }
    r->issuing = false;
    if (r->frags_out == 0) end_frags(r);
    return true;
}

void Sender::frag_done(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) noexcept {
    auto* r = static_cast<Req*>(d->cbdata);
    auto* e = static_cast<Sender*>(d->context);
    if (ok(s)) [[likely]] {
        r->frag_bytes_sent += btl::total_length(btl::segments_of(*d)) - sizeof(wire::FragHdr);
        // A stream the peer's side keeps taking is a live link: the receiver
        // sends nothing back until the end, and its answer to a probe could
        // wait behind its own queued fragments (KeepAlive).
        r->peer->watch.heard = true;
    } else {
        Core::transfer_failed(r, s);
    }
    if (--r->frags_out == 0 && !r->issuing && r->conv.remaining() == 0) e->end_frags(r);
}

// Every fragment is accounted for.  When one never went and the receiver is
// alive, it would wait for those bytes for good: it is told what will arrive.
void Sender::end_frags(Req* r) noexcept {
    const Status s = r->st().status;
    if (!ok(s) && s != Status::peer_failed && !r->peer->failed) [[unlikely]] {
        wire::FragAbortHdr h{r->remote_req, r->frag_bytes_sent, static_cast<std::int32_t>(s), 0};
        outbox_.send_ctrl(r->peer, wire::frag_abort, &h, sizeof h);
        c_.out.verbose(1, "a message of {} bytes to rank {} stopped after {} bytes: {}", r->total,
                       r->peer->rank, r->frag_bytes_sent, to_string(s));
    }
    c_.complete(r);
}

void Sender::on_fin(const std::byte* b, std::size_t, Rank from) noexcept {
    wire::FinHdr f;
    std::memcpy(&f, b, sizeof f);
    Req* r = c_.request_named(wire::fin, f.sreq, from);
    if (!r) [[unlikely]]
        return;
    if (r->issuing) {
        r->stage = Req::Stage::ended;  // the sender completes it when it returns
        return;
    }
    c_.complete(r);
}

// The receiver asks us to put the tail of the message while it gets the head.
void Sender::on_split(const std::byte* b, std::size_t n, Rank from) noexcept {
    wire::SplitHdr h;
    std::memcpy(&h, b, sizeof h);
    Req* r = c_.request_named(wire::split, h.sreq, from);
    if (!r) [[unlikely]]
        return;
    // The receiver gets nothing: it sends no fin (finish_get), even when this
    // split is refused below.
    r->put_all = h.offset == 0;
    const std::size_t expected = r->rdma.module->attributes().registration_handle_size;
    // The tail asked for lies inside our buffer: we read [offset, offset + len).
    const bool inside = h.offset < r->total && h.len > 0 && h.len <= r->total - h.offset;
    if (!wire::split_parts({b, n}) || h.handle_len > r->remote_handle.size() ||
        h.handle_len != expected || !inside) [[unlikely]] {
        // Nothing to put with, or a tail outside the message: the receiver is
        // told our half failed (split_fin)
        // and still sends its fin, so neither side waits for good.
        c_.drops.malformed(wire::split, n, r->peer->rank);
        r->remote_req = h.rreq;
        r->st().status = Status::protocol_error;
        return finish_puts(r);
    }
    // remote_addr still names our own buffer, as the rendezvous header sent it.
    r->buf = reinterpret_cast<void*>(r->remote_addr);
    r->remote_addr = h.addr;
    std::memcpy(r->remote_handle.data(), b + sizeof h, h.handle_len);
    r->remote_handle_len = h.handle_len;
    r->remote_req = h.rreq;
    r->rdma_offset = h.offset;
    r->rdma_end = h.offset + h.len;
    r->stage = Req::Stage::puts;
    // Inside our own send of the header (a loopback btl): put from progress.
    if (r->issuing || !issue_puts(r)) enqueue_send(r);
}

// Only for a split: request_named let none in for a send registered with no module.
bool Sender::issue_puts(Req* r) noexcept {
    if (issue_rdma(r, &Sender::put_done, this) == RdmaIssue::blocked) return false;
    if (r->rdma_pending == 0) finish_puts(r);
    return true;
}

void Sender::put_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void* context,
                      void* cbdata, Status s) noexcept {
    auto* r = static_cast<Req*>(cbdata);
    if (rdma_piece_done(r, s)) static_cast<Sender*>(context)->finish_puts(r);
}

// Our half is in place: tell the receiver, then wait for its FIN (it still reads
// our buffer until then), except when we put it all.
void Sender::finish_puts(Req* r) noexcept {
    r->stage = Req::Stage::fin_wait;
    if (r->peer->failed) [[unlikely]] {
        // fail_req may have left it to us while puts were in flight; no fin
        // will come.
        r->st().status = Status::peer_failed;
        c_.complete(r);
        return;
    }
    wire::SplitFinHdr f{r->remote_req, static_cast<std::int32_t>(r->st().status), 0};
    outbox_.send_ctrl(r->peer, wire::split_fin, &f, sizeof f, r->data_path(sizeof f));
    if (!r->put_all) return;
    r->stage = Req::Stage::ended;
    if (!r->issuing) c_.complete(r);  // else the sender completes it when it returns
}

}  // namespace transit::pml
