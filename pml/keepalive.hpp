// The keep-alive: where a transport gives no word of a peer's death (ofi's
// tcp;ofi_rxm has no connection to watch while nothing is in flight; a
// launcher, Slurm's among them, may send no termination event), a peer we
// wait on is probed over the path the pml uses to it, and failed like any
// lost peer (Failure::declare_failed) when it answers nothing in time.
//
// Cost: nothing per message but the store of PeerWatch::heard (Dispatch); the
// look runs from a low-priority progress callback (every 8th pass), reads
// the clock on every 32nd call only (a busy receiver's pass takes tens of
// nanoseconds, a look is due every tens of milliseconds), and looks at the
// peers every quarter of the shorter of the period and the timeout.  A
// waiter asleep in the kernel (wait policy block) sleeps no longer than that
// while a peer is watched (Engine::rest), and looks as soon as it wakes from
// a sleep that ran out.  Probes go only to a peer with outstanding work that
// said nothing for a whole period: none on a busy link, none to idle peers.
// Peers outside the job are not watched (their connections are their
// transports' business, and a bye ends them).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pml/core.hpp"
#include "transit/progress.hpp"

namespace transit::pml {

class Outbox;
class Failure;

class KeepAlive {
  public:
    KeepAlive(Core& core, Outbox& outbox, Failure& failure) noexcept
        : c_(core), outbox_(outbox), failure_(failure) {}
    KeepAlive(const KeepAlive&) = delete;
    KeepAlive& operator=(const KeepAlive&) = delete;

    // Joins the progress engine when the settings ask for it and the job has
    // other ranks; stop() before the engine's pieces go.
    void start(ProgressEngine& progress);
    void stop() noexcept;
    bool on() const noexcept { return static_cast<bool>(handle_); }

    // Some peer was watched at the last look: a sleeping waiter wakes by
    // `interval()` to look again.
    bool watching() const noexcept { return watching_ > 0; }
    std::chrono::milliseconds interval() const noexcept { return interval_; }
    // The next progress looks if its interval has passed (after a sleep).
    void soon() noexcept { countdown_ = 1; }

    // A peer's probe: answered at once, whatever our own settings.
    // `arrived`: the module it came by (a path measurement's probe is
    // answered over it, path_measure.hpp).
    void on_ping(const std::byte* b, Rank from, btl::Module* arrived) noexcept;
    // Probes sent by this process (for tests and tools).
    std::uint64_t probes_sent() const noexcept { return probes_sent_; }

  private:
    static int look_cb(void* self) noexcept;
    int look() noexcept;
    void mark_work() noexcept;
    static bool reported_by_transport(const Peer& p) noexcept;

    Core& c_;
    Outbox& outbox_;
    Failure& failure_;
    ProgressEngine* progress_ = nullptr;
    ProgressEngine::Handle handle_{};
    std::chrono::milliseconds interval_{};
    std::chrono::steady_clock::time_point last_look_{};
    // Time spent looking: at most two intervals per look (see look()).
    std::chrono::steady_clock::duration looked_{};
    // The clock is read every this many calls of the (low-priority) callback.
    static constexpr std::uint32_t clock_every = 32;
    std::uint32_t countdown_ = clock_every;
    std::size_t watching_ = 0;
    std::uint64_t probes_sent_ = 0;
    std::vector<std::uint8_t> has_work_;  // by rank, filled at each look
};

}  // namespace transit::pml
