// How a waiting caller passes the polls that found nothing to do: it spins a
// short while (a reply from a peer running on another core comes within
// microseconds), then naps between polls.
//
// Napping, not sched_yield, is what keeps two ranks moving on a busy node.  A
// transport whose queue to a peer holds a few fragments (an OS datagram queue,
// an MTU-sized ring) moves one queue's worth each time the receiver runs; a
// rank that spins or yields is a CPU hog to the scheduler and runs only on its
// turn among the other hogs (milliseconds apart), so each queue's worth cost a
// scheduler turn.  A rank that sleeps keeps its claim to the processor and is
// run again within microseconds of its nap's end: the two ranks alternate at
// the nap's pace instead.
//
// Under the block policy the engine sleeps in the kernel instead of napping
// when it can (Engine::rest, SleepSet); IdleWait still times the spin.
#pragma once

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "pml/settings.hpp"

namespace transit::pml {

class IdleWait {
  public:
    // The clock is read once every 64 idle polls: a poll of shared memory
    // costs less than reading it.
    static constexpr std::uint64_t clock_stride = 64;

    explicit IdleWait(const Settings& s) noexcept : s_(s) {}

    // A poll did something: spin again from the start.
    void reset() noexcept {
        idle_ = 0;
        napping_ = false;
    }

    // A poll found nothing to do: true once the spin is over (then pause()).
    // The spin's time is counted from the clock_stride-th idle poll on, so an
    // idle spell shorter than that reads no clock: a rank streaming small
    // messages finds nothing between two of them on nearly every pass, and a
    // clock read there cost the receiver of an 8-byte stream over uct 3.7 %
    // of its samples.
    bool napping() noexcept {
        if (napping_) return true;
        const std::uint64_t n = ++idle_;
        if (n > s_.wait_spin_count) return napping_ = true;
        if (n % clock_stride != 0) return false;
        const clock::time_point now = clock::now();
        if (n == clock_stride) {
            since_ = now;
            return napping_ = s_.wait_spin_time.count() == 0;
        }
        return napping_ = now - since_ >= s_.wait_spin_time;
    }
    // Gives the processor up for a moment (not under the spin policy).
    void pause() const noexcept {
        if (s_.wait_policy == WaitPolicy::spin) return;
        if (s_.wait_nap.count() > 0)
            std::this_thread::sleep_for(s_.wait_nap);
        else
            sched_yield();
    }
    // A poll found nothing to do.
    void idle() noexcept {
        if (napping()) pause();
    }

  private:
    using clock = std::chrono::steady_clock;

    const Settings& s_;
    std::uint64_t idle_ = 0;  // idle polls since the last that did something
    bool napping_ = false;
    clock::time_point since_{};
};

}  // namespace transit::pml
