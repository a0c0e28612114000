// The pml engine: everything behind transit::Context.  One object per process.
// Below ThreadLevel::multiple it takes no lock; at multiple, or with the
// progress thread, every API call holds one recursive lock (lock()), which a
// waiting thread lets go between polls (wait_until).
//
// It owns the btl framework, the bml and the pml's pieces, wires them, and
// drives progress; the protocols live in their collaborators:
//   Outbox          control messages and descriptors waiting for room (outbox.hpp)
//   Sender          a send's life: eager, rendezvous, its end (sender.hpp)
//   Receiver        matching, unexpected messages, a receive's life (receiver.hpp)
//   ActiveMessages  active messages (active_messages.hpp)
//   OneSided        put, get, atomics and their emulation (one_sided.hpp)
//   Failure         lost peers (failure.hpp)
//   KeepAlive       probes of silent peers we wait on (keepalive.hpp)
//   PathMeasure     which transport reaches a rank on another node fastest (path_measure.hpp)
// Received messages reach them through dispatch.cpp.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "bml/r2.hpp"
#include "framework/btl_framework.hpp"
#include "pml/active_messages.hpp"
#include "pml/core.hpp"
#include "pml/failure.hpp"
#include "pml/held_messages.hpp"
#include "pml/idle_wait.hpp"
#include "pml/keepalive.hpp"
#include "pml/one_sided.hpp"
#include "pml/outbox.hpp"
#include "pml/params.hpp"
#include "pml/path_measure.hpp"
#include "pml/receiver.hpp"
#include "pml/sender.hpp"
#include "pml/sleep_set.hpp"
#include "runtime/dynamic_runtime.hpp"
#include "transit/call_lock.hpp"
#include "transit/transit.hpp"

