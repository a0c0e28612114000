// The context's epoll set of transport wait descriptors (sleep_set.hpp).
#include "pml/sleep_set.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace transit::pml {

SleepSet::~SleepSet() {
    release();
}

void SleepSet::release() noexcept {
    if (armed_) disarm();
    waits_.clear();
    if (epoll_ >= 0) ::close(epoll_);
    epoll_ = -1;
    if (kick_ >= 0) ::close(kick_);
    kick_ = -1;
    why_not_ = "released";
}

void SleepSet::setup(std::span<btl::Module* const> modules) noexcept {
    try {
        for (btl::Module* m : modules) {
            auto* w = btl::capability<btl::WaitObject>(*m);
            if (w == nullptr) {
                why_not_ = "a transport offers no wait object (it is polled)";
                waits_.clear();
                return;
            }
            waits_.push_back(w);
        }
    } catch (...) {
        why_not_ = "out of memory";
        waits_.clear();
        return;
    }
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        why_not_ = "no epoll set";
        waits_.clear();
        return;
    }
    for (btl::WaitObject* w : waits_) {
        const int fd = w->wait_fd();
        if (fd < 0) continue;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        // Several modules of one component share a descriptor (tcp's epoll set).
        if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST) {
            ::close(ep);
            why_not_ = "a transport's wait descriptor cannot be watched";
            waits_.clear();
            return;
        }
    }
    const int kick = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = kick;
    if (kick < 0 || ::epoll_ctl(ep, EPOLL_CTL_ADD, kick, &ev) != 0) {
        if (kick >= 0) ::close(kick);
        ::close(ep);
        why_not_ = "no eventfd to wake a sleeping thread";
        waits_.clear();
        return;
    }
    kick_ = kick;
    epoll_ = ep;
    why_not_ = nullptr;
}

void SleepSet::kick() const noexcept {
    const std::uint64_t one = 1;
    (void)!::write(kick_, &one, sizeof one);
}

btl::WaitObject::Armed SleepSet::arm_all() noexcept {
    using Armed = btl::WaitObject::Armed;
    for (std::size_t i = 0; i < waits_.size(); ++i) {
        const Armed a = waits_[i]->arm();
        if (a != Armed::armed) {
            for (std::size_t j = 0; j < i; ++j) waits_[j]->disarm();
            return a;
        }
    }
    return Armed::armed;
}

SleepSet::Woke SleepSet::sleep(std::chrono::milliseconds max) noexcept {
    using Armed = btl::WaitObject::Armed;
    const Armed a = arm_all();
    if (a == Armed::busy) return Woke::event;
    if (a == Armed::cannot) return Woke::cannot;
    const bool ran_out = wait_armed(max);
    end_sleep();
    return ran_out ? Woke::timeout : Woke::event;
}

bool SleepSet::wait_armed(std::chrono::milliseconds max) noexcept {
    epoll_event ev[4];
    // A signal (n < 0, EINTR) ends the sleep like an event: the caller polls.
    const int n = ::epoll_wait(epoll_, ev, 4, static_cast<int>(max.count()));
    for (int i = 0; i < n; ++i)
        if (ev[i].data.fd == kick_) {
            std::uint64_t count = 0;
            (void)!::read(kick_, &count, sizeof count);
        }
    return n == 0;
}

void SleepSet::end_sleep() noexcept {
    for (btl::WaitObject* w : waits_) w->disarm();
}

Status SleepSet::arm() noexcept {
    if (!can_block()) return Status::not_supported;
    if (armed_) return Status::success;
    const btl::WaitObject::Armed a = arm_all();
    if (a == btl::WaitObject::Armed::busy) return Status::not_available;
    if (a == btl::WaitObject::Armed::cannot) return Status::not_supported;
    armed_ = true;
    return Status::success;
}

void SleepSet::disarm() noexcept {
    armed_ = false;
    for (btl::WaitObject* w : waits_) w->disarm();
}

}  // namespace transit::pml
