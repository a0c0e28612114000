// What a sleeping vader module waits on (btl::WaitObject::wait_fd): its
// doorbell and the pidfds of the peers whose processes it watches, in one
// epoll set of its own.  The pml's sleep set holds this set's descriptor, so a
// local peer's death wakes a sleeper the moment the kernel marks the process
// exited, instead of at the sleep's end (pml_base_wait_block_interval): with
// nothing else to wake it, that is the only way a waiter learns of a local
// death at once.
//
// A pidfd stays readable once its process has exited, so each is added
// one-shot: it wakes the sleeper once and is then disabled in the set (the
// module looks at all its peers then, ProcessWatch::exited).  The kernel drops
// a pidfd from the set when the watch that owns it closes it.
#pragma once

#include <sys/epoll.h>
#include <unistd.h>

#include <cstdint>

namespace transit::vader {

class WaitSet {
  public:
    WaitSet() = default;
    WaitSet(const WaitSet&) = delete;
    WaitSet& operator=(const WaitSet&) = delete;
    ~WaitSet() {
        if (epoll_ >= 0) ::close(epoll_);
    }

    // The set with the doorbell in it; false (and fd() -1) when the system
    // refuses one: the doorbell is then waited on alone, and deaths are
    // found by the module's paced look only.
    bool open(int bell_fd) noexcept {
        epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
        if (epoll_ < 0) return false;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = bell_tag;
        if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, bell_fd, &ev) == 0) return true;
        ::close(epoll_);
        epoll_ = -1;
        return false;
    }
    int fd() const noexcept { return epoll_; }

    // Wakes a sleeper once when the process behind `pidfd` exits.  False
    // when it cannot (no set, no pidfd): that process must be asked itself.
    bool watch(int pidfd) noexcept {
        if (epoll_ < 0 || pidfd < 0) return false;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLONESHOT;
        ev.data.u64 = exit_tag;
        return ::epoll_ctl(epoll_, EPOLL_CTL_ADD, pidfd, &ev) == 0;
    }

    // Whether a watched process exited since the last call (its pidfd is
    // disabled by this report).  One epoll_wait that does not block; the
    // doorbell's readiness is left to the doorbell.
    bool exit_seen() noexcept {
        if (epoll_ < 0) return false;
        epoll_event ev[8];
        const int n = ::epoll_wait(epoll_, ev, 8, 0);
        for (int i = 0; i < n; ++i)
            if (ev[i].data.u64 == exit_tag) return true;
        return false;
    }

  private:
    static constexpr std::uint64_t bell_tag = 0;
    static constexpr std::uint64_t exit_tag = 1;
    int epoll_ = -1;
};

}  // namespace transit::vader
