// The rendezvous, both halves.  The sender's header (send_rndv_header) names
// the message's length and, when a module can get from the send buffer, its
// address and registration.  The rendezvous receiver (start_rndv), once
// matched, pulls the data with gets (issue_gets) and answers fin; otherwise it
// answers ack and the sender streams fragments (pump_frags).  A split: the
// receiver asks the sender (offer_split) to put the second half (on_split,
// issue_puts) while it gets the first; split_fin then fin end it.
#include <algorithm>
#include <cstring>

#include "pml/header_parts.hpp"
#include "pml/tagged.hpp"

namespace transit::pml {

void Tagged::start_rndv(Req* r, Peer* p, const wire::RndvHdr& h, const std::byte* handle) noexcept {
    RequestStatus& st = r->st();
    r->total = h.total;
    r->remote_req = h.sreq;
    r->received = 0;
    st.sent_length = h.total;
    st.length = std::min<std::size_t>(h.total, r->capacity);
    if (h.total > r->capacity && !r->is_am) st.status = Status::truncated;
    Peer* sp = c_.peers.send_peer(p->rank);
    if (!sp || sp->failed) {
        // A header that arrived before its sender died: the data never will.
        st.status = sp ? Status::peer_failed : Status::unreachable;
        c_.complete(r);
        return;
    }
    if (h.total == 0 || st.length == 0) {
        // Nothing to move (or nothing wanted): release the sender at once.
        finish_get(r);
        return;
    }
    if (h.addr && r->buf && h.handle_len <= r->remote_handle.size()) {
        for (const bml::BtlRef& b : sp->ep->rdma) {
            if (c_.component_hash[b.index] != h.rdma_component) continue;
            const auto& a = b.module->attributes();
            if (!(a.flags & btl::flags::get)) continue;
            if (h.handle_len != a.registration_handle_size) continue;  // not one it can read
            // A module whose get is served piece by piece by the sender
            // (prefer_put) has the sender put the whole message instead.
            const bool put_all = !r->is_am && (a.flags & btl::flags::prefer_put);
            const bool split =
                put_all || (!r->is_am && c_.settings.rndv_split_min > 0 &&
                            st.length >= c_.settings.rndv_split_min && (a.flags & btl::flags::put));
            if (a.registration_handle_size > 0) {
                const std::uint32_t access =
                    btl::reg_flags::local_write | (split ? btl::reg_flags::remote_write : 0u);
                r->local_handle = b.rdma->register_mem(b.endpoint, r->buf, st.length, access);
                if (!r->local_handle) continue;
                r->handle_module = b.module;
            }
            std::memcpy(r->remote_handle.data(), handle, h.handle_len);
            r->remote_handle_len = h.handle_len;
            r->remote_addr = h.addr;
            r->rdma = b;
            r->rdma_offset = 0;
            r->rdma_end = st.length;
            r->stage = Req::Stage::gets;
            if (split) offer_split(r, a.registration_handle_size, put_all);
            if (!issue_gets(r)) {
                r->queued = true;
                pending_gets_.push_back(r);
                c_.has_pending = true;
            }
            return;
        }
    }
    fall_back_to_frags(r);
}

void Tagged::fall_back_to_frags(Req* r) noexcept {
    r->stage = Req::Stage::frags;
    wire::AckHdr a{r->remote_req, c_.reqs.handle(*r)};
    outbox_.send_ctrl(r->peer, wire::ack, &a, sizeof a);
}

// Both processes copy: the sender is asked to put the second half of the
// message while we get the first.  Copies on the CPU (shared memory, CMA) then
// run on two cores at once.  With `put_all` the sender puts everything and we
// get nothing (a module that puts natively but gets by active messages).
// Without the message the whole get stays ours.
bool Tagged::offer_split(Req* r, std::size_t handle_len, bool put_all) noexcept {
    const std::size_t half = put_all ? 0 : (r->rdma_end / 2) & ~std::size_t{63};
    wire::SplitHdr h{};
    h.sreq = r->remote_req;
    h.rreq = c_.reqs.handle(*r);
    h.offset = half;
    h.len = r->rdma_end - half;
    h.addr = reinterpret_cast<std::uint64_t>(r->buf);
    h.handle_len = static_cast<std::uint16_t>(handle_len);
    iovec v{r->local_handle, r->local_handle ? handle_len : 0};
    // Waiting before the send: over a loopback btl the sender's puts and its
    // split_fin can all happen inside send_ctrlv.
    const std::size_t whole = r->rdma_end;
    r->rdma_end = half;
    r->split_wait = true;
    if (!ok(outbox_.send_ctrlv(r->peer, wire::split, &h, sizeof h, &v, 1))) {
        r->rdma_end = whole;
        r->split_wait = false;
        return false;
    }
    r->put_all = half == 0;  // also a split_min below 128 bytes: nothing left to get
    c_.out.verbose(10, "rendezvous of {} bytes from rank {} split over {}: we get {}, it puts {}",
                   h.offset + h.len, r->peer->rank, r->rdma.module->name(), half, h.len);
    return true;
}

bool Tagged::issue_gets(Req* r) noexcept {
    switch (issue_rdma(r)) {
        case RdmaIssue::blocked:
            return false;
        case RdmaIssue::refused:
            if (r->local_handle) {
                r->handle_module->rdma()->deregister_mem(r->local_handle);
                r->local_handle = nullptr;
            }
            fall_back_to_frags(r);
            return true;
        case RdmaIssue::issued:
            break;
    }
    if (r->rdma_pending == 0) finish_get(r);
    return true;
}

// Moves [rdma_offset, rdma_end) of r by gets (the receiver) or puts (the
// sender's half of a split), in pieces of the module's limit.  An error ends
// the transfer with that status, except a get the transport refuses before
// anything moved: the caller then streams the data instead.
Tagged::RdmaIssue Tagged::issue_rdma(Req* r) noexcept {
    const bool put = r->kind == Req::Kind::send;
    const auto& a = r->rdma.module->attributes();
    const std::size_t cap = put ? a.put_limit : a.get_limit;
    const std::size_t limit = cap ? cap : r->rdma_end;
    auto* rh = reinterpret_cast<const btl::RegistrationHandle*>(r->remote_handle.data());
    RdmaIssue result = RdmaIssue::issued;
    r->issuing = true;
    while (r->rdma_offset < r->rdma_end) {
        const std::size_t chunk = std::min(r->rdma_end - r->rdma_offset, limit);
        void* local = static_cast<std::byte*>(r->buf) + r->rdma_offset;
        const std::uint64_t remote = r->remote_addr + r->rdma_offset;
        ++r->rdma_pending;
        const btl::RdmaRequest req{.endpoint = r->rdma.endpoint,
                                   .local = local,
                                   .remote = remote,
                                   .local_handle = r->local_handle,
                                   .remote_handle = rh,
                                   .size = chunk,
                                   .cb = &Tagged::rdma_done,
                                   .cbcontext = this,
                                   .cbdata = r};
        const Status s = put ? r->rdma.rdma->put(req) : r->rdma.rdma->get(req);
        if (s != Status::success) --r->rdma_pending;  // no callback will come
        if (s == Status::success || s == Status::completed) {
            r->rdma_offset += chunk;
            continue;
        }
        if (s == Status::out_of_resource) {
            result = RdmaIssue::blocked;
            break;
        }
        // Not once the sender was asked to put half: it is already doing so.
        if (!put && r->rdma_offset == 0 && r->rdma_pending == 0 && r->rdma_end == r->st().length) {
            result = RdmaIssue::refused;
            break;
        }
        r->st().status = s;  // a sender's failed put reaches the receiver in split_fin
        r->rdma_offset = r->rdma_end;
    }
    r->issuing = false;
    return result;
}

void Tagged::rdma_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void* context,
                       void* cbdata, Status s) noexcept {
    auto* e = static_cast<Tagged*>(context);
    auto* r = static_cast<Req*>(cbdata);
    if (!ok(s)) [[unlikely]]
        Core::transfer_failed(r, s);
    else if (r->peer)
        r->peer->watch.heard = true;  // as a fragment taken (frag_done)
    if (--r->rdma_pending != 0 || r->issuing || r->rdma_offset < r->rdma_end) return;
    if (r->kind == Req::Kind::send)
        e->finish_puts(r);
    else
        e->finish_get(r);
}

