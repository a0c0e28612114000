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
        return p->gone_status();
    // Owed before it goes: over a loopback the answer comes back inside the send.
    const std::uint64_t token = c.completion ? owe_completion(p, c.completion) : 0;
    if (c.completion && !token) [[unlikely]]
        return Status::out_of_resource;
    if (sizeof(wire::AmHdr) + header.size() + len <= p->ep->eager_limit) [[likely]] {
        wire::AmHdr h{c_.rank, id, static_cast<std::uint32_t>(header.size()), 0, c.target, token};
        iovec v[2] = {{const_cast<std::byte*>(header.data()), header.size()},
                      {const_cast<void*>(data), len}};
        Status s = outbox_.send_ctrlv(p, wire::am, &h, sizeof h, v, 2);
        if (!ok(s)) {
            if (token) take_owed(p, token);
            return s;
        }
        if (c.origin) c.origin->add(1);  // copied: the buffer is free again
        return Status::completed;
    }
    Req* r = c_.new_req(Req::Kind::send, nullptr);
    if (!r) {
        if (token) take_owed(p, token);
        return Status::out_of_resource;
    }
    r->internal = true;
    r->is_am = true;
    r->peer = p;
    r->am_handler = id;
    r->origin_counter = c.origin;
    r->am_target_counter = c.target;
    r->am_completion_token = token;
    r->am_header_len = static_cast<std::uint32_t>(header.size());
    if (!header.empty()) std::memcpy(r->remote_handle.data(), header.data(), header.size());
    std::destroy_at(&r->conv);
    std::construct_at(&r->conv, data, len);
    r->total = len;
    Status s = sender_.start_send(r, Sender::Path::rndv);
    return s == Status::completed ? Status::completed : Status::success;
}

