// What a sleeping vader module waits on (btl::WaitObject::wait_fd): its
// doorbell, the pidfds of the peers whose processes it watches and a timer
// that ends a light sleep (VaderSleep::arm), in one epoll set of its own.  The pml's sleep set
// holds this set's descriptor, so a local peer's death wakes a sleeper the moment the kernel marks
// the process exited, instead of at the sleep's end (pml_base_wait_block_interval): with nothing
// else to wake it, that is the only way a waiter learns of a local death at once.
//
// A pidfd stays readable once its process has exited, so each is added
// one-shot: it wakes the sleeper once and is then disabled in the set (the
// module looks at all its peers then, ProcessWatch::exited).  The kernel drops
// a pidfd from the set when the watch that owns it closes it.
#pragma once

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace transit::vader {

class WaitSet {
  public:
    WaitSet() = default;
    WaitSet(const WaitSet&) = delete;
    WaitSet& operator=(const WaitSet&) = delete;
    ~WaitSet() {
        if (timer_ >= 0) ::close(timer_);
        if (epoll_ >= 0) ::close(epoll_);
    }

    // The set with the doorbell in it; false (and fd() -1) when the system
    // refuses one: the doorbell is then waited on alone, and deaths are
    // found by the module's paced look only.  The timer is optional: without
    // it arm_timer() fails and every sleep takes the full barrier.
    bool open(int bell_fd) noexcept {
        epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epoll_ < 0) return false;
        if (!add(bell_fd, bell_tag)) {
            ::close(epoll_);
            epoll_ = -1;
            return false;
        }
        timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (timer_ >= 0 && !add(timer_, timer_tag)) {
            ::close(timer_);
            timer_ = -1;
        }
        return true;
    }
    int fd() const noexcept { return epoll_; }

    // Makes the set readable at most `usec` microseconds from now (one shot).
    // A timer that still has more than half of that to run is left running:
    // a server that sleeps between requests then sets it once a millisecond,
    // not once a request.  False when there is no timer.
    bool arm_timer(std::uint32_t usec) noexcept {
        if (timer_ < 0 || usec == 0) return false;
        const auto now = std::chrono::steady_clock::now();
        const auto span = std::chrono::microseconds(usec);
        if (timer_end_ - now > span / 2) return true;
        itimerspec t{};
        t.it_value.tv_sec = usec / 1000000;
        t.it_value.tv_nsec = static_cast<long>(usec % 1000000) * 1000;
        if (::timerfd_settime(timer_, 0, &t, nullptr) != 0) return false;
        timer_end_ = now + span;
        return true;
    }

    // Wakes a sleeper once when the process behind `pidfd` exits.  False
    // when it cannot (no set, no pidfd): that process must be asked itself.
    bool watch(int pidfd) noexcept {
        if (epoll_ < 0 || pidfd < 0) return false;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLONESHOT;
        ev.data.u64 = exit_tag;
        return ::epoll_ctl(epoll_, EPOLL_CTL_ADD, pidfd, &ev) == 0;
    }

    // What ended a sleep, or happened since the last look.
    struct Fired {
        bool exit = false;   // a watched process exited (its pidfd is now disabled)
        bool timer = false;  // the timer expired (the expiry is consumed)
    };
    // One epoll_wait that does not block; the doorbell's readiness is left to
    // the doorbell.
    Fired fired() noexcept {
        Fired f;
        if (epoll_ < 0) return f;
        epoll_event ev[8];
        const int n = ::epoll_wait(epoll_, ev, 8, 0);
        for (int i = 0; i < n; ++i) {
            if (ev[i].data.u64 == exit_tag) f.exit = true;
            if (ev[i].data.u64 == timer_tag) f.timer = true;
        }
        if (f.timer) {
            std::uint64_t expiries = 0;
            (void)!::read(timer_, &expiries, sizeof expiries);
        }
        return f;
    }
    bool exit_seen() noexcept { return fired().exit; }

  private:
    bool add(int fd, std::uint64_t tag) const noexcept {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = tag;
        return ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) == 0;
    }

    static constexpr std::uint64_t bell_tag = 0;
    static constexpr std::uint64_t exit_tag = 1;
    static constexpr std::uint64_t timer_tag = 2;
    int epoll_ = -1;
    int timer_ = -1;
    std::chrono::steady_clock::time_point timer_end_{};  // when the timer set last expires
};

}  // namespace transit::vader
