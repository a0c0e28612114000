// Active messages (LAPI): a header handler at the target chooses where the data
// lands; a completion handler runs once it is there; origin, target and
// completion counters report progress.  Small messages go in one fragment,
// large ones reuse the tagged rendezvous (rdma get or fragments).
#include <algorithm>
#include <cstring>

#include "pml/active_messages.hpp"
#include "pml/header_parts.hpp"

namespace transit::pml {

Status ActiveMessages::register_am(std::uint32_t id, const AmHandler& h) {
    if (id >= am_handlers_.size() || !h.header) return Status::bad_param;
    if (am_handlers_[id].header) return Status::exists;
    am_handlers_[id] = h;
    return Status::success;
}

Status ActiveMessages::am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header,
                               const void* data, std::size_t len, const AmCounters& c) noexcept {
    if (header.size() > Context::am_max_header || id >= am_handlers_.size())
        return Status::bad_param;
    Peer* p = c_.peers.send_peer(dst);
    if (!p) return c_.peers.why_unsendable(dst);
    if (p->failed) [[unlikely]]
        return Status::peer_failed;
    if (sizeof(wire::AmHdr) + header.size() + len <= p->ep->eager_limit) [[likely]] {
        wire::AmHdr h{c_.rank, id,       static_cast<std::uint32_t>(header.size()),
                      0,       c.target, reinterpret_cast<std::uint64_t>(c.completion)};
        iovec v[2] = {{const_cast<std::byte*>(header.data()), header.size()},
                      {const_cast<void*>(data), len}};
        // Owed before it goes: over a loopback the answer comes back inside the send.
        if (c.completion && !owe_completion(p, c.completion)) [[unlikely]]
            return Status::out_of_resource;
        Status s = outbox_.send_ctrlv(p, wire::am, &h, sizeof h, v, 2);
        if (!ok(s)) {
            if (c.completion) forget_owed(p, c.completion);
            return s;
        }
        if (c.origin) c.origin->add(1);  // copied: the buffer is free again
        return Status::completed;
    }
    if (c.completion && !owe_completion(p, c.completion)) [[unlikely]]
        return Status::out_of_resource;
    Req* r = c_.new_req(Req::Kind::send, nullptr);
    if (!r) {
        if (c.completion) forget_owed(p, c.completion);
        return Status::out_of_resource;
    }
    r->internal = true;
    r->is_am = true;
    r->peer = p;
    r->am_handler = id;
    r->origin_counter = c.origin;
    r->am_target_counter = c.target;
    r->am_completion_token = reinterpret_cast<std::uint64_t>(c.completion);
    r->am_header_len = static_cast<std::uint32_t>(header.size());
    if (!header.empty()) std::memcpy(r->remote_handle.data(), header.data(), header.size());
    std::destroy_at(&r->conv);
    std::construct_at(&r->conv, data, len);
    r->total = len;
    Status s = tagged_.start_send(r, Tagged::Path::rndv);
    return s == Status::completed ? Status::completed : Status::success;
}

namespace {

auto owed_entry(std::vector<std::pair<Counter*, std::uint64_t>>& owed, const Counter* c) {
    return std::find_if(owed.begin(), owed.end(), [c](const auto& e) { return e.first == c; });
}

void report_bad_handler(bool& warned, Rank src, std::uint32_t id) {
    if (warned) return;
    warned = true;
    log::error(
        "pml: active message from rank {} for handler {} which is not registered; "
        "its data is dropped",
        src, id);
}

}  // namespace

void ActiveMessages::on_am(const std::byte* b, std::size_t n) noexcept {
    const auto h = wire::header_of<wire::AmHdr>({b, n});
    const auto parts = wire::am_parts({b, n});
    if (!parts) [[unlikely]]
        return c_.drops.malformed(wire::am, n, h.src);
    const std::byte* uhdr = parts->user_header.data();
    const std::byte* data = parts->data.data();
    std::size_t len = parts->data.size();
    AmHandler* hd = h.handler < am_handlers_.size() ? &am_handlers_[h.handler] : nullptr;
    AmDestination d{};
    if (hd && hd->header) {
        AmInfo info{h.src, h.handler, {uhdr, h.header_len}, len};
        d = hd->header(*c_.ctx, info, hd->arg);
    } else {
        report_bad_handler(warned_bad_am_, h.src, h.handler);
    }
    if (d.buffer && len) std::memcpy(d.buffer, data, len);
    AmCompletionFn fn = d.completion ? d.completion : (hd ? hd->completion : nullptr);
    if (fn) fn(*c_.ctx, h.src, d.buffer, len, d.user_data);
    if (h.target_counter) reinterpret_cast<Counter*>(h.target_counter)->add(1);
    if (h.completion_token) answer_completion(h.src, h.completion_token, false);
}

// Tells the origin that its active message completed here, or never will.
void ActiveMessages::answer_completion(Rank origin, std::uint64_t token, bool lost) noexcept {
    const wire::AmDoneHdr a{token, c_.rank, lost ? 1u : 0u};
    if (Peer* p = c_.peers.send_peer(origin); p && !p->failed)
        outbox_.send_ctrl(p, wire::am_done, &a, sizeof a);
}

