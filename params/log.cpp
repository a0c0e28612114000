// The line prefix names host, pid and rank, so the interleaved stderr of a
// many-process job still says who spoke.
#include "transit/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

namespace transit::log {

namespace {

// Cached per process: the hostname never changes, a fork gets a new pid and
// a launcher sets PMIX_RANK before we start.  Kept in plain arrays, which have
// no destructor: a component closed from a static object's destructor at exit
// still logs after the thread's and the program's strings are gone.
std::string_view identity() {
    static thread_local pid_t cached_pid = -1;
    static thread_local char cached[HOST_NAME_MAX + 64];
    static thread_local std::size_t cached_len = 0;
    pid_t pid = getpid();
    if (pid != cached_pid) {
        char host[HOST_NAME_MAX + 1] = {};
        if (gethostname(host, sizeof host - 1) != 0) host[0] = '?';
        const char* rank = std::getenv("PMIX_RANK");
        const auto r = rank != nullptr && *rank != '\0'
                           ? fmt::format_to_n(cached, sizeof cached, "[transit {}:{} r{}] ",
                                              std::string_view(host), pid, rank)
                           : fmt::format_to_n(cached, sizeof cached, "[transit {}:{}] ",
                                              std::string_view(host), pid);
        cached_len = std::min(r.size, sizeof cached);
        cached_pid = pid;
    }
    return {cached, cached_len};
}

}  // namespace

void write(std::string_view prefix, std::string_view line) {
    while (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    std::string out(identity());
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