namespace transit::pml {

class Engine;
// Registers the receive callback of every message kind (dispatch.cpp).
void register_receivers(Engine* e);

class Engine {
  public:
    // `level`: the program's choice; none: pml_base_thread_level.
    Engine(std::unique_ptr<rt::Runtime> runtime, std::optional<ThreadLevel> level = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    void set_context(Context* ctx) noexcept { c_.ctx = ctx; }
    void shutdown() noexcept;

    Rank rank() const noexcept { return c_.rank; }
    std::uint32_t size() const noexcept { return c_.size; }
    ThreadLevel thread_level() const noexcept { return level_; }
    rt::Runtime& runtime() noexcept { return *runtime_; }
    const Settings& settings() const noexcept { return c_.settings; }
    // How often this process asked a sender to stop sending eagerly.
    std::uint64_t throttles_sent() const noexcept { return receiver_.throttles_sent(); }
    // Keep-alive probes this process sent (for tests and tools).
    std::uint64_t keepalive_probes() const noexcept { return keepalive_.probes_sent(); }
    // Path measurements still running (bml_base_measure; for tests and tools).
    std::size_t paths_measuring() const noexcept { return measure_.running(); }
    // Modules that carry first fragments to `peer` in turn (for tests and tools).
    std::size_t eager_paths(Rank peer) noexcept {
        Peer* p = c_.peers.send_peer(peer);
        return p ? p->ep->eager_equal : 0;
    }
    // The bml's endpoint for `peer`, built if needed (for tests and tools).
    const bml::Endpoint* peer_endpoint(Rank peer) noexcept {
        Peer* p = c_.peers.send_peer(peer);
        return p ? p->ep : nullptr;
    }
    // Largest tagged message that goes to `peer` eagerly (for tests and tools).
    std::size_t eager_message_limit(Rank peer) noexcept {
        Peer* p = c_.peers.send_peer(peer);
        return p ? Sender::eager_message_limit(*p) : 0;
    }

    int progress() noexcept {
        // The user slept on event_fd() after arm(): awake again now.
        if (sleep_.armed()) [[unlikely]]
            sleep_.disarm();
        int n = progress_.progress();
        if (c_.has_pending) n += drain_pending();
        return n;
    }
    using Clock = std::chrono::steady_clock;
    static constexpr Clock::time_point forever = Clock::time_point::max();
    // now + t, saturated (a negative t is now).
    static Clock::time_point deadline_after(std::chrono::milliseconds t) noexcept {
        const Clock::time_point now = Clock::now();
        if (t.count() <= 0) return now;
        if (std::chrono::duration_cast<std::chrono::milliseconds>(forever - now) <= t)
            return forever;
        return now + t;
    }
    // Progress until pred() holds (true) or the deadline passes (false): spin,
    // then pass the idle time as pml_base_wait_policy says (rest()).
    template <typename Pred>
    bool wait_until(Pred pred, Clock::time_point deadline = forever) noexcept {
        if (calls_.enabled()) [[unlikely]]
            return wait_until_unlocking(pred, deadline);
        IdleWait idle(c_.settings);
        while (!pred()) {
            const int n = progress();
            waited_events_ += n;
            if (n > 0) {
                idle.reset();
            } else if (idle.napping()) {
                if (deadline != forever && Clock::now() >= deadline) return false;
                rest(idle, deadline);
            }
        }
        return true;
    }
    // Progress until at least one event, or the timeout: the events (0 at the timeout).
    int progress_for(std::chrono::milliseconds timeout) noexcept {
        waited_events_ = 0;
        wait_until([&] { return waited_events_ > 0; }, deadline_after(timeout));
        return waited_events_;
    }
    // Context::event_fd and arm (sleep_set.hpp); -1 when a transport cannot
    // wake a sleeper.
    int event_fd() const noexcept { return sleep_.fd(); }
    Status arm() noexcept { return sleep_.arm(); }
    // Why waits cannot sleep in the kernel, or nullptr when they can.
    const char* why_no_block() const noexcept { return sleep_.why_not(); }
    // Held by every API call at ThreadLevel::multiple or when the progress
    // thread runs; empty (no lock taken) otherwise.  Recursive: handlers run
    // under it and may call the API.
    // A call while another thread sleeps in the kernel for this context wakes
    // it (once per sleep): the call may queue work only a poll moves, or
    // complete what the sleeper waits for.
    std::unique_lock<std::recursive_mutex> lock() noexcept {
        std::unique_lock<std::recursive_mutex> held = calls_.hold();
        if (sleeper_ && !kicked_) [[unlikely]] {
            kicked_ = true;
            sleep_.kick();
        }
        return held;
    }

    // tagged
    Status isend(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count, const void* buf,
                 std::size_t len, Req*& out, void* user) noexcept {
        return sender_.isend(dst, tag, iov, count, buf, len, out, user);
    }
    // A blocking send: success with out null when the transport took it at
    // once, else as isend.
    Status send(Rank dst, std::uint32_t tag, const void* buf, std::size_t len, Req*& out) noexcept {
        return sender_.send(dst, tag, buf, len, out);
    }
    Status irecv(Rank src, std::uint32_t tag, void* buf, const iovec* iov, std::size_t count,
                 std::size_t len, Req*& out, void* user) noexcept {
        return receiver_.irecv(src, tag, buf, iov, count, len, out, user);
    }
    Status cancel(Req* r) noexcept { return receiver_.cancel(r); }
    bool iprobe(Rank src, std::uint32_t tag, RequestStatus& st) noexcept {
        return receiver_.iprobe(src, tag, st);
    }
    void release(Req* r) noexcept { c_.release(r); }

    // active messages
    Status register_am(std::uint32_t id, const AmHandler& h) { return am_.register_am(id, h); }
    CounterRef counter_ref(Counter& c) noexcept { return am_.counter_ref(c); }
    Status release_counter_ref(CounterRef ref) noexcept { return am_.release_counter_ref(ref); }
    Status am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header, const void* data,
                   std::size_t len, const AmCounters& counters) noexcept {
        return am_.am_send(dst, id, header, data, len, counters);
    }

    // one-sided
    Status register_memory(void* base, std::size_t size, const RegionScope& scope,
                           RegionImpl*& out) {
        return osc_.register_memory(base, size, scope, out);
    }
    Status deregister_memory(RegionImpl* region) { return osc_.deregister_memory(region); }
    std::vector<std::byte> pack_key(const RegionImpl* region) const {
        return osc_.pack_key(region);
    }
    Status unpack_key(std::span<const std::byte> bytes, RemoteKeyImpl*& out) {
        return osc_.unpack_key(bytes, out);
    }
    Status rma(bool is_put, Rank dst, void* local, std::size_t len, const RemoteKeyImpl* key,
               std::uint64_t offset) noexcept {
        return osc_.rma(is_put, dst, local, len, key, offset);
    }
    Status atomic(Rank dst, std::uint8_t op, AtomicWidth width, const RemoteKeyImpl* key,
                  std::uint64_t offset, std::uint64_t operand, std::uint64_t compare,
                  std::uint64_t* fetched) noexcept;
    Status flush(Rank dst) noexcept;
    Status flush_all() noexcept;

    Status barrier() noexcept;
    // Barrier signals received and not yet consumed (for tests).
    std::uint64_t barrier_arrivals() const noexcept {
        std::uint64_t n = 0;
        for (const auto& epoch : barrier_arrivals_)
            for (std::uint32_t a : epoch) n += a;
        return n;
    }

