// Where a waiting process sleeps in the kernel: one epoll set per context
// holding every transport's wait descriptor (btl::WaitObject).  It is also
// what Context::event_fd() hands to a user's own event loop.
//
// A sleep is: arm every transport (each declares to its peers that it sleeps,
// then looks once more for work), and only if all of them answered `armed`,
// epoll_wait; then disarm them all.  A transport that finds work while arming
// makes the sleep end at once, before it began.
#pragma once

#include <chrono>
#include <span>
#include <vector>

#include "transit/btl/module.hpp"
#include "transit/status.hpp"

namespace transit::pml {

class SleepSet {
  public:
    SleepSet() = default;
    ~SleepSet();
    SleepSet(const SleepSet&) = delete;
    SleepSet& operator=(const SleepSet&) = delete;

    // Collects the modules' wait objects.  Usable (can_block) only when every
    // module offers one and the epoll set could be made; `why` says otherwise.
    void setup(std::span<btl::Module* const> modules) noexcept;
    // Disarms and lets the modules go (before they are destroyed).
    void release() noexcept;
    bool can_block() const noexcept { return epoll_ >= 0; }
    const char* why_not() const noexcept { return why_not_; }
    int fd() const noexcept { return epoll_; }

    // What one attempt to sleep ended with.
    enum class Woke {
        event,    // a descriptor turned readable (or the sleep ended early: work was there)
        timeout,  // slept `max` with nothing coming
        cannot,   // a transport could not promise a wake-up: poll instead
    };
    // Arms, sleeps up to `max`, disarms.
    Woke sleep(std::chrono::milliseconds max) noexcept;

    // The same in three steps, for a threaded context whose sleeper lets the
    // call lock go for the middle one (Engine::rest_threaded): arm_for_sleep
    // and end_sleep under the lock, wait_armed without it.  wait_armed is
    // true when the sleep ran out; end_sleep after every arm that answered
    // armed.
    btl::WaitObject::Armed arm_for_sleep() noexcept { return arm_all(); }
    bool wait_armed(std::chrono::milliseconds max) noexcept;
    void end_sleep() noexcept;
    // Wakes the sleeper from another thread of this process (an eventfd in
    // the set): a caller that queued work only a poll moves, or a request a
    // sleeping waiter waits for completed by another thread's call.
    void kick() const noexcept;

    // For a user's loop (Context::arm): arms and stays armed until disarm().
    // success: sleep on fd(); busy (not_available): progress first.
    Status arm() noexcept;
    bool armed() const noexcept { return armed_; }
    void disarm() noexcept;

  private:
    btl::WaitObject::Armed arm_all() noexcept;

    std::vector<btl::WaitObject*> waits_;
    int epoll_ = -1;
    int kick_ = -1;  // eventfd
    bool armed_ = false;
    const char* why_not_ = "not set up";
};

}  // namespace transit::pml
