// The log of what a transport refuses to a stranger or a peer (a join
// without the token, a connection of garbage, a put outside a registered
// region).  A stranger may try thousands of times: the first few refusals of
// each window are warnings with the reason, the rest are counted (and written
// at verbose level 1), and the count is said once its window is over.
//
//   btl::util::RefusalLog refusals_{"clients"};   // 5 a window of 10 s
//   refusals_.refused(out_, name(), why, "a client (pid {})", pid);
//   // warning: vader: refused a client (pid 42): without this context's access token
//   // warning: vader: 17 more clients refused (at most 5 logged every 10 s)
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "transit/log.hpp"
#include "transit/log_limiter.hpp"

namespace transit::btl::util {

class RefusalLog {
  public:
    using Clock = log::Limiter::Clock;

    // `what`: what is refused, plural, for the count ("clients",
    // "connections"); a string that outlives the log.
    explicit RefusalLog(std::string_view what, std::uint32_t first = 5,
                        Clock::duration interval = std::chrono::seconds(10)) noexcept
        : what_(what), first_(first), limiter_(first, interval) {}

    // Logs one refusal by `source` (the component or module) as
    // "<source>: refused <who>: <why>"; true when it was a warning, false
    // when only counted.  Never throws: a line that cannot be formatted is
    // lost, the refusal itself stands.
    template <typename... Args>
    bool refused(const log::Stream& out, std::string_view source, std::string_view why,
                 fmt::format_string<Args...> who, Args&&... args) noexcept {
        const auto now = Clock::now();
        report_unlogged(source, now);
        try {
            if (limiter_.admit(now)) {
                log::warn(
                    "{}: refused {}: {}{}", source, fmt::format(who, std::forward<Args>(args)...),
                    why,
                    limiter_.at_limit() ? " (further refusals in this window are counted)" : "");
                return true;
            }
            if (out.enabled(1))
                out.verbose(1, "{}: refused {}: {}", source,
                            fmt::format(who, std::forward<Args>(args)...), why);
        } catch (...) {
            // Out of memory formatting the line.
        }
        return false;
    }

    // Says how many refusals of windows over by `now` were only counted
    // (Clock::time_point::max(): the current window too, at the end).
    void report_unlogged(std::string_view source, Clock::time_point now) noexcept {
        const std::uint64_t n = limiter_.take_unreported(now);
        if (n == 0) return;
        try {
            log::warn("{}: {} more {} refused (at most {} logged every {:g} s)", source, n, what_,
                      first_, std::chrono::duration<double>(limiter_.interval()).count());
        } catch (...) {
            // As above.
        }
    }

    std::uint64_t total() const noexcept { return limiter_.total(); }

  private:
    std::string_view what_;
    std::uint32_t first_;
    log::Limiter limiter_;
};

}  // namespace transit::btl::util
