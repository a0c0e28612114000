// A module's links to its peers outside the job: every change of an
// OutsideLink goes through here, so the count of joins waiting for an answer
// is always right, and a transport sweeps for overdue joins only while one
// waits.  The transport keeps its endpoints where it likes; each carries an
// OutsideLink member named `outside`.
//
//   // client: the join is on the wire
//   links_.join_sent(ep.outside, config_.join_timeout);
//   // the server's answer came
//   links_.welcome(ep.outside);  or  links_.refuse(ep.outside);
//   // from a periodic check
//   Endpoint* late[16];
//   const std::size_t n = links_.expire_joins(dynamic_, live_endpoint, now, late);
//   // each late[i] is timed_out now: the transport fails its operations
//   // goodbye, death, delete
//   links_.goodbye_received(ep.outside); links_.lost(ep.outside); links_.release(ep.outside);
//
// Each change returns whether it happened, so a second goodbye or a welcome
// after the deadline is told apart from the first.  No allocation, no
// exceptions, no virtual call: the calls may sit on a progress path.
#pragma once

#include <chrono>
#include <cstddef>

#include "transit/btl/join_timeout.hpp"
#include "transit/btl/util/outside_link.hpp"

namespace transit::btl::util {

class OutsideLinks {
  public:
    using Clock = OutsideLink::Clock;
    using State = OutsideLink::State;

    // Joins sent that no answer, deadline, death or release has settled.
    std::size_t joining() const noexcept { return joining_; }

    // Client: our join is on the wire; the server has until `deadline` to
    // answer.  False (nothing changes) unless the link is new.
    bool join_sent(OutsideLink& link, Clock::time_point deadline) noexcept {
        if (link.state_ != State::none) return false;
        link.state_ = State::joining;
        link.deadline_ = deadline;
        ++joining_;
        return true;
    }
    // The same with the deadline `timeout_seconds` (btl_<component>_join_timeout) from now.
    bool join_sent(OutsideLink& link, double timeout_seconds) noexcept {
        return join_sent(link, join_deadline(timeout_seconds));
    }

    // Server: a client's join is accepted; the link is open at once.
    bool admitted(OutsideLink& link) noexcept { return move(link, State::none, State::open); }

    // Client: the server's answer to our join.
    bool welcome(OutsideLink& link) noexcept { return move(link, State::joining, State::open); }
    bool refuse(OutsideLink& link) noexcept { return move(link, State::joining, State::refused); }

    // The peer said goodbye / died.  False when the link had ended already
    // (a goodbye after a death, a second goodbye).
    bool goodbye_received(OutsideLink& link) noexcept { return end(link, State::departed); }
    bool lost(OutsideLink& link) noexcept { return end(link, State::lost); }

    // The transport lets the record go (the peer is deleted).  True when the
    // link was live: the peer still listens and is owed a goodbye.
    bool release(OutsideLink& link) noexcept {
        const bool live = link.live();
        settle(link);
        link.state_ = State::released;
        return live;
    }

    // Marks timed_out the overdue joins among `endpoints` and puts up to N of
    // them into `late` (the rest are found by the next sweep); returns how
    // many.  endpoint_of(element) gives an element's endpoint, or nullptr for
    // one the transport has given up otherwise (failed, deleted).
    template <class Range, class EndpointOf, class Endpoint, std::size_t N>
    std::size_t expire_joins(Range& endpoints, EndpointOf endpoint_of, Clock::time_point now,
                             Endpoint* (&late)[N]) noexcept {
        std::size_t n = 0;
        if (joining_ == 0) return 0;
        for (auto& element : endpoints) {
            if (n == N) break;
            Endpoint* ep = endpoint_of(element);
            if (ep == nullptr || !ep->outside.overdue(now)) continue;
            settle(ep->outside);
            ep->outside.state_ = State::timed_out;
            late[n++] = ep;
        }
        return n;
    }

  private:
    bool move(OutsideLink& link, State from, State to) noexcept {
        if (link.state_ != from) return false;
        settle(link);
        link.state_ = to;
        return true;
    }
    bool end(OutsideLink& link, State to) noexcept {
        if (!link.live()) return false;
        settle(link);
        link.state_ = to;
        return true;
    }
    // A join leaves the count whatever settles it.
    void settle(const OutsideLink& link) noexcept {
        if (link.state_ == State::joining) --joining_;
    }

    std::size_t joining_ = 0;
};

}  // namespace transit::btl::util
