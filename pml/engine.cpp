// The engine: setup and teardown, progress, waiting, the barrier and memory
// for one-sided use.  The protocols are in their collaborators (engine.hpp).
#include "pml/engine.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "transit/name_hash.hpp"
#include "transit/params.hpp"

namespace transit::pml {

namespace {

const char* level_name(ThreadLevel l) noexcept {
    constexpr const char* names[] = {"single", "funneled", "serialized", "multiple"};
    return names[static_cast<int>(l)];
}

// "rank 3", "ranks 1-3, 5": ascending ranks in ranges, for a message.
std::string rank_ranges(const std::vector<Rank>& ranks) {
    std::string out = ranks.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
        if (i > 0) out += ", ";
        out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
        i = j + 1;
    }
    return out;
}

}  // namespace

Engine::Engine(std::unique_ptr<rt::Runtime> runtime, std::optional<ThreadLevel> level)
    : runtime_(std::make_unique<rt::DynamicRuntime>(std::move(runtime))),
      progress_(progress_engine()),
      failure_(c_, *runtime_, outbox_, sender_, receiver_, am_, osc_) {
    c_.rank = runtime_->rank();
    c_.size = runtime_->size();
    c_.am = &am_;
    outbox_.wire_to(&sender_, &failure_);
    read_params();
    level_ = level.value_or(c_.settings.thread_level);
    calls_.enable(level_ == ThreadLevel::multiple || c_.settings.progress_thread);
    // Until setup has made the peer table, every message takes the checked
    // path, which holds it (hold_early).
    c_.receive_checks = true;
    try {
        setup();
    } catch (...) {
        // No destructor runs: undo what setup left outside this object (the
        // active-message callbacks name it), transports before the runtime.
        keepalive_.stop();
        measure_.stop();
        am_.drop_held();
        early_.drop_all(c_);
        release_transports();
        throw;
    }
}

void Engine::release_transports() noexcept {
    for (btl::Tag t : registered_tags_) btl::am_table().unregister_callback(t);
    registered_tags_.clear();
    sleep_.release();
    bml_.reset();
    framework_.reset();  // module memory goes with its module
}

void Engine::read_params() {
    register_params();
    c_.settings = bound_settings();
    c_.reqs.bound(c_.settings.max_requests);
    c_.out = log::Stream("pml", c_.settings.verbose);
}

void Engine::setup() {
    framework_ = std::make_unique<btl::Framework>(*runtime_, progress_, btl::am_table());
    framework_->open();
    framework_->multi_threaded(calls_.enabled());
    framework_->init();
    register_receivers(this);
    for (btl::Module* m : framework_->modules())
        m->register_error(&Failure::on_btl_error, &failure_);
    Status s = runtime_->fence();
    if (!ok(s)) throw std::runtime_error(fmt::format("pml: modex fence failed: {}", to_string(s)));

    std::vector<bml::ComponentInfo> infos;
    for (const mca::ComponentRecord& r : framework_->records())
        infos.push_back({r.name, r.state, r.reason});
    for (btl::Module* m : framework_->modules())
        c_.component_hash.push_back(name_hash(m->component().name()));
    bml_ = std::make_unique<bml::R2>(framework_->modules(), std::move(infos), c_.rank, c_.size);
    std::vector<bool> other_node(c_.size, false);
    for (Rank r = 0; r < c_.size; ++r) other_node[r] = !runtime_->on_this_node(r);
    bml_->set_other_nodes(std::move(other_node));
    c_.peers.init(c_.size, bml_.get(), runtime_.get());
    runtime_->on_admit(&Engine::on_admit, this);
    osc_.set_modules(framework_->modules());
    // Every peer's endpoints now, not on our first send to it: a transport
    // only listens to (and watches for the death of) peers it was given, and a
    // rank may well only ever receive from some peer.  Our own rank's is made
    // when first used: without self (btl=vader,tcp) a job that never sends to
    // itself works, and one that does gets the error then.
    std::vector<Rank> unreachable;
    for (Rank r = 0; r < c_.size; ++r)
        if (r != c_.rank && !c_.peers.send_peer(r)) unreachable.push_back(r);
    // A peer nothing reaches cannot take part: its messages would fail here
    // and a receive waiting for them, and every barrier, would hang.  Init
    // fails instead, as MPI_Init does (the bml has logged why, per transport).
    if (!unreachable.empty())
        throw InitError(
            Status::unreachable,
            fmt::format("{} of {} {} unreachable from rank {}: no selected "
                        "transport reaches {} (the errors above say why)",
                        rank_ranges(unreachable), c_.size, unreachable.size() == 1 ? "is" : "are",
                        c_.rank, unreachable.size() == 1 ? "it" : "them"));
    take_early();
    if (c_.size > 1 && !runtime_->is_singleton())
        launcher_watch_ = progress_.add(&Failure::check_launcher, &failure_, ProgressPriority::low);
    keepalive_.start(progress_);
    measure_.start(progress_, *bml_);
    const auto measured_by = std::chrono::steady_clock::now() + PathMeasure::init_wait;
    while (measure_.running() > 0 && std::chrono::steady_clock::now() < measured_by) progress();
    c_.out.verbose(10, "pml ready: rank {} of {}, {} btl module(s), thread level {}", c_.rank,
                   c_.size, framework_->modules().size(), level_name(level_));
    // Until the pml locks per module, every module is serialised by its lock.
    if (level_ == ThreadLevel::multiple)
        for (btl::Module* m : framework_->modules())
            if (!(m->attributes().flags & btl::flags::thread_safe))
                c_.out.verbose(10, "{}: not safe for concurrent calls, serialised by the pml lock",
                               m->name());
    sleep_.setup(framework_->modules());
    am_.set_up(progress_);
    if (c_.settings.wait_policy == WaitPolicy::block && !sleep_.can_block())
        c_.out.verbose(1, "waits nap instead of sleeping: {}", sleep_.why_not());
    if (c_.settings.progress_thread) start_progress_thread();
}

