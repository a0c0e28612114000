// Watching job peers on this node and saying goodbye to them (ofi).
#include "ofi_peer_watch.hpp"

#include <vector>

#include "ofi_completions.hpp"
#include "ofi_fabric.hpp"
#include "ofi_module.hpp"
#include "ofi_one_sided.hpp"
#include "ofi_outside.hpp"
#include "ofi_wire.hpp"

namespace transit::ofi {

// libfabric tells of a lost peer only through an operation that fails (tcp) or
// not at all (shm), so a peer on this node is watched like vader's: its
// process id comes through the modex.
void OfiPeerWatch::watch(OfiEndpoint& ep) noexcept {
    if (ep.peer() == runtime_.rank() || !runtime_.on_this_node(ep.peer())) return;
    std::vector<std::byte> blob;
    std::uint32_t pid = 0;
    try {
        if (runtime_.modex_recv(ep.peer(), OfiModule::pid_key, blob) != Status::success ||
            !read_pid(blob, pid))
            return;
    } catch (...) {
        return;
    }
    ep.process = btl::util::ProcessWatch(static_cast<pid_t>(pid));
}

int OfiPeerWatch::check_peers(std::vector<std::unique_ptr<OfiEndpoint>>& by_rank) noexcept {
    return btl::util::lose_exited(
        check_pace_, by_rank, [](const OfiEndpoint& ep) { return ep.failed; },
        [this](OfiEndpoint& ep) { lose_peer(ep); });
}

// What the peer sent before it went is real, its goodbye among it: that is
// taken first.  A peer that said goodbye, with nothing of ours in flight, has
// left; otherwise it is lost and the upper layer hears of it once.
void OfiPeerWatch::lose_peer(OfiEndpoint& ep) noexcept {
    for (int i = 0; i < 64 && completions_.poll() > 0; ++i) {
    }
    ep.failed = true;
    outside_.lost(ep);
    if (ep.goodbye && !in_flight_to(ep)) {
        out_.verbose(10, "{}: rank {} said goodbye and left", m_.name(), ep.peer());
        return;
    }
    out_.verbose(1, "{}: {} {} (pid {}) exited", m_.name(), ep.dynamic ? "peer" : "rank", ep.peer(),
                 ep.process.pid());
    m_.report(btl::error_flags::nonfatal, ep.peer(), "ofi: local peer process exited");
    abandon_operations(ep, Status::peer_failed);
}

bool OfiPeerWatch::in_flight_to(OfiEndpoint& ep) noexcept {
    for (FragPool* pool : {&f_.eager, &f_.large})
        for (const OfiFrag& f : pool->items())
            if (f.posted && !f.abandoned && f.endpoint == &ep) return true;
    return one_sided_.in_flight_to(ep) > 0;
}

// The lost (or departed, or deleted) peer's sends and one-sided operations end
// now, with `status`: shm never completes them.  Each stays out of its pool
// until the provider gives it back (if ever), so a late completion cannot hit
// a reused one.
void OfiPeerWatch::abandon_operations(OfiEndpoint& ep, Status status) noexcept {
    for (FragPool* pool : {&f_.eager, &f_.large}) {
        for (OfiFrag& f : pool->items()) {
            if (!f.posted || f.abandoned || f.endpoint != &ep) continue;
            f.abandoned = true;
            if (!f.internal && f.cbfunc != nullptr) f.cbfunc(&m_, &ep, &f, status);
        }
    }
    one_sided_.abandon(ep.peer(), status);
}

// One header-only message, sent and waited for (at most half a second: a
// peer that no longer listens must not hold up finalize).  Sent to the peers
// this module watches: watching is mutual (every rank publishes its id).
void OfiPeerWatch::say_goodbye(OfiEndpoint& ep) noexcept {
    // Only peers that watch us (on this node) take an exit for a failure; a
    // peer that said goodbye itself may be gone already.  (A goodbye to every
    // rank would make rxm connect to ranks never talked to, at finalize.)
    if (!ep.process.watching() || ep.failed || ep.goodbye || !f_.ep || ep.dynamic) return;
    if (m_.post_control(ep, WireKind::goodbye, true) == Status::success)
        owe_hello_[ep.peer()] = true;
}

// Tells a peer we said goodbye to that we added it again: it takes the
// goodbye back, so our exit from now on is a loss again.  Posted before
// anything else to it, so it arrives after the goodbye and before the rest.
void OfiPeerWatch::say_hello(OfiEndpoint& ep) noexcept {
    if (!owe_hello_[ep.peer()] || ep.failed || !f_.ep) return;
    if (m_.post_control(ep, WireKind::hello, false) == Status::success)
        owe_hello_[ep.peer()] = false;
    else
        out_.verbose(1, "{}: could not tell rank {} it was added again", m_.name(), ep.peer());
}

}  // namespace transit::ofi
