// The keep-alive's view of one peer (KeepAlive, keepalive.hpp): whether the
// peer said anything lately, and whether a probe to it is out.  The decision
// is a plain function of this state, whether the peer has work outstanding
// with us, and the time, so a test drives it with times of its own.
//
// A peer is watched only while it has work outstanding with us (a receive
// posted for it, a send, rendezvous or one-sided operation to it, a barrier
// round waiting for it).  Anything received from it marks it heard (Dispatch:
// one store per message, no clock).  At each look, a watched peer that was
// heard starts a new quiet period; one quiet for `period` is probed once; one
// still unheard `timeout` after the probe is failed.  A busy link is heard at
// every look and never probed; a peer without outstanding work is never
// probed.
#pragma once

#include <chrono>

namespace transit::pml {

struct PeerWatch {
    using Clock = std::chrono::steady_clock;

    enum class Action { none, probe, fail };

    bool heard = false;     // something came from the peer since the last look
    bool watching = false;  // it had outstanding work at the last look
    bool probed = false;    // a probe is out since the last time it was heard
    Clock::time_point quiet_since{};
    Clock::time_point probe_deadline{};

    // One look at the peer.  `period` and `timeout` are both positive.
    Action step(bool has_work, Clock::time_point now, Clock::duration period,
                Clock::duration timeout) noexcept {
        if (!has_work) {
            heard = watching = probed = false;
            return Action::none;
        }
        if (heard || !watching) {
            // Its quiet time counts from now: work just begun (nothing is
            // owed yet) or a word from it just seen.
            heard = probed = false;
            watching = true;
            quiet_since = now;
            return Action::none;
        }
        if (!probed) {
            if (now - quiet_since < period) return Action::none;
            probed = true;
            probe_deadline = now + timeout;
            return Action::probe;
        }
        return now >= probe_deadline ? Action::fail : Action::none;
    }
};

}  // namespace transit::pml
