#include "transit/btl/util/process_watch.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <utility>

namespace transit::btl::util {

namespace {

// glibc 2.36 has pidfd_open(); older ones only the system call number, and a
// kernel without it answers ENOSYS: -1 either way means "use the fallback".
int open_pidfd(pid_t pid) noexcept {
#ifdef SYS_pidfd_open
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
    (void)pid;
    return -1;
#endif
}

}  // namespace

std::uint64_t pid_namespace() noexcept {
    struct stat st {};
    if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
    return static_cast<std::uint64_t>(st.st_ino);
}

ProcessWatch::ProcessWatch(pid_t pid, Probe probe) noexcept
    : pid_(pid), pidfd_(pid > 0 && probe == Probe::pidfd_or_signal ? open_pidfd(pid) : -1) {}

ProcessWatch::~ProcessWatch() {
    reset();
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)), pidfd_(std::exchange(other.pidfd_, -1)) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
    if (this != &other) {
        reset();
        pid_ = std::exchange(other.pid_, 0);
        pidfd_ = std::exchange(other.pidfd_, -1);
    }
    return *this;
}

void ProcessWatch::reset() noexcept {
    if (pidfd_ >= 0) ::close(pidfd_);
    pidfd_ = -1;
    pid_ = 0;
}

bool ProcessWatch::exited() const noexcept {
    if (pid_ <= 0) return false;
    if (pidfd_ >= 0) {
        // Only POLLIN means "exited"; POLLNVAL or an error is no evidence.
        pollfd p{pidfd_, POLLIN, 0};
        return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
    }
    // EPERM: it exists but is not ours to signal, so it is alive.
    return ::kill(pid_, 0) != 0 && errno == ESRCH;
}

}  // namespace transit::btl::util