void Tagged::finish_get(Req* r) noexcept {
    if (r->peer->failed) [[unlikely]] {
        // No split_fin will come and no fin is wanted; the failure sweep may
        // have passed this request already while its gets were in flight.
        r->st().status = Status::peer_failed;
        c_.complete(r);
        return;
    }
    if (r->split_wait) {
        r->own_done = true;  // the FIN waits for the sender's half (on_split_fin)
        return;
    }
    // put_all: we never read the sender's buffer, and it ended with its split_fin.
    if (!r->put_all) {
        wire::FinHdr f{r->remote_req};
        outbox_.send_ctrl(r->peer, wire::fin, &f, sizeof f);
    }
    c_.complete(r);
}

void Tagged::on_split_fin(const std::byte* b, std::size_t, Rank from) noexcept {
    wire::SplitFinHdr f;
    std::memcpy(&f, b, sizeof f);
    Req* r = c_.request_named(wire::split_fin, f.rreq, from);
    if (!r) [[unlikely]]
        return;
    const auto s = static_cast<Status>(f.status);
    if (!ok(s) && ok(r->st().status)) r->st().status = s;
    r->split_wait = false;
    if (r->own_done) finish_get(r);
}

void Tagged::on_frag(const std::byte* b, std::size_t n, Rank from) noexcept {
    wire::FragHdr f;
    std::memcpy(&f, b, sizeof f);
    Req* r = c_.request_named(wire::frag, f.rreq, from);
    if (!r) [[unlikely]]
        return;
    recv_data(r, f.offset, b + sizeof f, n - sizeof f);
    if (r->received >= r->total) c_.complete(r);
}

