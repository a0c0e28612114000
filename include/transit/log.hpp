// Verbose output streams: one per framework or component, enabled by its
// <framework>_base_verbose parameter (0..100).
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace transit::log {

// Prints one line to stderr with the process's identity in front.
void write(std::string_view prefix, std::string_view line);

class Stream {
public:
    Stream() = default;
    Stream(std::string prefix, int verbosity) : prefix_(std::move(prefix)), level_(verbosity) {}

    bool enabled(int level) const noexcept { return level_ >= level; }
    int verbosity() const noexcept { return level_; }
    void set_verbosity(int v) noexcept { level_ = v; }

    template <typename... Args>
    void verbose(int level, fmt::format_string<Args...> f, Args&&... args) const {
        if (level_ >= level) write(prefix_, fmt::format(f, std::forward<Args>(args)...));
    }

private:
    std::string prefix_;
    int level_ = 0;
};

// Always shown (errors and the few warnings a user must see).
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    write("warning", fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
    write("error", fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace transit::log
