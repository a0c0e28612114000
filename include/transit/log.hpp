// Verbose output streams: one per framework or component, enabled by its
// <framework>_base_verbose parameter (0..100).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace transit::log {

enum class Severity { error, warning, info, verbose };

// One line as a sink receives it.  `verbosity` is the level a verbose line was
// written at (1..100); 0 for errors, warnings and informational lines.
struct Line {
    Severity severity;
    int verbosity;
    std::string_view source;  // "warning", "error", "pml", "btl:tcp", ...
    std::string_view text;    // without the identity prefix and the newline
};

// A library that embeds Transit takes its lines into its own log instead of
// stderr.  The sink may be called from any thread Transit runs; nullptr
// restores stderr.
using Sink = void (*)(const Line& line, void* arg);
void set_sink(Sink sink, void* arg) noexcept;

// Prints one line to stderr with the process's identity in front, or hands
// it to the sink.
void write(Severity severity, int verbosity, std::string_view prefix, std::string_view line);
inline void write(std::string_view prefix, std::string_view line) {
    write(Severity::info, 0, prefix, line);
}

// This thread's error lines, kept so that a call that fails can say why
// (transit::last_error): how many it wrote, and the text of the last one
// (cut at 1 KiB), whether printed or handed to a sink.  No allocation.
std::uint64_t errors_written() noexcept;
std::string_view last_error_line() noexcept;
// A mark to take when a call begins (a count of every thread's error lines,
// cheap to read), and whether this thread wrote an error line since it.
std::uint64_t error_mark() noexcept;
bool wrote_error_since(std::uint64_t mark) noexcept;
// Counts `text` as an error line of this thread without printing it: the
// reason of a failure whose line was printed once already.
void note_error(std::string_view text) noexcept;

class Stream {
  public:
    Stream() = default;
    Stream(std::string prefix, int verbosity) : prefix_(std::move(prefix)), level_(verbosity) {}

    bool enabled(int level) const noexcept { return level_ >= level; }
    int verbosity() const noexcept { return level_; }
    void set_verbosity(int v) noexcept { level_ = v; }

    template <typename... Args>
    void verbose(int level, fmt::format_string<Args...> f, Args&&... args) const {
        if (level_ >= level)
            write(Severity::verbose, level, prefix_, fmt::format(f, std::forward<Args>(args)...));
    }

  private:
    std::string prefix_;
    int level_ = 0;
};

// Always shown (errors and the few warnings a user must see).
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    write(Severity::warning, 0, "warning", fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
    write(Severity::error, 0, "error", fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace transit::log
