// Engine setup, teardown, peers, pools, queues and waiting.
#include "pml/engine.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "transit/name_hash.hpp"
#include "transit/params.hpp"

namespace transit::pml {

namespace {

constexpr params::Decl pml_params[] = {
    {"unexpected_limit", params::Type::size, "64M",
     "Memory for buffered unexpected messages; past it, senders are throttled to rendezvous "
     "(header only) until receives catch up. Nothing is ever dropped",
     4},
    {"wait_spin_count", params::Type::unsigned_integer, "2000",
     "Idle progress polls in wait before yielding the processor between polls", 4},
    {"progress_thread", params::Type::boolean, "false",
     "Run a progress thread that drives transfers while the program computes; every API "
     "call then takes a lock",
     6},
    params::Decl{"verbose", params::Type::integer, "0", "Verbosity of the pml (protocol decisions)",
                 5}
        .range(0, 100),
    {"rndv_split_min", params::Type::size, "8k",
     "Smallest rendezvous message split between the two processes: over a transport with both "
     "put and get, the receiver gets the first half while the sender puts the second, so both "
     "copy at once (shared memory and CMA copy on the CPU). 0: the receiver moves it all",
     5},
    params::Decl{"launcher_grace", params::Type::unsigned_integer, "1000",
                 "Milliseconds between the launcher's report that a rank's process ended and "
                 "failing that peer here, so a transport that holds operations with it reports "
                 "the loss first, in its own order. A peer no transport knows of is failed only "
                 "after it",
                 6}
        .range(0, 600000),
    params::Decl{"max_requests", params::Type::unsigned_integer, "0",
                 "Most requests, the user's and the pml's own, that may exist at once (rounded "
                 "up to a multiple of 64); past it a new send or receive returns "
                 "out_of_resource and a large incoming active message is declined (its "
                 "counters count it lost). 0: no limit",
                 6},
    params::Decl{"control_refusal_grace", params::Type::unsigned_integer, "2000",
                 "Milliseconds a peer's transport may refuse our control messages (acks, fins, "
                 "one-sided replies) for good, with none going through, before that peer is "
                 "failed here. A transport that lost the peer normally reports it sooner",
                 6}
        .range(0, 600000),
};

}  // namespace

// Receive trampolines: the am table calls these with the engine as cbdata.
struct Handlers {
    // Views the message as one contiguous block (copying only if the btl split it).
    static const std::byte* view(Engine* e, const btl::ReceiveDescriptor& d,
                                 std::size_t& len) noexcept {
        if (d.segment_count == 1) [[likely]] {
            len = d.segments[0].len;
            return static_cast<const std::byte*>(d.segments[0].addr);
        }
        return gather(e->scratch_, d, len);
    }
    [[gnu::noinline]] static const std::byte* gather(std::vector<std::byte>& scratch,
                                                     const btl::ReceiveDescriptor& d,
                                                     std::size_t& len) noexcept {
        len = btl::total_length(btl::segments_of(d));
        try {
            if (scratch.size() < len) scratch.resize(len);
        } catch (...) {
            len = 0;
            return nullptr;
        }
        btl::gather_segments(btl::segments_of(d), scratch.data());
        return scratch.data();
    }
    template <wire::Kind K>
    static void recv(btl::Module*, const btl::ReceiveDescriptor& d, void* cbdata) noexcept {
        auto* e = static_cast<Engine*>(cbdata);
        if (e->any_failed_ && d.endpoint && e->written_off(d.endpoint->peer())) [[unlikely]]
            return;
        std::size_t n;
        const std::byte* b = view(e, d, n);
        if (!b) [[unlikely]] {
            e->drop_received(K, d, "out of memory gathering its segments");
            return;
        }
        if (n < wire::header_size(K)) [[unlikely]] {
            e->drop_received(K, d, "shorter than its header");
            return;
        }
        if constexpr (K == wire::match)
            e->on_match(b, n, d.tag);
        else if constexpr (K == wire::rndv)
            e->on_rndv(b, n);
        else if constexpr (K == wire::ack)
            e->on_ack(b, n);
        else if constexpr (K == wire::frag)
            e->on_frag(b, n);
        else if constexpr (K == wire::fin)
            e->on_fin(b, n);
        else if constexpr (K == wire::am)
            e->on_am(b, n);
        else if constexpr (K == wire::am_done)
            e->on_am_done(b, n);
        else if constexpr (K == wire::osc_put || K == wire::osc_get || K == wire::osc_atomic)
            e->on_osc(K, b, n);
        else if constexpr (K == wire::osc_ack || K == wire::osc_get_reply ||
                           K == wire::osc_atomic_reply)
            e->on_osc_reply(K, b, n);
        else if constexpr (K == wire::barrier)
            e->on_barrier(b, n);
        else if constexpr (K == wire::throttle)
            e->on_throttle(b, n);
        else if constexpr (K == wire::split)
            e->on_split(b, n);
        else if constexpr (K == wire::split_fin)
            e->on_split_fin(b, n);
        else if constexpr (K == wire::frag_abort)
            e->on_frag_abort(b, n);
        else if constexpr (K == wire::lost)
            e->on_match(b, n, d.tag);  // in sequence, like the message it stands for
    }
    template <int... K>
    static void register_all(Engine* e, std::integer_sequence<int, K...>) {
        (reg(e, static_cast<wire::Kind>(K), &recv<static_cast<wire::Kind>(K)>), ...);
    }
    static void reg(Engine* e, wire::Kind k, btl::ReceiveFn fn) {
        Status s = btl::am_table().register_callback(wire::tag(k), fn, e);
        if (!ok(s))
            throw std::runtime_error(
                fmt::format("pml: cannot register btl tag {:#x}: {}", wire::tag(k), to_string(s)));
        e->registered_tags_.push_back(wire::tag(k));
    }
};

Engine::Engine(std::unique_ptr<rt::Runtime> runtime)
    : runtime_(std::move(runtime)), progress_(progress_engine()) {
    rank_ = runtime_->rank();
    size_ = runtime_->size();
    register_params();
    setup();
}

void register_params() {
    params::registry().add_all("pml", "base", pml_params);
}

void Engine::register_params() {
    auto& reg = params::registry();
    pml::register_params();
    settings_.unexpected_limit = reg.get("pml_base_unexpected_limit").as_unsigned();
    settings_.wait_spin_count = reg.get("pml_base_wait_spin_count").as_unsigned();
    settings_.progress_thread = reg.get("pml_base_progress_thread").as_bool();
    settings_.verbose = static_cast<int>(reg.get("pml_base_verbose").as_int());
    settings_.rndv_split_min = reg.get("pml_base_rndv_split_min").as_unsigned();
    settings_.launcher_grace =
        std::chrono::milliseconds(reg.get("pml_base_launcher_grace").as_unsigned());
    reqs_.set_limit(reg.get("pml_base_max_requests").as_unsigned());
    settings_.control_refusal_grace =
        std::chrono::milliseconds(reg.get("pml_base_control_refusal_grace").as_unsigned());
    out_ = log::Stream("pml", settings_.verbose);
}

void Engine::setup() {
    framework_ = std::make_unique<btl::Framework>(*runtime_, progress_, btl::am_table());
    framework_->open();
    framework_->init();
    Handlers::register_all(this, std::make_integer_sequence<int, wire::kind_count>{});
    for (btl::Module* m : framework_->modules()) m->register_error(&Engine::on_btl_error, this);
    Status s = runtime_->fence();
    if (!ok(s)) throw std::runtime_error(fmt::format("pml: modex fence failed: {}", to_string(s)));

    std::vector<bml::ComponentInfo> infos;
    for (const mca::ComponentRecord& r : framework_->records())
        infos.push_back({r.name, r.state, r.reason});
    for (btl::Module* m : framework_->modules())
        component_hash_.push_back(name_hash(m->component().name()));
    bml_ = std::make_unique<bml::R2>(framework_->modules(), std::move(infos), rank_, size_);
    peers_.resize(size_);
    pending_desc_.reserve(64);
    // Every peer's endpoints now, not on our first send to it: a transport
    // only listens to (and watches for the death of) peers it was given, and a
    // rank may well only ever receive from some peer.
    for (Rank r = 0; r < size_; ++r) send_peer(r);
    if (size_ > 1 && !runtime_->is_singleton())
        launcher_watch_ = progress_.add(&Engine::check_launcher, this, ProgressPriority::low);
    out_.verbose(10, "pml ready: rank {} of {}, {} btl module(s)", rank_, size_,
                 framework_->modules().size());
    if (settings_.progress_thread) start_progress_thread();
}

Engine::~Engine() {
    shutdown();
    report_drops();
    if (launcher_watch_) progress_.remove(launcher_watch_);
    for (RegionImpl* r : regions_) {
        std::unique_ptr<RegionImpl> owned(r);  // made by register_memory
        for (auto& e : owned->entries)
            if (e.handle) e.module->rdma()->deregister_mem(e.handle);
    }
    for (btl::Tag t : registered_tags_) btl::am_table().unregister_callback(t);
    bml_.reset();
    framework_.reset();  // module memory goes with its module
    for (const Allocation& a : allocations_)
        if (!a.module) std::free(a.p);
}

void Engine::start_progress_thread() {
    threaded_ = true;
    thread_ = std::thread([this] {
        std::uint64_t idle = 0;
        while (!stop_thread_.load(std::memory_order_relaxed)) {
            int events;
            {
                std::lock_guard<std::recursive_mutex> g(mutex_);
                events = progress();
            }
            // Busy for a while after activity, then gentle: the program's own
            // threads need the cores more than an idle poller does.
            if (events > 0)
                idle = 0;
            else if (++idle > settings_.wait_spin_count)
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            else
                sched_yield();
        }
    });
}

void Engine::stop_progress_thread() noexcept {
    if (!thread_.joinable()) return;
    stop_thread_.store(true);
    thread_.join();
    threaded_ = false;
}

void Engine::shutdown() noexcept {
    if (shut_down_) return;
    shut_down_ = true;
    stop_progress_thread();
    // Our own queues first, so nothing of ours is still on its way; then a
    // barrier so no peer still sends to us; then the launcher's fence so no
    // peer tears down its transports while our last barrier message travels.
    wait_until([&] { return !has_pending_ && osc_outstanding_total_ == 0; });
    if (size_ > 1) {
        barrier();
        runtime_->fence();
    }
}

void Engine::yield() noexcept {
    sched_yield();
}

// The first message from or to a rank (the fast path is inline in the header).
Peer* Engine::make_peer(Rank r) noexcept {
    if (r >= size_) return nullptr;
    try {
        peers_[r] = std::make_unique<Peer>();
    } catch (...) {
        return nullptr;
    }
    Peer* p = peers_[r].get();
    p->rank = r;
    return p;
}

Peer* Engine::connect_peer(Rank r) noexcept {
    Peer* p = peer(r);
    if (!p) return nullptr;
    if (!p->ep) p->ep = bml_->endpoint(r);
    return p->ep ? p : nullptr;
}

void Engine::complete_internal(Req* r) noexcept {
    if (r->kind == Req::Kind::recv)
        am_finish(r);
    else if (r->origin_counter)
        r->origin_counter->add(1);
    release(r);
}

// The first few drops of each kind are logged, the last of them saying so: a
// peer sending garbage must not flood the log.
bool Engine::log_drop(wire::Kind k) noexcept {
    return drops_[k].admit();
}

const char* Engine::drop_note(wire::Kind k) const noexcept {
    return drops_[k].at_limit() ? " (further drops of this kind are not logged)" : "";
}

// At the end, the drops that went unlogged are counted (after the barrier:
// a late one is in the count too).
void Engine::report_drops() const noexcept {
    for (int k = 0; k < wire::kind_count; ++k)
        if (drops_[k].unlogged() != 0)
            log::error("pml: {} messages of kind {} were dropped in all ({} not logged)",
                       drops_[k].total(), wire::name(static_cast<wire::Kind>(k)),
                       drops_[k].unlogged());
}

void Engine::drop_received(wire::Kind k, const btl::ReceiveDescriptor& d,
                           const char* why) noexcept {
    if (!log_drop(k)) return;
    // -1: a transport that does not say which endpoint a message came over.
    const long long from = d.endpoint ? static_cast<long long>(d.endpoint->peer()) : -1;
    log::error("pml: a message of kind {} ({} bytes) from rank {} was dropped: {}{}", wire::name(k),
               btl::total_length(btl::segments_of(d)), from, why, drop_note(k));
}

// A peer's message whose lengths do not add up: the sender is not a Transit
// pml of this version, or memory was corrupted on the way.
void Engine::malformed(wire::Kind k, std::size_t n, Rank from) noexcept {
    if (!log_drop(k)) return;
    log::error("pml: a malformed message of kind {} ({} bytes) from rank {} was dropped{}",
               wire::name(k), n, from, drop_note(k));
}

std::size_t Engine::ctrl_payload_limit(Peer* p) const noexcept {
    const auto& a = p->ep->eager[0].module->attributes();
    return a.eager_limit > sizeof(wire::OscHdr) ? a.eager_limit - sizeof(wire::OscHdr) : 0;
}

Status Engine::try_send(Peer* p, btl::Tag tag, const void* hdr, std::size_t hdr_len,
                        const iovec* pieces, std::size_t count, Refusal refusal) noexcept {
    const bml::BtlRef& b = p->ep->pick_eager();
    btl::Convertor conv(std::span<const iovec>(pieces, count));
    std::size_t data_len = conv.total();
    btl::Descriptor* d = nullptr;
    Status s =
        b.module->sendi(b.endpoint, &conv, hdr, hdr_len, data_len, btl::no_order, 0, tag, &d);
    if (s == Status::completed || s == Status::success) {
        if (refusal == Refusal::retried) control_sent(p);
        return Status::success;
    }
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

Status Engine::post_desc(const PendingDesc& pd, Refusal refusal) noexcept {
    const Status s = pd.module->send(pd.endpoint, pd.desc, pd.tag);
    if (s != Status::out_of_resource) [[likely]] {
        if (!ok(s))
            end_desc(pd, s, refusal);
        else if (pd.control)
            control_sent(send_peer(pd.rank));
        return s;
    }
    try {
        pending_desc_.push_back(pd);
    } catch (...) {
        end_desc(pd, Status::out_of_resource);  // no memory to queue it: it fails, nothing leaks
        return Status::out_of_resource;
    }
    has_pending_ = true;
    return Status::success;
}

void Engine::end_desc(const PendingDesc& pd, Status s, Refusal refusal) noexcept {
    // An eager send completed when its data was copied, so its user saw
    // success: the log and the receiver's failed receive (wire::lost) are the
    // word that the message never left.  (A lost peer's messages are
    // accounted for by the failure report.)
    if (s != Status::peer_failed && refusal == Refusal::lost) {
        log::error("pml: a message to rank {} over {} was refused: '{}'", pd.rank,
                   pd.module->name(), to_string(s));
        if (pd.tag == wire::tag(wire::match))
            report_lost_message(pd, s);
        else if (pd.tag == wire::tag(wire::rndv))
            fail_unsent_rndv(pd, s);
    }
    if (pd.desc->cbfunc) pd.desc->cbfunc(pd.module, pd.endpoint, pd.desc, s);
    pd.module->free(pd.desc);
}

// An eager tagged message that never left: without a word its receiver would
// hold every later message from us for good, waiting for its sequence number.
// The stand-in (wire::lost) takes its place and fails the receive it matches.
void Engine::report_lost_message(const PendingDesc& pd, Status s) noexcept {
    Peer* p = send_peer(pd.rank);
    const btl::Descriptor& d = *pd.desc;
    if (!p || p->failed || d.segment_count == 0 || d.segments[0].len < sizeof(wire::MatchHdr))
        return;
    const std::size_t len = btl::total_length(btl::segments_of(d));
    wire::LostHdr h{};
    std::memcpy(&h.m, d.segments[0].addr, sizeof h.m);
    h.status = static_cast<std::int32_t>(s);
    h.total = len - sizeof(wire::MatchHdr);
    send_ctrl(p, wire::lost, &h, sizeof h);
}

// A rendezvous header that never left: its send would wait for an answer for
// good.  It fails with the refusal; a tagged one's receiver gets the stand-in
// for its sequence number, an active message's completion counter the loss.
void Engine::fail_unsent_rndv(const PendingDesc& pd, Status s) noexcept {
    const btl::Descriptor& d = *pd.desc;
    if (d.segment_count == 0 || d.segments[0].len < sizeof(wire::RndvHdr)) [[unlikely]]
        return;
    wire::RndvHdr h;
    std::memcpy(&h, d.segments[0].addr, sizeof h);
    auto* r = reinterpret_cast<Req*>(h.sreq);
    Peer* p = send_peer(pd.rank);
    if (h.kind == wire::kind_tagged && p && !p->failed) {
        const wire::LostHdr lost{h.m, static_cast<std::int32_t>(s), h.total};
        send_ctrl(p, wire::lost, &lost, sizeof lost);
    } else if (h.kind == wire::kind_am && r->am_completion_token && p) {
        settle_completion(p, reinterpret_cast<Counter*>(r->am_completion_token), true);
    }
    r->st().status = s;
    r->stage = Req::Stage::done;
    if (!r->issuing) complete(r);  // else the sender completes it when it returns
}

// Copies a refused control message's bytes back into pending_ctrl_ (the
// peer's failure, when it comes, drops it there).  False when out of memory.
bool Engine::requeue_control(const PendingDesc& pd) noexcept {
    Peer* p = send_peer(pd.rank);
    const btl::Descriptor& d = *pd.desc;
    const std::size_t len = btl::total_length(btl::segments_of(d));
    if (!p || p->failed) return false;
    RawMsg* m = raws_.get();
    if (!m) return false;
    m->data = buffers_.get(len, m->cls);
    if (!m->data) {
        raws_.put(m);
        return false;
    }
    btl::gather_segments(btl::segments_of(d), m->data);
    m->len = len;
    m->tag = static_cast<std::uint32_t>(len);  // all of it goes as the header
    m->btl_tag = pd.tag;
    m->src = p->rank;
    pending_ctrl_.push_back(m);
    has_pending_ = true;
    return true;
}

Status Engine::send_ctrlv(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                          const iovec* pieces, std::size_t count) noexcept {
    if (p->failed) [[unlikely]]
        return Status::peer_failed;  // nobody would ever answer
    // Refused at once, it is kept and retried like a message with no room.
    if (pending_ctrl_.empty()) [[likely]] {
        const Status s =
            try_send(p, wire::tag(kind), hdr, hdr_len, pieces, count, Refusal::retried);
        if (ok(s)) [[likely]]
            return Status::success;
        if (s != Status::out_of_resource) control_refused(p, s);
    }
    // Keep a copy and retry from progress: control messages are never dropped.
    std::size_t data_len = 0;
    for (std::size_t i = 0; i < count; ++i) data_len += pieces[i].iov_len;
    RawMsg* m = raws_.get();
    if (!m) return Status::out_of_resource;
    m->data = buffers_.get(hdr_len + data_len, m->cls);
    if (!m->data) {
        raws_.put(m);
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
    has_pending_ = true;
    return Status::success;
}

int Engine::drain_pending() noexcept {
    int events = 0;
    if (failures_to_handle_) [[unlikely]] {
        handle_failures();
        ++events;
    }
    while (!pending_desc_.empty()) {
        const PendingDesc pd = pending_desc_.front();
        const Status s = pd.module->send(pd.endpoint, pd.desc, pd.tag);
        if (s == Status::out_of_resource) break;
        pending_desc_.erase(pending_desc_.begin());
        // Refused for good (the btl lost the peer first): the descriptor never
        // went, so its callback must still come, or its request waits forever.
        // A control message goes back to the queue it would have been kept in.
        if (!ok(s)) [[unlikely]] {
            const bool requeued = pd.control && requeue_control(pd);
            end_desc(pd, s, requeued ? Refusal::retried : Refusal::lost);
            if (requeued) control_refused(send_peer(pd.rank), s);
        } else if (pd.control) {
            control_sent(send_peer(pd.rank));
        }
        ++events;
    }
    while (RawMsg* m = pending_ctrl_.front()) {
        Peer* p = send_peer(m->src);
        if (p->failed) [[unlikely]] {  // queued before the failure was handled
            pending_ctrl_.erase(m);
            drop(m);
            continue;
        }
        iovec v{m->data + m->tag, m->len - m->tag};
        const Status s = try_send(p, m->btl_tag, m->data, m->tag, &v, 1, Refusal::retried);
        if (!ok(s)) {
            if (s != Status::out_of_resource) control_refused(p, s);
            break;
        }
        pending_ctrl_.erase(m);
        drop(m);
        ++events;
    }
    // Each queued request gets one attempt per call; one that is still blocked
    // goes to the back (sequence numbers keep matching order regardless).
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
    update_pending();
    return events;
}

void Engine::drop(RawMsg* m) noexcept {
    buffers_.put(m->data, m->cls);
    m->data = nullptr;
    raws_.put(m);
}

RawMsg* Engine::keep(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
    RawMsg* m = raws_.get();
    if (!m) return nullptr;
    m->data = buffers_.get(len ? len : 1, m->cls);
    if (!m->data) {
        raws_.put(m);
        return nullptr;
    }
    std::memcpy(m->data, bytes, len);
    m->len = len;
    m->btl_tag = tag;
    return m;
}

// Memory from the most exclusive transport that offers any (vader: its shared
// segment, which local peers access directly), else page-aligned heap.
void* Engine::mem_alloc(std::size_t size) noexcept {
    std::vector<btl::Module*> offering;
    try {
        allocations_.reserve(allocations_.size() + 1);  // so recording it cannot fail
        if (framework_) offering.assign(framework_->modules().begin(), framework_->modules().end());
    } catch (...) {
        return nullptr;
    }
    std::stable_sort(offering.begin(), offering.end(), [](btl::Module* a, btl::Module* b) {
        return a->attributes().exclusivity > b->attributes().exclusivity;
    });
    for (btl::Module* m : offering) {
        btl::Rdma* rdma = m->rdma();
        if (void* p = rdma ? rdma->mem_alloc(size) : nullptr) {
            allocations_.push_back({p, m});
            return p;
        }
    }
    void* p = nullptr;
    if (posix_memalign(&p, 4096, size ? size : 1) != 0) return nullptr;
    allocations_.push_back({p, nullptr});
    return p;
}

void Engine::mem_free(void* p) noexcept {
    for (auto it = allocations_.begin(); it != allocations_.end(); ++it) {
        if (it->p != p) continue;
        if (!it->module)
            std::free(p);
        else
            it->module->rdma()->mem_free(p);
        allocations_.erase(it);
        return;
    }
}

}  // namespace transit::pml