    // peers outside the job (dynamic_peers.cpp)
    std::string listen();
    Status connect(std::string_view address, Rank& peer);
    Status disconnect(Rank peer, Disconnect how) noexcept;
    // names: the launcher's, or the node's name directory (names.cpp)
    Status publish(std::string_view name);
    Status lookup(std::string_view name, std::chrono::milliseconds wait, std::string& address);
    Status unpublish(std::string_view name);
    void on_peer_event(PeerEventFn fn, void* user) noexcept {
        event_fn_ = fn;
        event_user_ = user;
    }
    // What this process holds for peers outside the job, layer by layer (for
    // tests and tools: each count is of live peers, none of those gone).
    struct DynamicRecords {
        std::size_t pml = 0;         // Peer records (a gone one's until nothing names it)
        std::size_t runtime = 0;     // rt::DynamicRuntime entries
        std::size_t bml = 0;         // bml endpoints
        std::size_t transports = 0;  // btl endpoints (btl::DynamicPeerRecords)
        std::size_t fast_paths = 0;  // e.g. vader's spare fast boxes, taken or parked
    };
    DynamicRecords dynamic_records() noexcept;

    void* mem_alloc(std::size_t size) noexcept;
    void mem_free(void* p) noexcept;

  private:
    friend struct Dispatch;
    // wait_until when threaded: the caller holds the lock (once, from its API
    // call) and keeps it while it polls alone: letting go after every poll
    // cost a lock round trip per poll (multiple/single latency 1.57x).  It is
    // handed over as soon as another thread (a caller or the progress thread)
    // blocks on it, and let go while yielding.  pred() runs under the lock.
    template <typename Pred>
    bool wait_until_unlocking(Pred pred, Clock::time_point deadline) noexcept {
        IdleWait idle(c_.settings);
        while (!pred()) {
            const int n = progress();
            waited_events_ += n;
            if (n > 0) {
                idle.reset();
            } else if (idle.napping()) {
                if (deadline != forever && Clock::now() >= deadline) return false;
                rest_threaded(idle, deadline);
                continue;
            }
            if (calls_.wanted()) [[unlikely]]
                calls_.hand_over();
        }
        return true;
    }
    // An idle poll after the spin: sleep in the kernel when the policy says
    // block and nothing of ours waits for a poll rather than a peer (queued
    // sends), else nap.  Peers lingering after a disconnect are released by
    // the clock: the sleep is cut short for them.  Single-threaded only: with
    // several threads, one asleep would hold work another queued.
    static constexpr std::chrono::milliseconds linger_check{10};
    void rest(IdleWait& idle, Clock::time_point deadline) noexcept {
        if (c_.settings.wait_policy == WaitPolicy::block && sleep_.can_block() && !c_.has_pending) {
            const SleepSet::Woke w = sleep_.sleep(sleep_limit(deadline));
            // After a sleep that ran out, spin once more: the progress
            // engine's low-priority checks run every few polls only.
            if (w == SleepSet::Woke::timeout) {
                idle.reset();
                keepalive_.soon();
            }
            if (w != SleepSet::Woke::cannot) {
                progress_.low_next();
                return;
            }
        }
        idle.pause();
        progress_.low_next();
    }
    // How long a sleep may last: the block interval, cut short for lingering
    // peers, the keep-alive's next look and the caller's deadline.
    std::chrono::milliseconds sleep_limit(Clock::time_point deadline) const noexcept {
        auto max = c_.settings.wait_block_interval;
        if (c_.farewells) max = std::min(max, linger_check);
        // A watched peer's probe or timeout is due by the clock.
        if (keepalive_.watching()) max = std::min(max, keepalive_.interval());
        if (deadline != forever)
            max = std::min(max,
                           std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
        return max;
    }
    // rest() when threaded (waiters and the progress thread), called and
    // returning with the call lock held once.  One thread at a time sleeps in
    // the kernel, the lock let go meanwhile; a call from another thread wakes
    // it (lock()).  The other idle threads wait for that sleeper to wake
    // (woke_), then poll: what wakes the sleeper may be theirs.
    void rest_threaded(IdleWait& idle, Clock::time_point deadline) noexcept {
        if (c_.settings.wait_policy == WaitPolicy::block && sleep_.can_block()) {
            if (sleeper_) {
                wait_for_sleeper(sleep_limit(deadline));
                progress_.low_next();
                return;
            }
            if (!c_.has_pending) {
                const btl::WaitObject::Armed a = sleep_.arm_for_sleep();
                if (a == btl::WaitObject::Armed::busy) return;  // work came: poll
                if (a == btl::WaitObject::Armed::armed) {
                    sleep_in_kernel(idle, sleep_limit(deadline));
                    return;
                }
            }
        }
        calls_.release();
        idle.pause();
        calls_.acquire();
        progress_.low_next();
    }
    void sleep_in_kernel(IdleWait& idle, std::chrono::milliseconds max) noexcept {
        sleeper_ = true;
        kicked_ = false;
        calls_.release();
        const bool ran_out = sleep_.wait_armed(max);
        calls_.acquire();
        sleep_.end_sleep();
        sleeper_ = false;
        {
            std::lock_guard<std::mutex> g(woke_mutex_);
            ++wakes_;
        }
        woke_.notify_all();
        if (ran_out) {
            idle.reset();
            keepalive_.soon();
        }
        progress_.low_next();
    }
    // Lets the call lock go until the sleeper wakes (or `max`), then takes it
    // again, counted among those that want it (CallLock::acquire).
    void wait_for_sleeper(std::chrono::milliseconds max) noexcept {
        const std::uint64_t seen = wakes_;
        calls_.release();
        {
            std::unique_lock<std::mutex> g(woke_mutex_);
            woke_.wait_for(g, max, [&] {
                return wakes_ != seen || stop_thread_.load(std::memory_order_relaxed);
            });
        }
        calls_.acquire();
    }
    void setup();
    void release_transports() noexcept;
    void read_params();
    void release_peer(Peer* p, Rank peer) noexcept;
    // graceful disconnect (farewell.cpp)
    void farewell(std::span<Peer* const> peers) noexcept;
    void say_goodbye_all() noexcept;
    bool quiet(const Peer& p) noexcept;
    bool farewell_done(const Peer& p) noexcept;
    int answer_farewells() noexcept;
    void on_bye_ack(const std::byte* b, Rank from) noexcept;
    void release_gone_peers() noexcept;
    bool named(const Peer& p) noexcept;
    static void on_admit(void* self, Rank peer) noexcept;
    void queue_event(Rank peer, PeerEventKind kind) noexcept;
    void deliver_events() noexcept;
    int drain_pending() noexcept;
    void on_barrier(const std::byte* b, std::size_t n, Rank from) noexcept;
    // Messages that arrived before the peer table existed (dispatch.cpp),
    // taken once it does, in the order they came.
    void hold_early(const std::byte* b, std::size_t n, btl::Tag tag) noexcept;
    void take_early() noexcept;
    void start_progress_thread();
    void stop_progress_thread() noexcept;

    std::unique_ptr<rt::DynamicRuntime> runtime_;
    ProgressEngine& progress_;
    std::unique_ptr<btl::Framework> framework_;
    std::unique_ptr<bml::R2> bml_;
    Core c_;
    Outbox outbox_{c_};
    Sender sender_{c_, outbox_};
    Receiver receiver_{c_, outbox_};
    ActiveMessages am_{c_, outbox_, sender_, receiver_};
    OneSided osc_{c_, outbox_};
    Failure failure_;
    KeepAlive keepalive_{c_, outbox_, failure_};
    PathMeasure measure_{c_, outbox_};
    ProgressEngine::Handle launcher_watch_;  // Failure::check_launcher, low priority

    std::uint32_t barrier_epoch_ = 0;
    std::array<std::array<std::uint32_t, 32>, 2> barrier_arrivals_{};
    struct Allocation {
        void* p;
        btl::Module* module;  // whose mem_alloc gave it; nullptr: the heap
    };
    std::vector<Allocation> allocations_;
    bool shut_down_ = false;
    std::vector<btl::Tag> registered_tags_;
    HeldMessages early_{std::numeric_limits<std::size_t>::max()};
    PeerEventFn event_fn_ = nullptr;
    void* event_user_ = nullptr;
    std::vector<PeerEvent> events_;      // queued for the next drain_pending
    std::vector<PeerEvent> delivering_;  // being delivered (fn may queue more)
    std::vector<Peer*> erasable_;        // release_gone_peers' scratch
    std::vector<std::byte> scratch_;     // a message a btl split into several segments
    ThreadLevel level_ = ThreadLevel::single;
    int waited_events_ = 0;  // progress events in wait_until (for progress_for)
    SleepSet sleep_;         // the transports' wait descriptors (block policy, event_fd)
    CallLock calls_;         // taken by lock(): at level multiple or with the progress thread
    std::atomic<bool> stop_thread_{false};
    std::thread thread_;
    // The threaded sleep (rest_threaded), under calls_: a thread sleeps in the
    // kernel, a call has woken it; sleeps ended so far, changed under calls_
    // and woke_mutex_ both (the waiters for the next wait on woke_).
    bool sleeper_ = false;
    bool kicked_ = false;
    std::uint64_t wakes_ = 0;
    std::mutex woke_mutex_;
    std::condition_variable woke_;
};

}  // namespace transit::pml
