// The lock a layer holds around each call into it when several threads may
// call at once (ThreadLevel::multiple, MPI_THREAD_MULTIPLE), and skips
// otherwise: switched off, hold() takes nothing, so a single-threaded program
// pays one predictable branch and no atomic operation.  Recursive: callbacks
// run under it (completions, active-message handlers) may call in again.
#pragma once

#include <atomic>
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
        acquire();
        return std::unique_lock<std::recursive_mutex>(mutex_, std::adopt_lock);
    }

    // Takes the mutex, counted among the threads that want it while it waits,
    // so that a holder polling in a loop knows when to let go (wanted()).
    void acquire() noexcept {
        if (mutex_.try_lock()) return;
        waiting_.fetch_add(1, std::memory_order_relaxed);
        mutex_.lock();
        waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    bool try_acquire() noexcept { return mutex_.try_lock(); }
    void release() noexcept { mutex_.unlock(); }
    bool wanted() const noexcept { return waiting_.load(std::memory_order_relaxed) != 0; }

    // For a holder that lets go while it waits: hands the mutex to a thread
    // blocked on it.  Unlocking alone would not: the holder's next try_lock
    // wins long before the woken thread runs.  Bounded, so a thread that
    // stopped wanting it (or a holder holding recursively) costs a few us.
    void hand_over() noexcept {
        const int before = waiting_.load(std::memory_order_relaxed);
        mutex_.unlock();
        for (int spin = 0;
             spin < handover_spins && waiting_.load(std::memory_order_relaxed) >= before; ++spin)
            pause();
        acquire();
    }

  private:
    static constexpr int handover_spins = 4096;
    static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }

    bool on_ = false;
    std::atomic<int> waiting_{0};
    std::recursive_mutex mutex_;
};

}  // namespace transit
