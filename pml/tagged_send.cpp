// Tagged sends: eager (sendi, then alloc+send), rendezvous with an rdma get by
// the receiver, or pipelined fragments striped over the send list.
#include <cstring>
#include <memory>

#include "pml/engine.hpp"
#include "pml/wire_parts.hpp"

namespace transit::pml {

Status Engine::isend_full(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count,
                          const void* buf, std::size_t len, Req*& out, void* user) noexcept {
    out = nullptr;
    Peer* p = send_peer(dst);
    if (!p || p->failed) [[unlikely]]
        return !p ? (dst >= size_ ? Status::bad_param : Status::unreachable) : Status::peer_failed;
    Req* r = new_req(Req::Kind::send, user);
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
    st.source = dst;
    st.tag = tag;
    st.length = st.sent_length = r->total;
    out = r;
    return start_send(r, false);
}

// The common small send: the transport takes the bytes at once (sendi), so the
// request is born complete and needs none of the state a pending send keeps.
// Anything else (no request free, the transport busy) takes the full path.
bool Engine::send_inline(Peer* p, std::uint32_t tag, const void* buf, std::size_t len, Req*& out,
                         void* user) noexcept {
    Req* r = reqs_.get();
    if (!r) [[unlikely]]
        return false;
    if (!sendi_now(p, tag, buf, len)) [[unlikely]] {
        reqs_.put(r);
        return false;
    }
    r->kind = Req::Kind::send;
    r->stage = Req::Stage::done;
    r->internal = false;
    r->user = user;
    r->st() = RequestStatus{p->rank, tag, len, len, Status::success};
    r->set_done();
    out = r;
    return true;
}

// The message handed to the transport at once (sendi), or nothing happened.
bool Engine::sendi_now(Peer* p, std::uint32_t tag, const void* buf, std::size_t len) noexcept {
    const bml::BtlRef& b = p->ep->pick_eager();
    btl::Convertor conv(buf, len);
    wire::MatchHdr h{rank_, tag, p->send_seq};
    btl::Descriptor* d = nullptr;
    Status s = b.module->sendi(b.endpoint, &conv, &h, sizeof h, len, btl::no_order, 0,
                               wire::tag(wire::match), &d);
    if (s != Status::completed && s != Status::success) [[unlikely]] {
        if (d) b.module->free(d);  // the full path asks again and queues if it must
        return false;
    }
    ++p->send_seq;
    return true;
}

Status Engine::start_send(Req* r, bool force_rndv) noexcept {
    Peer* p = r->peer;
    if (!r->is_am) r->seq = p->send_seq++;
    if (!force_rndv && !p->throttled && r->total + sizeof(wire::MatchHdr) <= p->ep->eager_limit)
        [[likely]] {
        r->stage = Req::Stage::eager;
        if (send_eager(r)) return Status::completed;
        enqueue_send(r);
        return Status::success;
    }
    r->stage = Req::Stage::rndv_hdr;
    r->remote_addr = 0;
    r->remote_handle_len = 0;
    if (r->conv.contiguous() && r->total > 0 && r->total >= settings_.rdma_threshold) {
        wire::RndvHdr unused{};
        prepare_rdma(r, unused, nullptr);
    }
    r->issuing = true;  // an inline FIN must not complete (and free) r under us
    bool sent = send_rndv_header(r);
    r->issuing = false;
    if (!sent) {
        enqueue_send(r);
        return Status::success;
    }
    if (r->stage == Req::Stage::done) {
        complete(r);
        return Status::completed;
    }
    return Status::success;
}

bool Engine::advance_send(Req* r) noexcept {
    switch (r->stage) {
        case Req::Stage::eager:
            return send_eager(r);
        case Req::Stage::rndv_hdr: {
            r->issuing = true;
            bool sent = send_rndv_header(r);
            r->issuing = false;
            if (sent && r->stage == Req::Stage::done) complete(r);
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

bool Engine::send_eager(Req* r) noexcept {
    Peer* p = r->peer;
    const bml::BtlRef& b = p->ep->pick_eager();
    wire::MatchHdr h{rank_, r->tag, r->seq};
    btl::Descriptor* d = nullptr;
    Status s = b.module->sendi(b.endpoint, &r->conv, &h, sizeof h, r->total, btl::no_order, 0,
                               wire::tag(wire::match), &d);
    if (s == Status::completed || s == Status::success) [[likely]] {
        complete(r);
        return true;
    }
    if (!d) d = b.module->alloc(b.endpoint, btl::no_order, sizeof h + r->total, 0);
    if (!d) return false;
    auto* at = static_cast<std::byte*>(d->segments[0].addr);
    std::memcpy(at, &h, sizeof h);
    r->conv.seek(0);
    r->conv.pack(at + sizeof h, r->total);
    d->segments[0].len = sizeof h + r->total;
    d->segment_count = 1;
    d->flags |= btl::des_flags::btl_ownership;
    d->cbfunc = [](btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) {};
    s = post_desc({p->rank, b.module, b.endpoint, d, wire::tag(wire::match)});
    if (!ok(s)) r->st().status = s;
    // The data is copied: the user's buffer is free again.
    complete(r);
    return true;
}

// Registers the send buffer with the first module that can get from it, so the
// receiver can pull the data in one rdma get.
void Engine::prepare_rdma(Req* r, wire::RndvHdr&, std::byte*) noexcept {
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
        r->rdma_component = component_hash_[b.index];
        return;
    }
}

bool Engine::send_rndv_header(Req* r) noexcept {
    wire::RndvHdr h{};
    h.m = {rank_, r->is_am ? r->am_handler : r->tag, r->seq};
    h.total = r->total;
    h.sreq = reinterpret_cast<std::uint64_t>(r);
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
    if (try_send(r->peer, wire::tag(wire::rndv), &h, sizeof h, &v, 1, Refusal::lost) ==
        Status::out_of_resource) {
        r->stage = Req::Stage::rndv_hdr;
        return false;
    }
    return true;
}

bool Engine::pump_frags(Req* r) noexcept {
    bml::Endpoint* ep = r->peer->ep;
    r->issuing = true;
    while (r->conv.remaining() > 0) {
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
        d->cbfunc = &Engine::frag_done;
        d->cbdata = r;
        d->context = this;
        ++r->frags_out;
        // A refused fragment was counted back and its status kept by frag_done.
        if (!ok(post_desc({r->peer->rank, b.module, b.endpoint, d, wire::tag(wire::frag)})))
            [[unlikely]]
            r->conv.seek(r->total);
    }
    r->issuing = false;
    if (r->frags_out == 0) end_frags(r);
    return true;
}

void Engine::frag_done(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) noexcept {
    auto* r = static_cast<Req*>(d->cbdata);
    auto* e = static_cast<Engine*>(d->context);
    if (ok(s)) [[likely]] {
        r->frag_bytes_sent += btl::total_length(btl::segments_of(*d)) - sizeof(wire::FragHdr);
    } else {
        e->transfer_failed(r, s);
    }
    if (--r->frags_out == 0 && !r->issuing && r->conv.remaining() == 0) e->end_frags(r);
}

// Every fragment is accounted for.  When one never went and the receiver is
// alive, it would wait for those bytes for good: it is told what will arrive.
void Engine::end_frags(Req* r) noexcept {
    const Status s = r->st().status;
    if (!ok(s) && s != Status::peer_failed && !r->peer->failed) [[unlikely]] {
        wire::FragAbortHdr h{r->remote_req, r->frag_bytes_sent, static_cast<std::int32_t>(s), 0};
        send_ctrl(r->peer, wire::frag_abort, &h, sizeof h);
        out_.verbose(1, "a message of {} bytes to rank {} stopped after {} bytes: {}", r->total,
                     r->peer->rank, r->frag_bytes_sent, to_string(s));
    }
    complete(r);
}

void Engine::on_ack(const std::byte* b, std::size_t) noexcept {
    wire::AckHdr a;
    std::memcpy(&a, b, sizeof a);
    auto* r = reinterpret_cast<Req*>(a.sreq);
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

void Engine::on_fin(const std::byte* b, std::size_t) noexcept {
    wire::FinHdr f;
    std::memcpy(&f, b, sizeof f);
    auto* r = reinterpret_cast<Req*>(f.sreq);
    if (r->issuing) {
        r->stage = Req::Stage::done;  // the sender completes it when it returns
        return;
    }
    complete(r);
}

// The receiver asks us to put the tail of the message while it gets the head.
void Engine::on_split(const std::byte* b, std::size_t n) noexcept {
    wire::SplitHdr h;
    std::memcpy(&h, b, sizeof h);
    auto* r = reinterpret_cast<Req*>(h.sreq);
    const std::size_t expected =
        r->rdma.module ? r->rdma.module->attributes().registration_handle_size : h.handle_len;
    if (!wire::split_parts({b, n}) || h.handle_len > r->remote_handle.size() ||
        h.handle_len != expected) [[unlikely]] {
        // Nothing to put with: the receiver is told our half failed (split_fin)
        // and still sends its fin, so neither side waits for good.
        malformed(wire::split, n, r->peer->rank);
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

bool Engine::issue_puts(Req* r) noexcept {
    if (r->rdma.module == nullptr) [[unlikely]] {
        r->st().status = Status::not_supported;  // never registered: nothing to put with
        r->rdma_offset = r->rdma_end;
    } else if (issue_rdma(r) == RdmaIssue::blocked) {
        return false;
    }
    if (r->rdma_pending == 0) finish_puts(r);
    return true;
}

// Our half is in place: tell the receiver, then wait for its FIN (it still reads
// our buffer until then).
void Engine::finish_puts(Req* r) noexcept {
    r->stage = Req::Stage::none;
    if (r->peer->failed) [[unlikely]] {
        // fail_req may have left it to us while puts were in flight; no fin
        // will come.
        r->st().status = Status::peer_failed;
        complete(r);
        return;
    }
    wire::SplitFinHdr f{r->remote_req, static_cast<std::int32_t>(r->st().status), 0};
    send_ctrl(peers_[r->peer->rank].get(), wire::split_fin, &f, sizeof f);
}

}  // namespace transit::pml
