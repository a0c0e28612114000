// The line prefix names host, pid and rank, so the interleaved stderr of a
// many-process job still says who spoke.
#include "transit/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
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

struct SinkSlot {
    std::mutex lock;
    Sink sink = nullptr;
    void* arg = nullptr;
};

// Constant-initialised and trivially destroyed, so it works before main and
// during exit like identity()'s arrays.
constinit SinkSlot the_sink_slot;

SinkSlot& sink_slot() {
    return the_sink_slot;
}

// A sink that itself logs through Transit gets its line on stderr instead of
// deadlocking on the slot's lock.
thread_local bool inside_sink = false;

// Hands the line to the sink if one is set.  The lock is held while the sink
// runs, so once set_sink(nullptr) returns the old sink is no longer called.
bool to_sink(const Line& line) {
    if (inside_sink) return false;
    SinkSlot& slot = sink_slot();
    std::lock_guard guard(slot.lock);
    if (slot.sink == nullptr) return false;
    struct Inside {
        Inside() noexcept { inside_sink = true; }
        ~Inside() { inside_sink = false; }
    } inside;
    slot.sink(line, slot.arg);
    return true;
}

// The last error line of this thread (errors_written, last_error_line).
// Plain arrays: no allocation, and no destructor to outlive at exit.
constexpr std::size_t error_line_capacity = 1024;
thread_local std::uint64_t error_count = 0;
thread_local char error_text[error_line_capacity];
thread_local std::size_t error_length = 0;
// Every thread's error lines, numbered, and the number of this thread's
// last: a call's mark is a plain load of a global, where a thread-local
// read from a shared library goes through __tls_get_addr on every call.
std::atomic<std::uint64_t> error_sequence{0};
thread_local std::uint64_t last_error_sequence = 0;

}  // namespace

std::uint64_t errors_written() noexcept {
    return error_count;
}

std::uint64_t error_mark() noexcept {
    return error_sequence.load(std::memory_order_relaxed);
}

bool wrote_error_since(std::uint64_t mark) noexcept {
    // A line this thread wrote before taking `mark` has a number <= mark: the
    // thread's own increment precedes its later load of the same variable.
    return last_error_sequence > mark;
}

std::string_view last_error_line() noexcept {
    return {error_text, error_length};
}

void note_error(std::string_view text) noexcept {
    error_length = std::min(text.size(), error_line_capacity);
    std::copy_n(text.data(), error_length, error_text);
    ++error_count;
    last_error_sequence = error_sequence.fetch_add(1, std::memory_order_relaxed) + 1;
}

void set_sink(Sink sink, void* arg) noexcept {
    SinkSlot& slot = sink_slot();
    std::lock_guard guard(slot.lock);
    slot.sink = sink;
    slot.arg = arg;
}

void write(Severity severity, int verbosity, std::string_view prefix, std::string_view line) {
    while (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (severity == Severity::error) note_error(line);
    if (to_sink(Line{severity, verbosity, prefix, line})) return;
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
