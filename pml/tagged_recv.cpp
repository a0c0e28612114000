// Tagged receives: sequence-ordered matching against posted receives (specific
// source and wildcard), the unexpected queue with its memory budget, and the
// receiver's half of the rendezvous.
#include <algorithm>
#include <cstring>

#include "pml/header_parts.hpp"
#include "pml/tagged.hpp"

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

Status Tagged::irecv_full(Rank src, std::uint32_t tag, void* buf, const iovec* iov,
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

Status Tagged::cancel(Req* r) noexcept {
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

bool Tagged::iprobe(Rank src, std::uint32_t tag, RequestStatus& st) noexcept {
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

RawMsg* Tagged::find_unexpected(Rank src, std::uint32_t tag, Peer*& from) noexcept {
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

Req* Tagged::match_posted(Peer* p, std::uint32_t tag) noexcept {
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
inline void Tagged::deliver_tagged(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                                   std::size_t len, btl::Tag tag) noexcept {
    if (Req* r = match_posted(p, h.tag)) [[likely]] {
        start_matched(r, p, h, bytes, len, tag);
        return;
    }
    deliver_unexpected(p, h, bytes, len, tag);
}

void Tagged::deliver_unexpected(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
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
void Tagged::match(const wire::MatchHdr& h, const std::byte* bytes, std::size_t len,
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
void Tagged::hold(Peer* p, const wire::MatchHdr& h, const std::byte* bytes, std::size_t len,
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
void Tagged::on_bye(const std::byte* bytes) noexcept {
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

void Tagged::hear_bye(Peer* p) noexcept {
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

void Tagged::replay_out_of_order(Peer* p) noexcept {
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

void Tagged::store_unexpected(Peer* p, const std::byte* bytes, std::size_t len, btl::Tag tag,
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
        len > sizeof(wire::RndvHdr) + btl::max_registration_handle_size) {
        // Over budget: this sender switches to header-only rendezvous until we
        // catch up.  Its data then waits on its side, not in our memory.
        p->throttling = true;
        any_throttling_ = true;
        ++throttles_sent_;
        c_.out.verbose(10, "unexpected queue over budget ({} bytes), throttling rank {}",
                       unexpected_bytes_, p->rank);
        wire::ThrottleHdr th{c_.rank, 1};
        Peer* sp = c_.peers.send_peer(p->rank);
        if (sp) outbox_.send_ctrl(sp, wire::throttle, &th, sizeof th);
    }
}

void Tagged::forget(Peer* p) noexcept {
    if (p->has_unexpected_listed) std::erase(unexpected_peers_, p);
    p->has_unexpected_listed = false;
}

void Tagged::check_throttle() noexcept {
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

void Tagged::on_throttle(const std::byte* b, std::size_t) noexcept {
    wire::ThrottleHdr h;
    std::memcpy(&h, b, sizeof h);
    if (Peer* p = c_.peers.peer(h.src)) p->throttled = h.on != 0;
}

void Tagged::start_matched(Req* r, Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
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

void Tagged::recv_data(Req* r, std::size_t offset, const std::byte* data,
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

}  // namespace transit::pml
