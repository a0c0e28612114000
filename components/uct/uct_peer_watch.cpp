// Peer loss for a uct module (see uct_peer_watch.hpp): UCT's error
// callback, local peers' exits and the report of each lost peer.
#include "uct_peer_watch.hpp"

#include "uct_module.hpp"

namespace transit::uct {

ucs_status_t UctPeerWatch::error_cb(void* arg, uct_ep_h ep, ucs_status_t status) noexcept {
    auto* w = static_cast<UctPeerWatch*>(arg);
    const auto lose = [&](UctEndpoint* e) {
        if (e && !e->deleted && (e->ep == ep || e->rdma_ep == ep) && !e->failed) {
            w->out_.verbose(1, "{}: {} {} lost: {}", w->module_.name(),
                            e->dynamic ? "peer" : "rank", e->peer(), ucs_status_string(status));
            e->failed = true;
            w->note_failure();
        }
    };
    for (auto& e : w->by_rank_) lose(e.get());
    for (auto& e : w->outside_.endpoints()) lose(e.get());
    w->outside_.lost_joining(ep);
    // Handled: the endpoint stays until del_procs or finalize destroys it.
    return UCS_OK;
}

void UctPeerWatch::handle_failures() noexcept {
    failures_ = false;
    // What a lost peer sent before it went is real, its goodbye among it:
    // take that first (a bounded drain: other peers may keep sending).
    if (!receiver_.in_callback())
        for (int i = 0; i < 64 && module_.uct().progress() != 0; ++i) {
        }
    if (receiver_.waiting()) receiver_.deliver();
    // Indexed: a report may delete an endpoint (marked only, freed later).
    const std::size_t job = by_rank_.size();
    const auto& dynamic = outside_.endpoints();
    for (std::size_t i = 0; i < job + dynamic.size(); ++i) {
        UctEndpoint* e = i < job ? by_rank_[i].get() : dynamic[i - job].get();
        if (!e || e->deleted || !e->failed || e->reported) continue;
        e->reported = true;
        send_queue_.drop(*e, Status::peer_failed);
        const Rank peer = e->peer();
        if (!e->dynamic && left_quietly(*e)) {
            out_.verbose(10, "{}: rank {} said goodbye and left", module_.name(), peer);
            continue;
        }
        ops_.end_ops(peer, Status::peer_failed);
        if (e->outside.departed())
            module_.report(btl::error_flags::nonfatal | btl::error_flags::departed, peer,
                           "uct: the peer outside the job disconnected");
        else if (e->refused_token)
            module_.report(btl::error_flags::nonfatal | btl::error_flags::refused, peer,
                           "uct: the server refused the token");
        else if (e->outside.refused())
            module_.report(btl::error_flags::nonfatal, peer,
                           "uct: the server refused the connection");
        else if (e->outside.joining() || e->outside.timed_out())
            module_.report(btl::error_flags::nonfatal, peer,
                           "uct: the server did not answer the join within btl_uct_join_timeout "
                           "(stopped, or not progressing)");
        else
            module_.report(btl::error_flags::nonfatal, peer, "uct: the peer was lost");
        outside_.lost(*e);
    }
}

// A peer that said goodbye and has no operation of ours pending has left,
// not failed: no error report (Open MPI's ob1 aborts the job on any, and the
// first rank of a job to exit is seen by the others while they finalize).
bool UctPeerWatch::left_quietly(const UctEndpoint& e) const noexcept {
    return e.goodbye && !ops_.involves(e.peer());
}

// A local peer whose process has exited is lost like one UCT reports (at
// most every 100 ms: one poll() or kill() per peer).
void UctPeerWatch::check_local_peers() noexcept {
    if (!check_pace_.due()) return;
    btl::util::WatchPace now{std::chrono::milliseconds(0), 1};
    const auto given_up = [](const UctEndpoint& e) { return e.failed || e.deleted; };
    const auto lose = [this](UctEndpoint& e) {
        out_.verbose(1, "{}: {} {} (pid {}) exited", module_.name(), e.dynamic ? "peer" : "rank",
                     e.peer(), e.process.pid());
        e.failed = true;
        note_failure();
    };
    btl::util::lose_exited(now, by_rank_, given_up, lose);
    btl::util::lose_exited(now, outside_.endpoints(), given_up, lose);
    outside_.check_joining_exits();
}

void UctPeerWatch::note_failure() noexcept {
    failures_ = true;
    module_.attend_soon();
}

}  // namespace transit::uct
