// The receive side (receiver.hpp): sequence-ordered matching against posted
// receives (specific source and wildcard), the unexpected queue with its
// memory budget, and the receiver's half of the rendezvous.
#include "pml/receiver.hpp"

#include <algorithm>
#include <cstring>

#include "pml/header_parts.hpp"
#include "pml/rdma_mover.hpp"

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

Status Receiver::irecv_full(Rank src, std::uint32_t tag, void* buf, const iovec* iov,
                            std::size_t count, std::size_t len, Req*& out, void* user) noexcept {
    out = nullptr;
    if (src >= c_.size && src != any_rank && !c_.peers.peer(src)) [[unlikely]]
        return c_.peers.missing(src);
    Req* r = c_.new_req(Req::Kind::recv, user);
    if (!r) [[unlikely]]
        return Status::out_of_resource;
    set_recv(r, src, tag, buf, iov, count, len);
    out = r;
    Peer* from = nullptr;
    if (RawMsg* m = find_unexpected(src, tag, from)) {
        from->unexpected.erase(m);
        unexpected_bytes_ -= m->len;
        start_matched(r, from, wire::MatchHdr{m->src, m->tag, m->seq}, m->data, m->len, m->btl_tag);
        c_.drop(m);
        if (any_throttling_) check_throttle();
        return r->done() ? Status::completed : Status::success;
    }
    // any_rank names no peer that could have failed: posted at once (a
    // server's every receive).
    if (src == any_rank) {
        post(r, any_posted_);
        return Status::success;
    }
    if (c_.peers.failed(src)) [[unlikely]] {
        c_.release(r);  // nothing more will come from it
        out = nullptr;
        return c_.peers.gone_status(src);
    }
    Peer* p = c_.peers.peer(src);
    if (!p) {
        c_.release(r);
        out = nullptr;
        return Status::out_of_resource;
    }
    post(r, p->posted);
    return Status::success;
}

Status Receiver::cancel(Req* r) noexcept {
    if (r->kind != Req::Kind::recv || !r->posted || r->matched) return Status::not_available;
    if (r->src_filter == any_rank)
        any_posted_.erase(r);
    else
        c_.peers.peer(r->src_filter)->posted.erase(r);
    r->posted = false;
    r->st().status = Status::cancelled;
    r->set_done();
    return Status::success;
}