namespace {

// A completion token: the owed slot's index (low 32 bits) and generation.
std::uint64_t owed_token(std::size_t index, const Peer::Owed& o) noexcept {
    return std::uint64_t{o.generation} << 32 | index;
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
    Counter* target = target_counter(h.target_counter);
    if (h.target_counter && !target) [[unlikely]] {
        counter_refused(h.src, wire::am);
        if (h.completion_token) answer_completion(h.src, h.completion_token, true);
        return;
    }
    const std::byte* uhdr = parts->user_header.data();
    const std::byte* data = parts->data.data();
    std::size_t len = parts->data.size();
    AmHandler* hd = h.handler < am_handlers_.size() ? &am_handlers_[h.handler] : nullptr;
    if (!hd || !hd->header) [[unlikely]] {
        if (hold_unclaimed(b, n, false)) return;
        // Not delivered: neither counter counts it as done.
        report_bad_handler(warned_bad_am_, h.src, h.handler);
        if (target) target->add_lost(1);
        if (h.completion_token) answer_completion(h.src, h.completion_token, true);
        return;
    }
    const AmInfo info{h.src, h.handler, {uhdr, h.header_len}, len};
    const AmDestination d = hd->header(*c_.ctx, info, hd->arg);
    if (d.buffer && len) std::memcpy(d.buffer, data, len);
    const AmCompletionFn fn = d.completion ? d.completion : hd->completion;
    if (fn) fn(*c_.ctx, h.src, d.buffer, len, d.user_data);
    if (target) target->add(1);
    if (h.completion_token) answer_completion(h.src, h.completion_token, false);
}

// An active message for a handler not registered yet, while the context is
// being set up: a rank that finished init first (its path measurement was
// shorter) may send before this one has returned from init, let alone
// registered its handlers.  Kept, up to a bound, and replayed at the first
// progress after init; after that, a message for a handler not registered is
// lost (its counters say so).
bool ActiveMessages::hold_unclaimed(const std::byte* b, std::size_t n, bool rndv) noexcept {
    return setting_up_ && held_.hold(c_, b, n, wire::tag(rndv ? wire::rndv : wire::am));
}

void ActiveMessages::set_up(ProgressEngine& progress) noexcept {
    setting_up_ = false;
    if (held_.empty()) return;
    progress_ = &progress;
    replay_handle_ = progress.add(&ActiveMessages::replay_cb, this);
}

int ActiveMessages::replay_cb(void* self) noexcept {
    auto* a = static_cast<ActiveMessages*>(self);
    a->progress_->remove(a->replay_handle_);
    a->replay_handle_ = {};
    return static_cast<int>(a->held_.replay(a->c_, [a](const RawMsg& m) {
        if (m.btl_tag == wire::tag(wire::rndv))
            a->on_rndv(m.data, m.len);
        else
            a->on_am(m.data, m.len);
    }));
}

void ActiveMessages::drop_held() noexcept {
    if (replay_handle_) progress_->remove(replay_handle_);
    replay_handle_ = {};
    held_.drop_all(c_);
}

// A target counter we never gave out (or a forged one): the message is not
// delivered; its origin's completion counter, if any, counts it lost.
void ActiveMessages::counter_refused(Rank src, wire::Kind k) noexcept {
    c_.drops.named(k, src, "it names no counter of ours as its target");
}

CounterRef ActiveMessages::counter_ref(Counter& c) noexcept {
    for (const CounterSlot& s : counters_.items())
        if (s.in_use && s.counter == &c) return counters_.handle(s);
    CounterSlot* s = counters_.get();
    if (!s) {
        log::error("pml: out of memory naming a counter for peers");
        return 0;
    }
    s->counter = &c;
    return counters_.handle(*s);
}

// The slot's generation moves on as it goes back to the pool: a message
// naming the old ref finds nothing (not delivered, its origin counts it lost),
// whether it arrives now or its rendezvous completes later.
Status ActiveMessages::release_counter_ref(CounterRef ref) noexcept {
    CounterSlot* s = ref ? counters_.find(ref) : nullptr;
    if (!s) return Status::bad_param;
    s->counter = nullptr;
    counters_.put(s);
    return Status::success;
}

// Tells the origin that its active message completed here, or never will.
void ActiveMessages::answer_completion(Rank origin, std::uint64_t token, bool lost) noexcept {
    const wire::AmDoneHdr a{token, c_.rank, lost ? 1u : 0u};
    if (Peer* p = c_.peers.send_peer(origin); p && !p->failed)
        outbox_.send_ctrl(p, wire::am_done, &a, sizeof a);
}

// A completion the origin's counter waits for from `p`, so that it can be
// written off if p fails; its token is what p sends back.  A counter is
// usually shared by all messages to a peer: the list stays short and grows
// (allocates) only for a new counter.  0 when out of memory: the message is
// not sent, since a completion that could not be written off would leave its
// counter waiting for good.
std::uint64_t ActiveMessages::owe_completion(Peer* p, Counter* c) noexcept {
    auto& owed = p->owed_completions;
    std::size_t free = owed.size();
    for (std::size_t i = 0; i < owed.size(); ++i) {
        if (owed[i].counter == c) {
            ++owed[i].count;
            return owed_token(i, owed[i]);
        }
        if (!owed[i].counter && free == owed.size()) free = i;
    }
    if (free == owed.size()) {
        try {
            owed.emplace_back();
        } catch (...) {
            return 0;
        }
    }
    owed[free].counter = c;
    owed[free].count = 1;
    return owed_token(free, owed[free]);
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
    if (h.am_target_counter && !target_counter(h.am_target_counter)) [[unlikely]] {
        counter_refused(h.m.src, wire::rndv);
        return decline_rndv(p, h);
    }
    const std::uint32_t id = h.m.tag;
    AmHandler* hd = id < am_handlers_.size() ? &am_handlers_[id] : nullptr;
    if (!hd || !hd->header) [[unlikely]] {
        if (hold_unclaimed(b, n, true)) return;
        report_bad_handler(warned_bad_am_, h.m.src, id);
        return decline_rndv(p, h);
    }
    Req* r = c_.new_req(Req::Kind::recv, nullptr);
    if (!r) [[unlikely]] {
        log::error("pml: out of requests: an active message of {} bytes from rank {} is declined",
                   h.total, p->rank);
        return decline_rndv(p, h);
    }
    const AmInfo info{h.m.src, id, {uhdr, h.am_header_len}, h.total};
    const AmDestination d = hd->header(*c_.ctx, info, hd->arg);
    r->internal = true;
    r->is_am = true;
    r->matched = true;
    r->peer = p;
    r->buf = d.buffer;
    r->capacity = d.buffer ? h.total : 0;
    r->am_done = d.completion ? d.completion : hd->completion;
    r->am_user = d.user_data;
    r->am_target_counter = h.am_target_counter;
    r->am_completion_token = h.am_completion_token;
    r->st().source = h.m.src;
    r->st().tag = id;
    receiver_.start_rndv(r, p, h, handle);
}

// A large active message not fetched: no request to receive it into (out of
// memory, or pml_base_max_requests), or a target counter not ours.  The
// sender's request ends (fin: its buffer is free again) and the counters
// waiting for the message count it lost, as for one lost on the way.
void ActiveMessages::decline_rndv(Peer* p, const wire::RndvHdr& h) noexcept {
    if (Counter* t = target_counter(h.am_target_counter)) t->add_lost(1);
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
        if (Counter* t = target_counter(r->am_target_counter)) t->add_lost(1);
        if (r->am_completion_token) answer_completion(r->st().source, r->am_completion_token, true);
        return;
    }
    if (r->am_done) r->am_done(*c_.ctx, r->st().source, r->buf, r->st().length, r->am_user);
    if (Counter* t = target_counter(r->am_target_counter)) t->add(1);
    if (r->am_completion_token) answer_completion(r->st().source, r->am_completion_token, false);
}

