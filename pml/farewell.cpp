// Graceful disconnect: a peer outside the job is left only once it has what
// we sent it, or once the linger time (pml_base_disconnect_linger) says it
// will not confirm it.  A transport taking a message (success) only means it
// is on its way: a connection still in its handshake, a queue, a ring the
// peer has not read yet.  Closing the transport then lost it (a client's
// last message, over tcp and vader alike).
//
// The leaving side, for each peer at once:
//   1. waits until what it sent completes: its send requests (a rendezvous
//      needs the peer to take the data), one-sided operations, active
//      messages with counters;
//   2. sends a bye, numbered in its tagged sequence after every eager message;
//   3. waits for the peer's bye_ack; then closes its transports.
// When both sides leave at once, the byes cross: a side that heard the
// peer's bye has acked it, and that ack followed everything it had sent the
// peer (later sends end peer_departed), which the peer waits for before it
// closes.  So its farewell is done once its own sends are quiet, whether or
// not its bye went out or was acked.
// The other side hears the bye in its turn (Receiver::on_bye: every message
// before it has arrived), acks it, and takes the peer as departed (its
// pending operations with it end peer_departed).  It keeps the peer's
// transport endpoint until that transport reports the close, or until the
// linger time, so that the ack is not cut off by its own close.
#include <cstring>

#include "pml/engine.hpp"

namespace transit::pml {

// The peer has everything we sent it: it acked our bye, or our byes crossed
// and we acked its own after all we sent (see the top of this file).
bool Engine::farewell_done(const Peer& p) noexcept {
    return p.bye_acked || (p.bye_heard && p.departed && quiet(p));
}

// Nothing we sent p is still on its way, as far as a request can tell.
bool Engine::quiet(const Peer& p) noexcept {
    if (p.osc_outstanding != 0 || p.owes_completions()) return false;
    for (std::size_t c = 0; c < c_.reqs.chunk_count(); ++c)
        for (const Req& r : c_.reqs.chunk_items(c))
            if (r.peer == &p && r.kind == Req::Kind::send && !r.done()) return false;
    return true;
}

void Engine::farewell(std::span<Peer* const> peers) noexcept {
    const auto end = std::chrono::steady_clock::now() + c_.settings.disconnect_linger;
    for (Peer* p : peers) p->saying_bye = true;  // its record stays (named)
    wait_until(
        [&] {
            const bool late = std::chrono::steady_clock::now() >= end;
            bool done = true;
            for (Peer* p : peers) {
                if (late || farewell_done(*p) || p->gone_for_good()) continue;
                done = false;
                if (p->bye_sent || !quiet(*p)) continue;
                // After every tagged message, in the same sequence.
                p->bye_sent = true;
                Peer* sp = c_.peers.send_peer(p->rank);
                if (!sp) continue;  // left to the linger time: gone_for_good says why
                const wire::MatchHdr h{c_.rank, 0, sp->send_seq++};
                const Status s = outbox_.send_ctrl(sp, wire::bye, &h, sizeof h);
                if (!ok(s))
                    c_.out.verbose(1, "the bye to peer {} was refused: {}", p->rank, to_string(s));
            }
            return done;
        },
        end);  // a wait that sleeps wakes by the linger time too
    for (Peer* p : peers) {
        p->saying_bye = false;
        if (!farewell_done(*p) && !p->gone_for_good())
            c_.out.verbose(1, "peer {} did not confirm what was sent to it within {} ms", p->rank,
                           c_.settings.disconnect_linger.count());
    }
}

// The context's end: every live peer outside the job at once.
void Engine::say_goodbye_all() noexcept {
    if (c_.settings.disconnect_linger.count() == 0) return;
    std::vector<Peer*> leaving;
    try {
        // A peer we never sent to (no endpoint of ours) is owed nothing.
        c_.peers.for_each_dynamic([&](Peer& p) {
            if (!p.failed && !p.released && p.ep) leaving.push_back(&p);
        });
    } catch (...) {
        log::warn("pml: out of memory: peers outside the job are left without waiting");
        return;
    }
    if (leaving.empty()) return;
    farewell(leaving);
    for (Peer* p : leaving)
        if (!farewell_done(*p) && !p->gone_for_good())
            log::warn(
                "pml: peer {} did not confirm within {} ms (pml_base_disconnect_linger) that "
                "it has what was sent to it",
                p->rank, c_.settings.disconnect_linger.count());
}

void Engine::on_bye_ack(const std::byte* b, Rank from) noexcept {
    wire::ByeAckHdr h;
    std::memcpy(&h, b, sizeof h);
    Peer* p = c_.peers.peer(h.src);
    // Only the peer we said bye to, over its own endpoint.
    if (!p || p->rank != from || !p->bye_sent) return;
    p->bye_acked = true;
}

// From progress: byes heard are acked, and lingering peers whose time ran
// out are released.
int Engine::answer_farewells() noexcept {
    int events = 0;
    const auto now = std::chrono::steady_clock::now();
    auto& byes = c_.byes;
    for (std::size_t i = 0; i < byes.size();) {
        Peer* p = byes[i];
        if (p->bye_heard && !p->failed) {
            // Everything it sent before is here: the ack says so, then it is
            // departed (its pending operations end peer_departed).
            const wire::ByeAckHdr h{c_.rank, 0};
            if (Peer* sp = c_.peers.send_peer(p->rank))
                (void)outbox_.send_ctrl(sp, wire::bye_ack, &h, sizeof h);
            p->departed = true;
            p->linger_until = now + c_.settings.disconnect_linger;
            failure_.declare_failed(p, "disconnected");
            ++events;
        }
        if (p->linger_until && now < *p->linger_until) {
            ++i;
            continue;
        }
        if (p->linger_until) {
            p->linger_until.reset();
            failure_.recheck();  // release_gone_peers releases it
            ++events;
        }
        p->in_byes = false;
        byes[i] = byes.back();
        byes.pop_back();
    }
    c_.farewells = !byes.empty();
    return events;
}

}  // namespace transit::pml
