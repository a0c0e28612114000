#include "transit/btl/util/process_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string_view>
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

std::uint64_t process_start_time(pid_t pid) noexcept {
    if (pid <= 0) return 0;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[1024];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return 0;
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
    // the fields are counted from the last ')'.  Start time is field 22, the
    // 20th after it.
    const std::string_view text(buf, static_cast<std::size_t>(n));
    const std::size_t close = text.rfind(')');
    if (close == std::string_view::npos) return 0;
    std::size_t at = close + 1;
    for (int field = 2; field < 22; ++field) {
        at = text.find(' ', at);
        if (at == std::string_view::npos) return 0;
        ++at;
    }
    std::uint64_t ticks = 0;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at)
        ticks = ticks * 10 + static_cast<std::uint64_t>(text[at] - '0');
    return ticks;
}

bool process_gone(pid_t pid, std::uint64_t start_time) noexcept {
    if (pid <= 0) return false;
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    if (start_time == 0) return false;
    const std::uint64_t now = process_start_time(pid);
    return now != 0 && now != start_time;
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