// The sender gave up part way: the fragments it did send may still be on their
// way (another module), so the receive completes, failed, once they are in.
void Tagged::on_frag_abort(const std::byte* b, std::size_t, Rank from) noexcept {
    wire::FragAbortHdr h;
    std::memcpy(&h, b, sizeof h);
    Req* r = c_.request_named(wire::frag_abort, h.rreq, from);
    if (!r) [[unlikely]]
        return;
    const auto s = static_cast<Status>(h.status);
    r->st().status = ok(s) ? Status::error : s;
    c_.out.verbose(1, "rank {} stopped sending a message of {} bytes after {}: {}", r->peer->rank,
                   r->total, h.delivered, to_string(r->st().status));
    r->total = std::min<std::size_t>(r->total, h.delivered);
    if (r->received >= r->total) c_.complete(r);
}

void Tagged::on_rndv(const std::byte* b, std::size_t n) noexcept {
    const auto h = wire::header_of<wire::RndvHdr>({b, n});
    if (!wire::rndv_parts({b, n})) [[unlikely]]
        return c_.drops.malformed(wire::rndv, n, h.m.src);
    on_match(b, n, wire::tag(wire::rndv));
}

// Registers the send buffer with the first module that can get from it, so the
// receiver can pull the data in one rdma get.
void Tagged::prepare_rdma(Req* r) noexcept {
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

bool Tagged::send_rndv_header(Req* r) noexcept {
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
    if (outbox_.try_send(r->peer, wire::tag(wire::rndv), &h, sizeof h, &v, 1,
                         Outbox::Refusal::lost) == Status::out_of_resource) {
        r->stage = Req::Stage::rndv_hdr;
        return false;
    }
    return true;
}

void Tagged::on_ack(const std::byte* b, std::size_t, Rank from) noexcept {
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
bool Tagged::pump_frags(Req* r) noexcept {
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
        d->cbfunc = &Tagged::frag_done;
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

void Tagged::frag_done(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) noexcept {
    auto* r = static_cast<Req*>(d->cbdata);
    auto* e = static_cast<Tagged*>(d->context);
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
void Tagged::end_frags(Req* r) noexcept {
    const Status s = r->st().status;
    if (!ok(s) && s != Status::peer_failed && !r->peer->failed) [[unlikely]] {
        wire::FragAbortHdr h{r->remote_req, r->frag_bytes_sent, static_cast<std::int32_t>(s), 0};
        outbox_.send_ctrl(r->peer, wire::frag_abort, &h, sizeof h);
        c_.out.verbose(1, "a message of {} bytes to rank {} stopped after {} bytes: {}", r->total,
                       r->peer->rank, r->frag_bytes_sent, to_string(s));
    }
    c_.complete(r);
}

void Tagged::on_fin(const std::byte* b, std::size_t, Rank from) noexcept {
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
void Tagged::on_split(const std::byte* b, std::size_t n, Rank from) noexcept {
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
bool Tagged::issue_puts(Req* r) noexcept {
    if (issue_rdma(r) == RdmaIssue::blocked) return false;
    if (r->rdma_pending == 0) finish_puts(r);
    return true;
}

// Our half is in place: tell the receiver, then wait for its FIN (it still reads
// our buffer until then), except when we put it all.
void Tagged::finish_puts(Req* r) noexcept {
    r->stage = Req::Stage::fin_wait;
    if (r->peer->failed) [[unlikely]] {
        // fail_req may have left it to us while puts were in flight; no fin
        // will come.
        r->st().status = Status::peer_failed;
        c_.complete(r);
        return;
    }
    wire::SplitFinHdr f{r->remote_req, static_cast<std::int32_t>(r->st().status), 0};
    outbox_.send_ctrl(r->peer, wire::split_fin, &f, sizeof f);
    if (!r->put_all) return;
    r->stage = Req::Stage::ended;
    if (!r->issuing) c_.complete(r);  // else the sender completes it when it returns
}

}  // namespace transit::pml
