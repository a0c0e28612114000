// A limit on how often one kind of event is logged, so that a peer or a
// stranger repeating a fault cannot flood stderr: in each window of `interval`
// the first `first` events are logged in full and the others only counted; the
// count is handed back once the window is over.  With no interval the window
// never ends and the owner reports unlogged() when it is done.
#pragma once

#include <chrono>
#include <cstdint>

namespace transit::log {

class Limiter {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr Clock::duration forever = Clock::duration::max();

    // The first ten, for as long as the limiter lives.
    constexpr Limiter() noexcept = default;
    constexpr explicit Limiter(std::uint32_t first, Clock::duration interval = forever) noexcept
        : first_(first), interval_(interval) {}

    // Counts one event; true when it is to be logged in full.  An event after
    // the window is over starts a new one (take_unreported() then returns the
    // old window's count).
    bool admit(Clock::time_point now = {}) noexcept {
        roll_over(now);
        ++total_;
        if (in_window_++ == 0) window_start_ = now;
        if (in_window_ <= first_) return true;
        ++unlogged_;
        ++unreported_;
        return false;
    }

    // True when the event just admitted is the last one of its window logged
    // in full, so the line can say that what follows is only counted.
    bool at_limit() const noexcept { return in_window_ == first_; }

    // The events that were not logged in windows now over, counted once.
    // Clock::time_point::max() ends the current window whatever its age.
    std::uint64_t take_unreported(Clock::time_point now) noexcept {
        roll_over(now);
        const std::uint64_t n = ended_unreported_;
        ended_unreported_ = 0;
        return n;
    }

    std::uint64_t total() const noexcept { return total_; }
    std::uint64_t unlogged() const noexcept { return unlogged_; }
    Clock::duration interval() const noexcept { return interval_; }

  private:
    void roll_over(Clock::time_point now) noexcept {
        if (in_window_ == 0) return;
        const bool forced = now == Clock::time_point::max();
        if (!forced && (interval_ == forever || now - window_start_ < interval_)) return;
        ended_unreported_ += unreported_;
        unreported_ = 0;
        in_window_ = 0;
    }

    std::uint32_t first_ = 10;
    Clock::duration interval_ = forever;
    Clock::time_point window_start_{};
    std::uint64_t in_window_ = 0;
    std::uint64_t total_ = 0;
    std::uint64_t unlogged_ = 0;          // over the limiter's life
    std::uint64_t unreported_ = 0;        // in the current window
    std::uint64_t ended_unreported_ = 0;  // in windows over, not yet taken
};

}  // namespace transit::log
