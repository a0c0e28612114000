// The keep-alive (keepalive.hpp): the look at the watched peers, the probes
// and their answers.
#include "pml/keepalive.hpp"

#include <algorithm>
#include <cstring>

#include "pml/failure.hpp"
#include "pml/headers.hpp"
#include "pml/outbox.hpp"
#include "pml/path_measure.hpp"

namespace transit::pml {

void KeepAlive::start(ProgressEngine& progress) {
    if (!c_.settings.keepalive() || c_.size < 2) return;
    has_work_.assign(c_.size, 0);
    // A quarter of the shorter time: a probe goes at most that late, and a
    // silent peer is failed at most that late after its timeout.
    interval_ = std::max(std::chrono::milliseconds(1),
                         std::min(c_.settings.keepalive_period, c_.settings.keepalive_timeout) / 4);
    progress_ = &progress;
    handle_ = progress.add(&KeepAlive::look_cb, this, ProgressPriority::low);
    c_.watch_peers = true;
}

void KeepAlive::stop() noexcept {
    if (handle_) progress_->remove(handle_);
    handle_ = {};
    watching_ = 0;
    c_.watch_peers = false;
}

int KeepAlive::look_cb(void* self) noexcept {
    auto* k = static_cast<KeepAlive*>(self);
    // A count down, not a clock read: this runs every 8th progress pass.
    if (--k->countdown_ != 0) [[likely]]
        return 0;
    k->countdown_ = clock_every;
    return k->look();
}

// Which job ranks have work outstanding with us.  The request pool is walked
// once per look (as the failure sweep does), not counted per operation: the
// hot paths stay as they are.
void KeepAlive::mark_work() noexcept {
    std::fill(has_work_.begin(), has_work_.end(), std::uint8_t{0});
    for (Rank r = 0; r < c_.size; ++r) {
        const Peer& p = *c_.peers.peer(r);
        if (!p.posted.empty() || p.osc_outstanding > 0 || p.descs_waiting > 0 || p.awaited ||
            p.owes_completions())
            has_work_[r] = 1;
    }
    for (std::size_t c = 0; c < c_.reqs.chunk_count(); ++c)
        for (const Req& r : c_.reqs.chunk_items(c)) {
            if (r.done() || r.peer == nullptr || r.peer->rank >= c_.size) continue;
            if (r.kind == Req::Kind::recv && !r.matched) continue;  // on the posted list
            has_work_[r.peer->rank] = 1;
        }
    if (c_.settings.keepalive_all) return;
    for (Rank r = 0; r < c_.size; ++r)
        if (has_work_[r] && reported_by_transport(*c_.peers.peer(r))) has_work_[r] = 0;
}

// A module that carries the peer's messages reports its death itself: no
// probes needed.  Only the eager list counts: a module kept for one-sided
// transfers alone (tcp beside ofi, for put and get) holds no connection while
// nothing is in flight, so it has nothing to report a death with.
bool KeepAlive::reported_by_transport(const Peer& p) noexcept {
    if (!p.ep) return false;
    for (const bml::BtlRef& b : p.ep->eager)
        if (b.module->attributes().flags & btl::flags::reports_peer_loss) return true;
    return false;
}

int KeepAlive::look() noexcept {
    const auto now = std::chrono::steady_clock::now();
    const auto gap = now - last_look_;
    if (gap < interval_) return 0;
    last_look_ = now;
    // The peers are timed by this process's own looking time: one that did
    // not run (descheduled on a loaded node, computing outside Transit) holds
    // none of that against its peers, whose answers may be waiting unread.
    looked_ += std::min<std::chrono::steady_clock::duration>(gap, 2 * interval_);
    const PeerWatch::Clock::time_point at{looked_};
    mark_work();
    const auto period = c_.settings.keepalive_period;
    const auto timeout = c_.settings.keepalive_timeout;
    int events = 0;
    watching_ = 0;
    for (Rank r = 0; r < c_.size; ++r) {
        Peer* p = c_.peers.peer(r);
        if (r == c_.rank || p->failed) continue;
        switch (p->watch.step(has_work_[r] != 0, at, period, timeout)) {
            case PeerWatch::Action::none:
                break;
            case PeerWatch::Action::probe: {
                const wire::KeepAliveHdr h{c_.rank, 0};
                // Queued when the transport has no room: the deadline runs
                // all the same (a path that takes nothing is no path).
                (void)outbox_.send_ctrl(p, wire::ping, &h, sizeof h);
                ++probes_sent_;
                c_.out.verbose(10,
                               "keep-alive: rank {} silent for {} ms with work outstanding: "
                               "probed",
                               r, period.count());
                break;
            }
            case PeerWatch::Action::fail:
                failure_.declare_failed(p,
                                        "it answered no keep-alive probe in time "
                                        "(pml_base_keepalive_timeout)");
                ++events;
                continue;
        }
        if (p->watch.watching) ++watching_;
    }
    return events;
}

void KeepAlive::on_ping(const std::byte* b, Rank from, btl::Module* arrived) noexcept {
    wire::KeepAliveHdr h;
    std::memcpy(&h, b, sizeof h);
    const Rank sender = Core::job_sender(from, h.src);
    if (!c_.other_job_rank(sender)) [[unlikely]]
        return c_.drops.refused(wire::ping, sender, "a probe from a peer outside the job");
    Peer* p = c_.peers.peer(sender);
    if (p->failed) return;
    // The token of a path measurement's probe comes back (path_measure.hpp),
    // but for a burst's frames before its last.
    if (h.pad & wire::probe_silent) return;
    const wire::KeepAliveHdr answer{c_.rank, h.pad};
    if (h.pad != 0 && PathMeasure::answer(*p, arrived, answer, outbox_)) return;
    (void)outbox_.send_ctrl(p, wire::pong, &answer, sizeof answer);
}

}  // namespace transit::pml