Engine::~Engine() {
    shutdown();
    am_.drop_held();
    c_.drops.report();
    if (launcher_watch_) progress_.remove(launcher_watch_);
    keepalive_.stop();
    measure_.stop();
    osc_.release_regions();
    release_transports();
    for (const Allocation& a : allocations_)
        if (!a.module) std::free(a.p);
}

void Engine::hold_early(const std::byte* b, std::size_t n, btl::Tag tag) noexcept {
    if (!early_.hold(c_, b, n, tag))
        log::error("pml: out of memory keeping a message that came during set-up: it is lost");
}

void Engine::take_early() noexcept {
    // Without its endpoint the message names its sender in its header, as a
    // transport that does not say who sent does.
    early_.replay(c_, [](const RawMsg& m) {
        const btl::Segment seg{m.data, m.len};
        const btl::ReceiveDescriptor d{nullptr, &seg, 1, m.btl_tag};
        btl::am_table().dispatch(nullptr, d);
    });
    c_.receive_checks = c_.any_dynamic || c_.any_failed;
}

void Engine::start_progress_thread() {
    // Polls as a waiter does (spin, then rest as pml_base_wait_policy says:
    // asleep in the kernel under block), and hands the lock to a caller that
    // wants it.
    thread_ = std::thread([this] {
        IdleWait idle(c_.settings);
        calls_.acquire();
        while (!stop_thread_.load(std::memory_order_relaxed)) {
            if (progress() > 0)
                idle.reset();
            else if (idle.napping())
                rest_threaded(idle, forever);
            if (calls_.wanted()) [[unlikely]]
                calls_.hand_over();
        }
        calls_.release();
    });
}

void Engine::stop_progress_thread() noexcept {
    if (!thread_.joinable()) return;
    stop_thread_.store(true);
    {
        // Asleep in the kernel, it is woken by the call (lock()); waiting for
        // a sleeper, by the notification.
        auto held = lock();
        { std::lock_guard<std::mutex> g(woke_mutex_); }
        woke_.notify_all();
    }
    thread_.join();
}

void Engine::shutdown() noexcept {
    if (shut_down_) return;
    shut_down_ = true;
    stop_progress_thread();
    auto guard = lock();  // wait_until lets it go between polls when threaded
    // Our own queues first, so nothing of ours is still on its way; then a
    // barrier so no peer still sends to us; then the launcher's fence so no
    // peer tears down its transports while our last barrier message travels.
    wait_until([&] { return !c_.has_pending && osc_.outstanding() == 0; });
    // Peers outside the job get what we sent them, or the wait ends at the
    // linger time (the log says which peers did not confirm).
    if (c_.any_dynamic) say_goodbye_all();
    if (c_.size > 1) {
        barrier();
        // Our last signal may still sit in the outbox (the transport had no
        // room when the barrier sent it), and the fence below runs only the
        // transports' progress: a peer still waiting for that signal would
        // never reach the fence, and we would wait in it for good.
        wait_until([&] { return !c_.has_pending; });
        // The launcher may not know of a rank a transport found dead.
        if (c_.any_failed)
            for (Rank r = 0; r < c_.size; ++r)
                if (c_.peers.failed(r)) runtime_->report_lost(r);
        runtime_->fence();
    }
}

