// Tagged receives: sequence-ordered matching against posted receives (specific
// source and wildcard), the unexpected queue with its memory budget, and the
// receiver's half of the rendezvous.
#include <algorithm>
#include <cstring>

#include "pml/engine.hpp"
#include "pml/wire_parts.hpp"

namespace transit::pml {

namespace {

bool tag_matches(std::uint32_t filter, std::uint32_t tag) noexcept {
    return filter == any_tag || filter == tag;
}

// A stand-in for a lost message, read whole (a short one is zero-filled past
// its match header, which on_match checked: an error of no kind).
wire::LostHdr lost_header(const std::byte* bytes, std::size_t len) noexcept {
    wire::LostHdr h{};
    std::memcpy(&h, bytes, std::min(len, sizeof h));
    if (len < sizeof h) h.status = static_cast<std::int32_t>(Status::protocol_error);
    return h;
}

// What the receive of a lost message completes with: the sender's refusal.
Status lost_status(const wire::LostHdr& h) noexcept {
    const auto s = static_cast<Status>(h.status);
    return ok(s) ? Status::error : s;
}

}  // namespace

Status Engine::irecv_full(Rank src, std::uint32_t tag, void* buf, const iovec* iov,
                          std::size_t count, std::size_t len, Req*& out, void* user) noexcept {
    out = nullptr;
    if (src != any_rank && src >= size_) [[unlikely]]
        return Status::bad_param;
    Req* r = new_req(Req::Kind::recv, user);
    if (!r) [[unlikely]]
        return Status::out_of_resource;
    set_recv(r, src, tag, buf, iov, count, len);
    out = r;
    Peer* from = nullptr;
    if (RawMsg* m = find_unexpected(src, tag, from)) {
        from->unexpected.erase(m);
        unexpected_bytes_ -= m->len;
        start_matched(r, from, m->data, m->len, m->btl_tag);
        drop(m);
        if (any_throttling_) check_throttle();
        return r->done() ? Status::completed : Status::success;
    }
    if (peer_failed(src)) [[unlikely]] {
        release(r);  // nothing more will come from it
        out = nullptr;
        return Status::peer_failed;
    }
    if (src == any_rank) {
        post(r, any_posted_);
        return Status::success;
    }
    Peer* p = peer(src);
    if (!p) {
        release(r);
        out = nullptr;
        return Status::out_of_resource;
    }
    post(r, p->posted);
    return Status::success;
}

Status Engine::cancel(Req* r) noexcept {
    if (r->kind != Req::Kind::recv || !r->posted || r->matched) return Status::not_available;
    if (r->src_filter == any_rank)
        any_posted_.erase(r);
    else
        peers_[r->src_filter]->posted.erase(r);
    r->posted = false;
    r->st().status = Status::cancelled;
    r->set_done();
    return Status::success;
}

bool Engine::iprobe(Rank src, std::uint32_t tag, RequestStatus& st) noexcept {
    Peer* from = nullptr;
    RawMsg* m = find_unexpected(src, tag, from);
    if (!m) return false;
    st.source = m->src;
    st.tag = m->tag;
    st.length = st.sent_length = m->total;
    st.status = Status::success;
    if (m->btl_tag == wire::tag(wire::lost)) [[unlikely]] {
        st.length = 0;  // what a receive of it would say: nothing arrives
        st.status = lost_status(lost_header(m->data, m->len));
    }
    return true;
}

RawMsg* Engine::find_unexpected(Rank src, std::uint32_t tag, Peer*& from) noexcept {
    auto first_match = [tag](Peer* p) -> RawMsg* {
        for (RawMsg* m = p->unexpected.front(); m; m = m->next)
            if (tag_matches(tag, m->tag)) return m;
        return nullptr;
    };
    if (src != any_rank) {
        Peer* p = src < size_ ? peers_[src].get() : nullptr;
        if (!p || p->unexpected.empty()) return nullptr;
        from = p;
        return first_match(p);
    }
    RawMsg* best = nullptr;
    for (Peer* p : unexpected_peers_) {
        if (p->unexpected.empty()) continue;
        RawMsg* m = first_match(p);
        if (m && (!best || m->arrival < best->arrival)) {
            best = m;
            from = p;
        }
    }
    return best;
}

Req* Engine::match_posted(Peer* p, std::uint32_t tag) noexcept {
    Req* a = p->posted.front();
    while (a && !tag_matches(a->tag_filter, tag)) a = a->next;
    Req* b = any_posted_.front();
    while (b && !tag_matches(b->tag_filter, tag)) b = b->next;
    if (b && (!a || b->post_seq < a->post_seq)) {
        any_posted_.erase(b);
        b->posted = false;
        return b;
    }
    if (a) {
        p->posted.erase(a);
        a->posted = false;
    }
    return a;
}

// Every in-order tagged message passes here: inline into on_match, with the
// unexpected case out of line.
inline void Engine::deliver_tagged(Peer* p, const std::byte* bytes, std::size_t len,
                                   btl::Tag tag) noexcept {
    wire::MatchHdr h;
    std::memcpy(&h, bytes, sizeof h);
    if (Req* r = match_posted(p, h.tag)) [[likely]] {
        start_matched(r, p, bytes, len, tag);
        return;
    }
    deliver_unexpected(p, bytes, len, tag);
}

void Engine::deliver_unexpected(Peer* p, const std::byte* bytes, std::size_t len,
                                btl::Tag tag) noexcept {
    wire::MatchHdr h;
    std::memcpy(&h, bytes, sizeof h);
    std::size_t total = len - sizeof h;
    if (tag == wire::tag(wire::rndv)) {
        wire::RndvHdr rh;
        std::memcpy(&rh, bytes, sizeof rh);
        total = rh.total;
    } else if (tag == wire::tag(wire::lost)) [[unlikely]] {
        total = lost_header(bytes, len).total;
    }
    store_unexpected(p, bytes, len, tag, h.tag, h.seq, total);
}

// Every caller passes at least a MatchHdr (Handlers::recv checks each kind's
// header; held messages were checked when they arrived).
void Engine::on_match(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
    wire::MatchHdr h;
    std::memcpy(&h, bytes, sizeof h);
    Peer* p = peer(h.src);
    if (!p) [[unlikely]] {
        log::error("pml: message from rank {} outside the job", h.src);
        return;
    }
    if (h.seq != p->expect_seq) [[unlikely]] {
        // Overtook an earlier message on another module: hold it until its turn.
        RawMsg* m = keep(bytes, len, tag);
        if (!m) {
            log::error("pml: out of memory holding an out-of-order message from rank {}", h.src);
            return;
        }
        m->seq = h.seq;
        p->out_of_order.push_back(m);
        return;
    }
    ++p->expect_seq;
    deliver_tagged(p, bytes, len, tag);
    if (!p->out_of_order.empty()) [[unlikely]]
        replay_out_of_order(p);
}

void Engine::replay_out_of_order(Peer* p) noexcept {
    for (RawMsg* m = p->out_of_order.front(); m;) {
        if (m->seq != p->expect_seq) {
            m = m->next;
            continue;
        }
        p->out_of_order.erase(m);
        ++p->expect_seq;
        deliver_tagged(p, m->data, m->len, m->btl_tag);
        drop(m);
        m = p->out_of_order.front();  // the next one may be anywhere
    }
}

void Engine::store_unexpected(Peer* p, const std::byte* bytes, std::size_t len, btl::Tag tag,
                              std::uint32_t mtag, std::uint32_t seq, std::size_t total) noexcept {
    RawMsg* m = keep(bytes, len, tag);
    if (!m) {
        log::error("pml: out of memory buffering an unexpected message from rank {}", p->rank);
        return;
    }
    m->src = p->rank;
    m->tag = mtag;
    m->seq = seq;
    m->total = total;
    m->arrival = arrival_++;
    p->unexpected.push_back(m);
    if (!p->has_unexpected_listed) {
        try {
            unexpected_peers_.push_back(p);
            p->has_unexpected_listed = true;
        } catch (...) {
        }
    }
    unexpected_bytes_ += len;
    if (unexpected_bytes_ > settings_.unexpected_limit && !p->throttling &&
        len > sizeof(wire::RndvHdr) + btl::max_registration_handle_size) {
        // Over budget: this sender switches to header-only rendezvous until we
        // catch up.  Its data then waits on its side, not in our memory.
        p->throttling = true;
        any_throttling_ = true;
        ++throttles_sent_;
        out_.verbose(10, "unexpected queue over budget ({} bytes), throttling rank {}",
                     unexpected_bytes_, p->rank);
        wire::ThrottleHdr th{rank_, 1};
        Peer* sp = send_peer(p->rank);
        if (sp) send_ctrl(sp, wire::throttle, &th, sizeof th);
    }
}

void Engine::check_throttle() noexcept {
    if (unexpected_bytes_ > settings_.unexpected_limit / 2) return;
    any_throttling_ = false;
    for (Peer* p : unexpected_peers_) {
        if (!p->throttling) continue;
        p->throttling = false;
        wire::ThrottleHdr th{rank_, 0};
        if (Peer* sp = send_peer(p->rank)) send_ctrl(sp, wire::throttle, &th, sizeof th);
    }
}

void Engine::on_throttle(const std::byte* b, std::size_t) noexcept {
    wire::ThrottleHdr h;
    std::memcpy(&h, b, sizeof h);
    if (Peer* p = peer(h.src)) p->throttled = h.on != 0;
}

void Engine::start_matched(Req* r, Peer* p, const std::byte* bytes, std::size_t len,
                           btl::Tag tag) noexcept {
    wire::MatchHdr h;
    std::memcpy(&h, bytes, sizeof h);
    r->matched = true;
    r->peer = p;
    RequestStatus& st = r->st();
    st.source = p->rank;
    st.tag = h.tag;
    if (tag == wire::tag(wire::match)) [[likely]] {
        std::size_t n = len - sizeof h;
        r->total = n;
        st.sent_length = n;
        st.length = n < r->capacity ? n : r->capacity;
        if (n > r->capacity) st.status = Status::truncated;
        recv_data(r, 0, bytes + sizeof h, n);
        complete(r);
        return;
    }
    if (tag == wire::tag(wire::lost)) [[unlikely]] {
        // The message this stands for never left its sender: nothing arrives.
        const wire::LostHdr lh = lost_header(bytes, len);
        st.sent_length = lh.total;
        st.length = 0;
        st.status = lost_status(lh);
        complete(r);
        return;
    }
    wire::RndvHdr rh;
    std::memcpy(&rh, bytes, sizeof rh);
    start_rndv(r, p, rh, bytes + sizeof rh);
}

void Engine::recv_data(Req* r, std::size_t offset, const std::byte* data,
                       std::size_t len) noexcept {
    r->received += len;
    if (offset >= r->capacity) return;
    std::size_t n = std::min(len, r->capacity - offset);
    if (r->buf) [[likely]] {
        std::memcpy(static_cast<std::byte*>(r->buf) + offset, data, n);
        return;
    }
    // Scatter into the iovec list.
    std::size_t skip = offset;
    for (std::size_t i = 0; i < r->iov_count && n > 0; ++i) {
        const iovec& v = r->iov[i];
        if (skip >= v.iov_len) {
            skip -= v.iov_len;
            continue;
        }
        std::size_t take = std::min(n, v.iov_len - skip);
        std::memcpy(static_cast<std::byte*>(v.iov_base) + skip, data, take);
        data += take;
        n -= take;
        skip = 0;
    }
}

void Engine::start_rndv(Req* r, Peer* p, const wire::RndvHdr& h, const std::byte* handle) noexcept {
    RequestStatus& st = r->st();
    r->total = h.total;
    r->remote_req = h.sreq;
    r->received = 0;
    st.sent_length = h.total;
    st.length = std::min<std::size_t>(h.total, r->capacity);
    if (h.total > r->capacity && !r->is_am) st.status = Status::truncated;
    Peer* sp = send_peer(p->rank);
    if (!sp || sp->failed) {
        // A header that arrived before its sender died: the data never will.
        st.status = sp ? Status::peer_failed : Status::unreachable;
        complete(r);
        return;
    }
    if (h.total == 0 || st.length == 0) {
        // Nothing to move (or nothing wanted): release the sender at once.
        finish_get(r);
        return;
    }
    if (h.addr && r->buf && h.handle_len <= r->remote_handle.size()) {
        for (const bml::BtlRef& b : sp->ep->rdma) {
            if (component_hash_[b.index] != h.rdma_component) continue;
            const auto& a = b.module->attributes();
            if (!(a.flags & btl::flags::get)) continue;
            if (h.handle_len != a.registration_handle_size) continue;  // not one it can read
            const bool split = !r->is_am && settings_.rndv_split_min > 0 &&
                               st.length >= settings_.rndv_split_min && (a.flags & btl::flags::put);
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
            if (split) offer_split(r, a.registration_handle_size);
            if (!issue_gets(r)) {
                r->queued = true;
                pending_gets_.push_back(r);
                has_pending_ = true;
            }
            return;
        }
    }
    fall_back_to_frags(r);
}

void Engine::fall_back_to_frags(Req* r) noexcept {
    r->stage = Req::Stage::frags;
    wire::AckHdr a{r->remote_req, reinterpret_cast<std::uint64_t>(r)};
    send_ctrl(peers_[r->peer->rank].get(), wire::ack, &a, sizeof a);
}

// Both processes copy: the sender is asked to put the second half of the
// message while we get the first.  Copies on the CPU (shared memory, CMA) then
// run on two cores at once.  Without the message the whole get stays ours.
bool Engine::offer_split(Req* r, std::size_t handle_len) noexcept {
    const std::size_t half = (r->rdma_end / 2) & ~std::size_t{63};
    wire::SplitHdr h{};
    h.sreq = r->remote_req;
    h.rreq = reinterpret_cast<std::uint64_t>(r);
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
    if (!ok(send_ctrlv(peers_[r->peer->rank].get(), wire::split, &h, sizeof h, &v, 1))) {
        r->rdma_end = whole;
        r->split_wait = false;
        return false;
    }
    out_.verbose(10, "rendezvous of {} bytes from rank {} split over {}: we get {}, it puts {}",
                 h.offset + h.len, r->peer->rank, r->rdma.module->name(), half, h.len);
    return true;
}

void Engine::on_split_fin(const std::byte* b, std::size_t) noexcept {
    wire::SplitFinHdr f;
    std::memcpy(&f, b, sizeof f);
    auto* r = reinterpret_cast<Req*>(f.rreq);
    const auto s = static_cast<Status>(f.status);
    if (!ok(s) && ok(r->st().status)) r->st().status = s;
    r->split_wait = false;
    if (r->own_done) finish_get(r);
}

// Moves [rdma_offset, rdma_end) of r by gets (the receiver) or puts (the
// sender's half of a split), in pieces of the module's limit.  An error ends
// the transfer with that status, except a get the transport refuses before
// anything moved: the caller then streams the data instead.
Engine::RdmaIssue Engine::issue_rdma(Req* r) noexcept {
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
                                   .cb = &Engine::rdma_done,
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

void Engine::rdma_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void* context,
                       void* cbdata, Status s) noexcept {
    auto* e = static_cast<Engine*>(context);
    auto* r = static_cast<Req*>(cbdata);
    if (!ok(s)) [[unlikely]]
        e->transfer_failed(r, s);
    if (--r->rdma_pending != 0 || r->issuing || r->rdma_offset < r->rdma_end) return;
    if (r->kind == Req::Kind::send)
        e->finish_puts(r);
    else
        e->finish_get(r);
}

bool Engine::issue_gets(Req* r) noexcept {
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

void Engine::finish_get(Req* r) noexcept {
    if (r->peer->failed) [[unlikely]] {
        // No split_fin will come and no fin is wanted; the failure sweep may
        // have passed this request already while its gets were in flight.
        r->st().status = Status::peer_failed;
        complete(r);
        return;
    }
    if (r->split_wait) {
        r->own_done = true;  // the FIN waits for the sender's half (on_split_fin)
        return;
    }
    wire::FinHdr f{r->remote_req};
    send_ctrl(peers_[r->peer->rank].get(), wire::fin, &f, sizeof f);
    complete(r);
}

void Engine::on_frag(const std::byte* b, std::size_t n) noexcept {
    wire::FragHdr f;
    std::memcpy(&f, b, sizeof f);
    auto* r = reinterpret_cast<Req*>(f.rreq);
    recv_data(r, f.offset, b + sizeof f, n - sizeof f);
    if (r->received >= r->total) complete(r);
}

// The sender gave up part way: the fragments it did send may still be on their
// way (another module), so the receive completes, failed, once they are in.
void Engine::on_frag_abort(const std::byte* b, std::size_t) noexcept {
    wire::FragAbortHdr h;
    std::memcpy(&h, b, sizeof h);
    auto* r = reinterpret_cast<Req*>(h.rreq);
    const auto s = static_cast<Status>(h.status);
    r->st().status = ok(s) ? Status::error : s;
    out_.verbose(1, "rank {} stopped sending a message of {} bytes after {}: {}", r->peer->rank,
                 r->total, h.delivered, to_string(r->st().status));
    r->total = std::min<std::size_t>(r->total, h.delivered);
    if (r->received >= r->total) complete(r);
}

void Engine::on_rndv(const std::byte* b, std::size_t n) noexcept {
    wire::RndvHdr h;
    std::memcpy(&h, b, sizeof h);
    if (h.kind == wire::kind_am) {
        on_am_rndv(b, n);  // an active message too large to go eagerly
        return;
    }
    if (!wire::rndv_parts({b, n})) [[unlikely]]
        return malformed(wire::rndv, n, h.m.src);
    on_match(b, n, wire::tag(wire::rndv));
}

}  // namespace transit::pml