// A completion the origin's counter waits for from `p`, so that it can be
// written off if p fails.  A counter is usually shared by all messages to a
// peer: the list stays short and grows (allocates) only for a new counter.
// False when out of memory: the message is not sent, since a completion that
// could not be written off would leave its counter waiting for good.
bool ActiveMessages::owe_completion(Peer* p, Counter* c) noexcept {
    auto& owed = p->owed_completions;
    const auto it = owed_entry(owed, c);
    if (it != owed.end()) {
        ++it->second;
        return true;
    }
    try {
        p->owed_completions.emplace_back(c, 1);
        return true;
    } catch (...) {
        return false;
    }
}

void ActiveMessages::on_rndv(const std::byte* b, std::size_t n) noexcept {
    const auto h = wire::header_of<wire::RndvHdr>({b, n});
    const auto parts = wire::rndv_parts({b, n});
    if (!parts) [[unlikely]]
        return c_.drops.malformed(wire::rndv, n, h.m.src);
    const std::byte* handle = parts->handle.data();
    const std::byte* uhdr = parts->user_header.data();
    Peer* p = c_.peers.peer(h.m.src);
    if (!p) [[unlikely]]
        return c_.drops.malformed(wire::rndv, n, h.m.src);  // a sender outside the job
    // Before the header handler: a message declined here never reaches it.
    Req* r = c_.new_req(Req::Kind::recv, nullptr);
    if (!r) [[unlikely]] {
        decline_rndv(p, h);
        return;
    }
    std::uint32_t id = h.m.tag;
    AmHandler* hd = id < am_handlers_.size() ? &am_handlers_[id] : nullptr;
    AmDestination d{};
    if (hd && hd->header) {
        AmInfo info{h.m.src, id, {uhdr, h.am_header_len}, h.total};
        d = hd->header(*c_.ctx, info, hd->arg);
    } else {
        report_bad_handler(warned_bad_am_, h.m.src, id);
    }
    r->internal = true;
    r->is_am = true;
    r->matched = true;
    r->peer = p;
    r->buf = d.buffer;
    r->capacity = d.buffer ? h.total : 0;
    r->am_done = d.completion ? d.completion : (hd ? hd->completion : nullptr);
    r->am_user = d.user_data;
    r->am_target_counter = h.am_target_counter;
    r->am_completion_token = h.am_completion_token;
    r->st().source = h.m.src;
    r->st().tag = id;
    tagged_.start_rndv(r, p, h, handle);
}

// No request to receive a large active message into (out of memory, or
// pml_base_max_requests): it is not fetched.  The sender's request ends (fin:
// its buffer is free again) and the counters waiting for the message count it
// lost, as for one lost on the way; before, the origin waited for good.
void ActiveMessages::decline_rndv(Peer* p, const wire::RndvHdr& h) noexcept {
    log::error("pml: out of requests: an active message of {} bytes from rank {} is declined",
               h.total, p->rank);
    if (h.am_target_counter) reinterpret_cast<Counter*>(h.am_target_counter)->add_lost(1);
    if (Peer* sp = c_.peers.send_peer(p->rank); sp && !sp->failed) {
        const wire::FinHdr f{h.sreq};
        outbox_.send_ctrl(sp, wire::fin, &f, sizeof f);
    }
    if (h.am_completion_token) answer_completion(p->rank, h.am_completion_token, true);
}

// Runs when an internal (active message) receive has all its data.
void ActiveMessages::finish(Req* r) noexcept {
    // The completion handler runs once all data is in place: not for a message
    // whose sender died or gave up part way.  Its counters count it as lost.
    if (!ok(r->st().status)) [[unlikely]] {
        log::error(
            "pml: an active message of {} bytes from rank {} was lost ({}); its "
            "completion handler does not run",
            r->st().sent_length, r->st().source, to_string(r->st().status));
        // What waits for it is told that it never comes.
        if (r->am_target_counter) reinterpret_cast<Counter*>(r->am_target_counter)->add_lost(1);
        if (r->am_completion_token) answer_completion(r->st().source, r->am_completion_token, true);
        return;
    }
    if (r->am_done) r->am_done(*c_.ctx, r->st().source, r->buf, r->st().length, r->am_user);
    if (r->am_target_counter) reinterpret_cast<Counter*>(r->am_target_counter)->add(1);
    if (r->am_completion_token) answer_completion(r->st().source, r->am_completion_token, false);
}

void ActiveMessages::on_am_done(const std::byte* b, std::size_t) noexcept {
    wire::AmDoneHdr a;
    std::memcpy(&a, b, sizeof a);
    settle_completion(c_.peers.peer(a.src), reinterpret_cast<Counter*>(a.token), a.lost);
}

// One completion `p` owed to counter c came, or never will.
void ActiveMessages::settle_completion(Peer* p, Counter* c, bool lost) noexcept {
    if (p) forget_owed(p, c);
    if (lost) [[unlikely]]
        c->add_lost(1);
    else
        c->add(1);
}

// One completion p owed to c is no longer waited for from p.
void ActiveMessages::forget_owed(Peer* p, Counter* c) noexcept {
    auto& owed = p->owed_completions;
    const auto it = owed_entry(owed, c);
    if (it != owed.end() && --it->second == 0) {
        *it = owed.back();
        owed.pop_back();
    }
}

// The peer failed: the completions it owed will never come.
void ActiveMessages::write_off_completions(Peer* p) noexcept {
    std::uint64_t n = 0;
    for (auto& [counter, count] : p->owed_completions) {
        counter->add_lost(count);
        n += count;
    }
    p->owed_completions.clear();
    if (n > 0)
        log::error(
            "pml: rank {} failed before {} active message(s) sent to it completed; "
            "their completion counters count them as lost",
            p->rank, n);
}

}  // namespace transit::pml
