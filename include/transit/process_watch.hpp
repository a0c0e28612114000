// Whether another process on this node has exited.  A transport that shares
// memory with a peer gets no error when the peer dies: without a watch it would
// wait for the peer's answers forever.
#pragma once

#include <sys/types.h>

namespace transit {

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

    // True once the process has exited or was killed.  One poll() or kill(),
    // never blocking; call it at a low rate (every 100 ms or so) from progress.
    bool exited() const noexcept;

  private:
    void reset() noexcept;

    pid_t pid_ = 0;
    int pidfd_ = -1;
};

}  // namespace transit
