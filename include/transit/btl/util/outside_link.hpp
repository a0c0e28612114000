// The state of a transport's link to one peer outside the job
// (rt::DynamicPeers), the same for every transport that carries such peers;
// only how a join, a welcome or a goodbye travels is the transport's own.
//
//   client:  none --join_sent--> joining --welcome--> open
//                                   |--refuse-------> refused
//                                   `--deadline-----> timed_out
//   server:  none --admitted---> open
//   both:    joining|open --goodbye_received--> departed
//            joining|open --lost--------------> lost (the peer died)
//            any ----------release------------> released (the record goes)
//
// A job peer's endpoint keeps `none` all its life.  The state changes only
// through OutsideLinks (outside_links.hpp), which counts the joins still
// waiting for an answer, so that a transport checks deadlines only while one
// waits.  A member of an endpoint: no allocation, no virtual call.
#pragma once

#include <chrono>
#include <cstdint>

namespace transit::btl::util {

class OutsideLink {
  public:
    using Clock = std::chrono::steady_clock;

    enum class State : std::uint8_t {
        none,       // not a peer outside the job, or no join sent yet
        joining,    // our join is sent; the server's answer is due by deadline()
        open,       // welcomed (client) or admitted (server)
        refused,    // the server refused our join
        timed_out,  // the server did not answer our join by its deadline
        departed,   // the peer said goodbye: its leaving is no failure
        lost,       // the peer died or its transport lost it
        released,   // the transport let the record go
    };

    State state() const noexcept { return state_; }
    bool joining() const noexcept { return state_ == State::joining; }
    bool open() const noexcept { return state_ == State::open; }
    bool refused() const noexcept { return state_ == State::refused; }
    bool timed_out() const noexcept { return state_ == State::timed_out; }
    bool departed() const noexcept { return state_ == State::departed; }
    bool lost() const noexcept { return state_ == State::lost; }
    bool released() const noexcept { return state_ == State::released; }
    // Joining or open: the peer still listens (it is owed a goodbye).
    bool live() const noexcept { return state_ == State::joining || state_ == State::open; }

    // When an unanswered join is given up (meaningful while joining()).
    Clock::time_point deadline() const noexcept { return deadline_; }
    bool overdue(Clock::time_point now) const noexcept { return joining() && now >= deadline_; }

  private:
    friend class OutsideLinks;

    Clock::time_point deadline_{};
    State state_ = State::none;
};

}  // namespace transit::btl::util