void ActiveMessages::on_am_done(const std::byte* b, std::size_t, Rank from) noexcept {
    wire::AmDoneHdr a;
    std::memcpy(&a, b, sizeof a);
    Peer* p = c_.peers.peer(from);
    if (!p || !settle_completion(p, a.token, a.lost != 0)) [[unlikely]]
        c_.drops.named(wire::am_done, from, "it names no completion that peer owes");
}

bool ActiveMessages::settle_completion(Peer* p, std::uint64_t token, bool lost) noexcept {
    Counter* c = take_owed(p, token);
    if (!c) [[unlikely]]
        return false;
    if (lost) [[unlikely]]
        c->add_lost(1);
    else
        c->add(1);
    return true;
}

// One completion p owed under `token` is no longer waited for: its counter,
// or nullptr when p owes none under it (forged, stale, another peer's).
Counter* ActiveMessages::take_owed(Peer* p, std::uint64_t token) noexcept {
    auto& owed = p->owed_completions;
    const auto i = static_cast<std::uint32_t>(token);
    if (i >= owed.size() || !owed[i].counter || owed[i].generation != token >> 32) [[unlikely]]
        return nullptr;
    Peer::Owed& o = owed[i];
    Counter* c = o.counter;
    if (--o.count == 0) {
        o.counter = nullptr;
        ++o.generation;
    }
    return c;
}

// The peer failed: the completions it owed will never come.
void ActiveMessages::write_off_completions(Peer* p) noexcept {
    std::uint64_t n = 0;
    for (Peer::Owed& o : p->owed_completions) {
        if (!o.counter) continue;
        o.counter->add_lost(o.count);
        n += o.count;
        o.counter = nullptr;
        o.count = 0;
        ++o.generation;
    }
    if (n > 0)
        log::error(
            "pml: rank {} failed before {} active message(s) sent to it completed; "
            "their completion counters count them as lost",
            p->rank, n);
}

}  // namespace transit::pml
