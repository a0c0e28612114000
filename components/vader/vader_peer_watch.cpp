#include "components/vader/vader_peer_watch.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

#include "components/vader/vader_module.hpp"

namespace transit::vader {

void VaderPeerWatch::start() {
    if (!handle_) handle_ = engine_.add(&check_cb, this, ProgressPriority::low);
}

void VaderPeerWatch::stop() {
    if (handle_) engine_.remove(handle_);
    handle_ = {};
}

int VaderPeerWatch::check_cb(void* self) noexcept {
    return static_cast<VaderPeerWatch*>(self)->check();
}

int VaderPeerWatch::check() noexcept {
    pass_.in_check = true;
    outside_.watch();
    pass_.in_check = false;
    // The wait set says in one system call whether a watched peer exited, so
    // it is asked often; the peers are asked one by one only when it said so,
    // or at the slower pace when some peer is not in it (no pidfd).
    bool look = std::exchange(pass_.exit_seen, false);
    if (!look && exit_pace_.due()) look = sleep_.peer_exited();
    if (!look && !all_in_wait_set_) look = check_pace_.due();
    if (!look) return 0;
    check_pace_.hurry();  // lose_exited's own pace: due now
    pass_.in_check = true;
    const int events = btl::util::lose_exited(
        check_pace_, watched_, [](const VaderEndpoint& ep) { return ep.dead; },
        [this](VaderEndpoint& ep) { peer_died(&ep); });
    pass_.in_check = false;
    if (events != 0) {
        try {
            rebuild();
        } catch (...) {
        }
    }
    return events;
}

void VaderPeerWatch::watch_exit(const VaderEndpoint& ep) noexcept {
    if (!sleep_.watch(ep.process.pidfd())) all_in_wait_set_ = false;
}

void VaderPeerWatch::rebuild() {
    watched_.clear();
    for (std::uint32_t i : active_)
        if (!endpoints_[i]->dead) watched_.push_back(endpoints_[i].get());
    outside_.add_watched(watched_);
}

void VaderPeerWatch::forget(VaderEndpoint* ep) noexcept {
    std::replace(watched_.begin(), watched_.end(), ep, static_cast<VaderEndpoint*>(nullptr));
}

void VaderPeerWatch::peer_died(VaderEndpoint* ep) noexcept {
    // Returns the peer pushed before it died are real: take them first.
    module_.progress();
    if (ep->dead || ep->outside.departed()) return;  // its goodbye was among them
    // A peer outside the job is reported either way: its records go then.
    if (ep->dynamic) {
        const bool finalized = ep->header().departed.load(std::memory_order_acquire) != 0;
        out_.verbose(1, "peer {} outside the job (pid {}) exited{}", ep->peer(), ep->pid,
                     finalized ? " after closing Transit" : "");
        return module_.peer_lost(ep,
                                 finalized
                                     ? "vader: the peer outside the job closed Transit and exited"
                                     : "vader: the peer outside the job exited",
                                 finalized ? btl::error_flags::departed : 0);
    }
    if (departed_quietly(ep)) return;
    out_.verbose(1, "local peer {} (pid {}) exited", ep->peer(), ep->pid);
    module_.peer_lost(ep, "vader: local peer process exited");
}

// A peer that finalized its module before exiting and holds none of our
// fragments has left, not failed: no error report (as tcp after a goodbye).
bool VaderPeerWatch::departed_quietly(VaderEndpoint* ep) noexcept {
    if (ep->header().departed.load(std::memory_order_acquire) == 0) return false;
    for (const Frag& f : frags_.items())
        if (f.in_flight && f.endpoint == ep) return false;
    ep->dead = true;
    out_.verbose(10, "local peer {} (pid {}) finalized and exited", ep->peer(), ep->pid);
    return true;
}

}  // namespace transit::vader