int Engine::drain_pending() noexcept {
    int events = 0;
    if (c_.farewells) [[unlikely]]
        events += answer_farewells();
    if (failure_.pending()) [[unlikely]] {
        failure_.handle();
        if (c_.any_dynamic) release_gone_peers();
        ++events;
    }
    events += outbox_.drain();
    events += sender_.drain();
    events += receiver_.drain();
    if (!events_.empty()) [[unlikely]] {
        deliver_events();
        ++events;
    }
    c_.has_pending = outbox_.busy() || sender_.busy() || receiver_.busy() || failure_.pending() ||
                     !events_.empty() || c_.farewells;
    return events;
}

Status Engine::flush(Rank dst) noexcept {
    Peer* p = c_.peers.peer(dst);
    if (!p) return Status::bad_param;
    wait_until([p] { return p->osc_outstanding == 0; });
    return osc_.flush_result(p);
}

// Atomics one process issues to one target are applied in the order issued:
// out of room with some of them in flight (OneSided::atomic), this one waits
// for a completion and is asked again rather than taking another path.
Status Engine::atomic(Rank dst, std::uint8_t op, AtomicWidth width, const RemoteKeyImpl* key,
                      std::uint64_t offset, std::uint64_t operand, std::uint64_t compare,
                      std::uint64_t* fetched) noexcept {
    for (;;) {
        const Status s = osc_.atomic(dst, op, width, key, offset, operand, compare, fetched);
        Peer* p = c_.peers.peer(dst);
        if (s != Status::out_of_resource || !p || p->osc_outstanding == 0) return s;
        const std::uint64_t before = p->osc_outstanding;
        wait_until([&] { return p->osc_outstanding < before || p->failed; });
    }
}

Status Engine::flush_all() noexcept {
    wait_until([this] { return osc_.outstanding() == 0; });
    return osc_.flush_all_result();
}

// Dissemination barrier: log2(n) rounds; in round k each rank signals rank+2^k
// and waits for rank-2^k.  A peer can be at most one barrier ahead, so arrivals
// are counted per epoch parity.
Status Engine::barrier() noexcept {
    const Rank rank = c_.rank;
    const std::uint32_t size = c_.size;
    if (size == 1) return Status::success;
    std::uint32_t epoch = barrier_epoch_++;
    auto& arrivals = barrier_arrivals_[epoch & 1];
    std::uint32_t round = 0;
    for (std::uint32_t dist = 1; dist < size; dist <<= 1, ++round) {
        Peer* p = c_.peers.send_peer((rank + dist) % size);
        Peer* from = c_.peers.peer((rank + size - dist) % size);
        if (!p || !from) return Status::unreachable;
        wire::BarrierHdr h{rank, epoch, round, 0};
        Status s = outbox_.send_ctrl(p, wire::barrier, &h, sizeof h);
        if (!ok(s)) return s;
        // A signal its sender sent before dying still counts.  Until it
        // comes, the keep-alive watches its sender.
        from->awaited = true;
        wait_until([&] { return arrivals[round] > 0 || from->failed; });
        from->awaited = false;
        if (arrivals[round] == 0) return Status::peer_failed;
        --arrivals[round];
    }
    return Status::success;
}

// The barrier is the job's (fence and finalize ride on it too): a signal
// counts only from a rank of the job.  The sender is the peer whose endpoint
// the message came over (a peer outside the job has an id from c_.size on),
// or, from a transport that does not say, the rank its header names (renamed
// by the dispatch for a peer outside the job).
void Engine::on_barrier(const std::byte* b, std::size_t n, Rank from) noexcept {
    wire::BarrierHdr h;
    std::memcpy(&h, b, sizeof h);
    const Rank sender = Core::job_sender(from, h.src);
    if (!c_.other_job_rank(sender)) [[unlikely]]
        return c_.drops.refused(wire::barrier, sender, "job control from a peer outside the job");
    if (h.round >= barrier_arrivals_[0].size()) [[unlikely]]
        return c_.drops.malformed(wire::barrier, n, sender);
    ++barrier_arrivals_[h.epoch & 1][h.round];
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
