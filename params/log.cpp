// The line prefix names host, pid and rank, so the interleaved stderr of a
// many-process job still says who spoke.
#include "transit/log.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

namespace transit::log {

namespace {

std::string host_name() {
    char buf[HOST_NAME_MAX + 1] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return "?";
    return buf;
}

// Cached per process: the hostname never changes, a fork gets a new pid and
// a launcher sets PMIX_RANK before we start.
const std::string& identity() {
    static thread_local pid_t cached_pid = -1;
    static thread_local std::string cached;
    pid_t pid = getpid();
    if (pid != cached_pid) {
        static const std::string host = host_name();
        const char* rank = std::getenv("PMIX_RANK");
        cached = rank != nullptr && *rank != '\0'
                     ? fmt::format("[transit {}:{} r{}] ", host, pid, rank)
                     : fmt::format("[transit {}:{}] ", host, pid);
        cached_pid = pid;
    }
    return cached;
}

}  // namespace

void write(std::string_view prefix, std::string_view line) {
    while (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    std::string out = identity();
    out.append(prefix).append(": ").append(line).push_back('\n');
    // One write(2) per line keeps the lines of concurrent processes whole.
    std::string_view rest(out);
    while (!rest.empty()) {
        ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        rest.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace transit::log
