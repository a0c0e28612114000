// Whether another process on this node has exited.  A transport that shares
// memory with a peer gets no error when the peer dies: without a watch it would
// wait for the peer's answers forever.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace transit::btl::util {

// Owns a pidfd for one process.  A pidfd (Linux 5.3 and later) names the
// process itself, so a pid reused after the exit cannot fool it; where the
// kernel has no pidfd_open, kill(pid, 0) failing with ESRCH is the fallback,
// which sees the exit only once the parent has reaped the process and can be
// fooled by a reused pid.
class ProcessWatch {
  public:
    // How exited() finds out: signal_only is the fallback, for tests.
    enum class Probe { pidfd_or_signal, signal_only };

    ProcessWatch() noexcept = default;  // watches nothing: exited() is false
    explicit ProcessWatch(pid_t pid, Probe probe = Probe::pidfd_or_signal) noexcept;
    ~ProcessWatch();
    ProcessWatch(ProcessWatch&& other) noexcept;
    ProcessWatch& operator=(ProcessWatch&& other) noexcept;
    ProcessWatch(const ProcessWatch&) = delete;
    ProcessWatch& operator=(const ProcessWatch&) = delete;

    pid_t pid() const noexcept { return pid_; }
    bool watching() const noexcept { return pid_ > 0; }
    bool has_pidfd() const noexcept { return pidfd_ >= 0; }
    // The pidfd (-1: none), readable once the process has exited: for an
    // epoll set that wakes a sleeper at the death.  Still owned by the watch.
    int pidfd() const noexcept { return pidfd_; }

    // True once the process has exited or was killed.  One poll() or kill(),
    // never blocking; call it at a low rate (every 100 ms or so) from progress.
    bool exited() const noexcept;

  private:
    void reset() noexcept;

    pid_t pid_ = 0;
    int pidfd_ = -1;
};

// The inode of this process's pid namespace, 0 when it cannot be read.  Two
// processes on one node may watch each other's pids only when theirs match.
std::uint64_t pid_namespace() noexcept;

// When process `pid` started, in clock ticks after boot (field 22 of
// /proc/<pid>/stat); 0 when it cannot be read (no such process, no /proc).
// With the pid it names one process for as long as the node is up.
std::uint64_t process_start_time(pid_t pid) noexcept;

// Whether the process that was `pid` and started at `start_time` (0: not
// known) is gone: no process has the pid (kill() answers ESRCH), or the one
// that has it now started at another time (the pid came round to a new
// process).  What a process left on the node (a file naming it) may be removed
// when this is true; it is false for a zombie not yet reaped.  Only within
// one pid namespace (pid_namespace()).
bool process_gone(pid_t pid, std::uint64_t start_time) noexcept;

// When a progress callback should look at its watched peers again: a look is
// due once `interval` has passed since the last, and the clock is read on
// every `every`-th call only (reading it can cost as much as an idle poll).
// Clock is steady_clock but for tests, which drive the time themselves.
template <typename Clock = std::chrono::steady_clock>
class BasicWatchPace {
  public:
    explicit BasicWatchPace(std::chrono::milliseconds interval = std::chrono::milliseconds(100),
                            std::uint32_t every = 16) noexcept
        : interval_(interval), every_(every == 0 ? 1 : every) {}

    bool due() noexcept {
        // A count down, not a modulo: this runs on every progress pass, and
        // a division by a runtime value costs more than the rest of it.
        if (--countdown_ != 0) return false;
        countdown_ = every_;
        const auto now = Clock::now();
        if (now - last_ < interval_) return false;
        last_ = now;
        return true;
    }
    // The next call looks (for a caller about to wait on a peer).
    void hurry() noexcept {
        countdown_ = 1;
        last_ = {};
    }

  private:
    typename Clock::duration interval_;
    std::uint32_t every_;
    std::uint32_t countdown_ = every_;
    typename Clock::time_point last_{};
};
using WatchPace = BasicWatchPace<>;

// A module's look at the peers it watches, when `pace` says one is due: each
// endpoint (a pointer, maybe null) not yet `given_up` whose `process` has
// exited is handed to `lose`, which gives it up.  Returns how many.  Indexed,
// so `lose` may progress the module; it must not shrink `endpoints`.
template <typename Endpoints, typename GivenUp, typename Lose>
int lose_exited(WatchPace& pace, const Endpoints& endpoints, GivenUp given_up, Lose lose) noexcept {
    if (!pace.due()) return 0;
    int lost = 0;
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
        const auto& ep = endpoints[i];
        if (ep == nullptr || given_up(*ep) || !ep->process.exited()) continue;
        lose(*ep);
        ++lost;
    }
    return lost;
}

}  // namespace transit::btl::util