bool Receiver::iprobe(Rank src, std::uint32_t tag, RequestStatus& st) noexcept {
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

RawMsg* Receiver::find_unexpected(Rank src, std::uint32_t tag, Peer*& from) noexcept {
    auto first_match = [tag](Peer* p) -> RawMsg* {
        for (RawMsg* m = p->unexpected.front(); m; m = m->next)
            if (tag_matches(tag, m->tag)) return m;
        return nullptr;
    };
    if (src != any_rank) {
        Peer* p = c_.peers.peer(src);
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

Req* Receiver::match_posted(Peer* p, std::uint32_t tag) noexcept {
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
inline void Receiver::deliver_tagged(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                                     std::size_t len, btl::Tag tag) noexcept {
    if (Req* r = match_posted(p, h.tag)) [[likely]] {
        start_matched(r, p, h, bytes, len, tag);
        return;
    }
    deliver_unexpected(p, h, bytes, len, tag);
}

void Receiver::deliver_unexpected(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                                  std::size_t len, btl::Tag tag) noexcept {
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
void Receiver::match(const wire::MatchHdr& h, const std::byte* bytes, std::size_t len,
                     btl::Tag tag) noexcept {
    Peer* p = c_.peers.peer(h.src);
    if (!p) [[unlikely]] {
        log::error("pml: message from rank {} outside the job", h.src);
        return;
    }
    if (h.seq != p->expect_seq) [[unlikely]] {
        hold(p, h, bytes, len, tag);
        return;
    }
    ++p->expect_seq;
    deliver_tagged(p, h, bytes, len, tag);
    if (!p->out_of_order.empty()) [[unlikely]]
        replay_out_of_order(p);
}

// Overtook an earlier message on another module: held until its turn.
void Receiver::hold(Peer* p, const wire::MatchHdr& h, const std::byte* bytes, std::size_t len,
                    btl::Tag tag) noexcept {
    RawMsg* m = c_.keep(bytes, len, tag);
    if (!m) {
        log::error("pml: out of memory holding an out-of-order message from rank {}", h.src);
        return;
    }
    m->seq = h.seq;
    std::memcpy(m->data, &h.src, sizeof h.src);  // the copy names the sender by our id
    p->out_of_order.push_back(m);
}

// A peer's bye takes its turn in the sequence like a message: once every
// tagged message it sent before is here, it is heard (and acked from
// progress, farewell.cpp).
void Receiver::on_bye(const std::byte* bytes) noexcept {
    wire::MatchHdr h;
    std::memcpy(&h, bytes, sizeof h);
    Peer* p = c_.peers.peer(h.src);
    if (!p || p->rank < c_.size) return;  // only peers outside the job leave
    if (h.seq != p->expect_seq) {
        hold(p, h, bytes, sizeof h, wire::tag(wire::bye));
        return;
    }
    ++p->expect_seq;
    hear_bye(p);
    if (!p->out_of_order.empty()) replay_out_of_order(p);
}

void Receiver::hear_bye(Peer* p) noexcept {
    if (p->bye_heard) return;
    p->bye_heard = true;
    if (!p->in_byes) {
        try {
            c_.byes.push_back(p);
        } catch (...) {
            // Unacked: the peer's disconnect ends at its linger time.
            log::error("pml: out of memory: the bye of peer {} is not acked", p->rank);
            return;
        }
        p->in_byes = true;
    }
    c_.farewells = true;
    c_.has_pending = true;
}

void Receiver::replay_out_of_order(Peer* p) noexcept {
    for (RawMsg* m = p->out_of_order.front(); m;) {
        if (m->seq != p->expect_seq) {
            m = m->next;
            continue;
        }
        p->out_of_order.erase(m);
        ++p->expect_seq;
        if (m->btl_tag == wire::tag(wire::bye)) [[unlikely]]
            hear_bye(p);
        else
            deliver_tagged(p, wire::header_of<wire::MatchHdr>({m->data, m->len}), m->data, m->len,
                           m->btl_tag);
        c_.drop(m);
        m = p->out_of_order.front();  // the next one may be anywhere
    }
}

void Receiver::store_unexpected(Peer* p, const std::byte* bytes, std::size_t len, btl::Tag tag,
                                std::uint32_t mtag, std::uint32_t seq, std::size_t total) noexcept {
    RawMsg* m = c_.keep(bytes, len, tag);
    if (!m) {
        log::error("pml: out of memory buffering an unexpected message from rank {}", p->rank);
        return;
    }
    m->src = p->rank;
    // The copy names the sender by our id (a peer outside the job's header
    // came with its own rank: on_match_from); every kind kept here has its
    // sender first.
    std::memcpy(m->data, &p->rank, sizeof p->rank);
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
    if (unexpected_bytes_ > c_.settings.unexpected_limit && !p->throttling &&
        len > sizeof(wire::RndvHdr) + btl::max_registration_handle_size)
        throttle_sender(p);
}

// Over budget: this sender switches to header-only rendezvous until we catch
// up (check_throttle).  Its data then waits on its side, not in our memory.
void Receiver::throttle_sender(Peer* p) noexcept {
    p->throttling = true;
    any_throttling_ = true;
    ++throttles_sent_;
    c_.out.verbose(10, "unexpected queue over budget ({} bytes), throttling rank {}",
                   unexpected_bytes_, p->rank);
    wire::ThrottleHdr th{c_.rank, 1};
    Peer* sp = c_.peers.send_peer(p->rank);
    if (sp) outbox_.send_ctrl(sp, wire::throttle, &th, sizeof th);
}

void Receiver::forget(Peer* p) noexcept {
    if (p->has_unexpected_listed) std::erase(unexpected_peers_, p);
    p->has_unexpected_listed = false;
}

void Receiver::check_throttle() noexcept {
    if (unexpected_bytes_ > c_.settings.unexpected_limit / 2) return;
    any_throttling_ = false;
    for (Peer* p : unexpected_peers_) {
        if (!p->throttling) continue;
        p->throttling = false;
        wire::ThrottleHdr th{c_.rank, 0};
        if (Peer* sp = c_.peers.send_peer(p->rank))
            outbox_.send_ctrl(sp, wire::throttle, &th, sizeof th);
    }
}

void Receiver::start_matched(Req* r, Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                             std::size_t len, btl::Tag tag) noexcept {
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
        c_.complete(r);
        return;
    }
    if (tag == wire::tag(wire::lost)) [[unlikely]] {
        // The message this stands for never left its sender: nothing arrives.
        const wire::LostHdr lh = lost_header(bytes, len);
        st.sent_length = lh.total;
        st.length = 0;
        st.status = lost_status(lh);
        c_.complete(r);
        return;
    }
    wire::RndvHdr rh;
    std::memcpy(&rh, bytes, sizeof rh);
    start_rndv(r, p, rh, bytes + sizeof rh);
}

void Receiver::recv_data(Req* r, std::size_t offset, const std::byte* data,
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

// The rendezvous, the receiver's half.  Matched (start_matched, or an active
// message's target), the receiver pulls the data with gets (start_gets,
// issue_gets) and answers fin (finish_get); from pml_base_rndv_split_min it
// asks the sender to put the tail meanwhile (offer_split) and waits for its
// split_fin too.  Without a usable get it answers ack, and the sender streams
// fragments (on_frag).
void Receiver::start_rndv(Req* r, Peer* p, const wire::RndvHdr& h,
                          const std::byte* handle) noexcept {
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
    if (!start_gets(r, sp, h, handle)) fall_back_to_frags(r);
}

// Pulls the data with the first module of the sender's that can get from its
// buffer and read the handle it sent (ours registered when the module wants
// one), asking for a split when the message is large: false when none can.
bool Receiver::start_gets(Req* r, Peer* sp, const wire::RndvHdr& h,
                          const std::byte* handle) noexcept {
    if (!h.addr || !r->buf || h.handle_len > r->remote_handle.size()) return false;
    const RequestStatus& st = r->st();
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
        if (!issue_gets(r)) queue_gets(r);
        return true;
    }
    return false;
}

void Receiver::fall_back_to_frags(Req* r) noexcept {
    r->stage = Req::Stage::frags;
    wire::AckHdr a{r->remote_req, c_.reqs.handle(*r)};
    outbox_.send_ctrl(r->peer, wire::ack, &a, sizeof a);
}

// Both processes copy: the sender is asked to put the second half of the
// message while we get the first.  Copies on the CPU (shared memory, CMA) then
// run on two cores at once.  With `put_all` the sender puts everything and we
// get nothing (a module that puts natively but gets by active messages).
// Without the message the whole get stays ours.
bool Receiver::offer_split(Req* r, std::size_t handle_len, bool put_all) noexcept {
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
    if (!ok(outbox_.send_ctrlv(r->peer, wire::split, &h, sizeof h, &v, 1,
                               r->data_path(sizeof h + v.iov_len)))) {
        r->rdma_end = whole;
        r->split_wait = false;
        return false;
    }
    r->put_all = half == 0;  // also a split_min below 128 bytes: nothing left to get
    c_.out.verbose(10, "rendezvous of {} bytes from rank {} split over {}: we get {}, it puts {}",
                   h.offset + h.len, r->peer->rank, r->rdma.module->name(), half, h.len);
    return true;
}

bool Receiver::issue_gets(Req* r) noexcept {
    switch (issue_rdma(r, &Receiver::get_done, this)) {
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

void Receiver::get_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                        void* context, void* cbdata, Status s) noexcept {
    auto* r = static_cast<Req*>(cbdata);
    if (rdma_piece_done(r, s)) static_cast<Receiver*>(context)->finish_get(r);
}

void Receiver::finish_get(Req* r) noexcept {
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
        outbox_.send_ctrl(r->peer, wire::fin, &f, sizeof f, r->data_path(sizeof f));
    }
    c_.complete(r);
}

void Receiver::on_split_fin(const std::byte* b, std::size_t, Rank from) noexcept {
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

void Receiver::on_frag(const std::byte* b, std::size_t n, Rank from) noexcept {
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
void Receiver::on_frag_abort(const std::byte* b, std::size_t, Rank from) noexcept {
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

void Receiver::on_rndv(const std::byte* b, std::size_t n) noexcept {
    const auto h = wire::header_of<wire::RndvHdr>({b, n});
    if (!wire::rndv_parts({b, n})) [[unlikely]]
        return c_.drops.malformed(wire::rndv, n, h.m.src);
    on_match(b, n, wire::tag(wire::rndv));
}

// The gets that waited for room, in order: the first still blocked stops the
// pass (the transport has no room for the ones behind it either).
int Receiver::drain() noexcept {
    int events = 0;
    for (std::size_t n = pending_gets_.size(); n > 0; --n) {
        Req* r = pending_gets_.pop_front();
        r->queued = false;
        if (!issue_gets(r)) {
            queue_gets(r);
            break;
        }
        ++events;
    }
    return events;
}

}  // namespace transit::pml
