// The lock a layer holds around each call into it when several threads may
// call at once (ThreadLevel::multiple, MPI_THREAD_MULTIPLE), and skips
// otherwise: switched off, hold() takes nothing, so a single-threaded program
// pays one predictable branch and no atomic operation.  Recursive: callbacks
// run under it (completions, active-message handlers) may call in again.
#pragma once

#include <mutex>

namespace transit {

class CallLock {
  public:
    // Set before a second thread may call (at init).
    void enable(bool on) noexcept { on_ = on; }
    bool enabled() const noexcept { return on_; }

    [[nodiscard]] std::unique_lock<std::recursive_mutex> hold() noexcept {
        if (!on_) [[likely]]
            return {};
        return std::unique_lock<std::recursive_mutex>(mutex_);
    }
    // For a holder that lets go while it waits, and a poller that holds it.
    std::recursive_mutex& mutex() noexcept { return mutex_; }

  private:
    bool on_ = false;
    std::recursive_mutex mutex_;
};

}  // namespace transit
