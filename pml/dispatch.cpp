// Received messages: the btl's receive callbacks, one per message kind (each
// kind has its own btl tag), hand each message to the collaborator that
// handles it after checking it is as long as its kind's header.
#include "pml/engine.hpp"
#include "pml/header_parts.hpp"

#include <cstddef>
#include <cstring>

namespace transit::pml {

// The am table calls these with the engine as cbdata.
struct Dispatch {
    // Views the message as one contiguous block (copying only if the btl split it).
    static const std::byte* view(Engine* e, const btl::ReceiveDescriptor& d,
                                 std::size_t& len) noexcept {
        if (d.segment_count == 1) [[likely]] {
            len = d.segments[0].len;
            return static_cast<const std::byte*>(d.segments[0].addr);
        }
        return gather(e->scratch_, d, len);
    }
    [[gnu::noinline]] static const std::byte* gather(std::vector<std::byte>& scratch,
                                                     const btl::ReceiveDescriptor& d,
                                                     std::size_t& len) noexcept {
        len = btl::total_length(btl::segments_of(d));
        try {
            if (scratch.size() < len) scratch.resize(len);
        } catch (...) {
            len = 0;
            return nullptr;
        }
        btl::gather_segments(btl::segments_of(d), scratch.data());
        return scratch.data();
    }
    // Where a kind's header names its sender; -1: it names none (it refers
    // to a request instead).
    static constexpr int source_offset(wire::Kind k) noexcept {
        switch (k) {
            case wire::match:
            case wire::rndv:
            case wire::lost:
            case wire::am:
            case wire::osc_put:
            case wire::osc_get:
            case wire::osc_atomic:
            case wire::osc_ack:
            case wire::osc_get_reply:
            case wire::osc_atomic_reply:
            case wire::barrier:
            case wire::throttle:
            case wire::bye:
            case wire::bye_ack:
            case wire::ping:
            case wire::pong:
                return 0;
            case wire::am_done:
                return offsetof(wire::AmDoneHdr, src);
            default:
                return -1;
        }
    }
    // A peer outside the job names itself by its rank in its own job: our id
    // for it is the one its endpoint has (any_rank: a peer of the job).
    static Rank dynamic_source(const Engine* e, const btl::ReceiveDescriptor& d) noexcept {
        if (!d.endpoint || d.endpoint->peer() < e->c_.size) return any_rank;
        return d.endpoint->peer();
    }
    // The header is made to name the sender by our id.  The bytes are the
    // transport's receive buffer or our scratch copy, both ours to write for
    // the length of the callback.
    static void rename(const std::byte* b, int offset, Rank id) noexcept {
        if (offset >= 0) std::memcpy(const_cast<std::byte*>(b) + offset, &id, sizeof id);
    }
    static void name_source(Engine* e, const btl::ReceiveDescriptor& d, const std::byte* b,
                            int offset) noexcept {
        if (const Rank id = dynamic_source(e, d); id != any_rank) rename(b, offset, id);
    }
    // What a message goes through once some peer failed (Core::any_failed):
    // false when it is to be ignored.  A context that only meets peers
    // outside the job (a server, a client) names the sender inline instead
    // (every message of an RPC; a call here cost it ~30 instructions).
    [[gnu::noinline]] static bool screen(Engine* e, const btl::ReceiveDescriptor& d,
                                         const std::byte* b, int source_offset,
                                         bool to_written_off) noexcept {
        // A written-off peer's messages refer to requests already ended (a
        // bye_ack excepted: a peer whose bye we acked may ack ours).
        if (!to_written_off && e->c_.any_failed && d.endpoint &&
            e->c_.peers.written_off(d.endpoint->peer()))
            return false;
        if (e->c_.any_dynamic) name_source(e, d, b, source_offset);
        return true;
    }
    // The peer whose endpoint the message came over: what a message naming
    // one of our requests or counters by handle must be (any_rank when the
    // transport does not say, which names none of them).
    static Rank from(const btl::ReceiveDescriptor& d) noexcept {
        return d.endpoint ? d.endpoint->peer() : any_rank;
    }
    // Anything from a job rank tells the keep-alive it lives (PeerWatch):
    // one store, no clock.  The sender is its endpoint's peer, else the rank
    // its header names (not trusted to name a peer outside the job).
    static void heard(Engine* e, const btl::ReceiveDescriptor& d, const std::byte* b, std::size_t n,
                      int source_offset) noexcept {
        Rank r = any_rank;
        if (d.endpoint) [[likely]]
            r = d.endpoint->peer();
        else if (source_offset >= 0 && !e->c_.any_dynamic &&
                 n >= static_cast<std::size_t>(source_offset) + sizeof r)
            std::memcpy(&r, b + source_offset, sizeof r);
        if (r < e->c_.size) e->c_.peers.peer(r)->watch.heard = true;
    }
    template <wire::Kind K>
    static void recv([[maybe_unused]] btl::Module* module, const btl::ReceiveDescriptor& d,
                     void* cbdata) noexcept {
        auto* e = static_cast<Engine*>(cbdata);
        std::size_t n;
        const std::byte* b = view(e, d, n);
        if (!b) [[unlikely]] {
            e->c_.drops.received(K, d, "out of memory gathering its segments");
            return;
        }
        if (e->c_.watch_peers) heard(e, d, b, n, source_offset(K));
        if (n < wire::header_size(K)) [[unlikely]] {
            e->c_.drops.received(K, d, "shorter than its header");
            return;
        }
        if (e->c_.receive_checks) [[unlikely]] {
            // A faster rank's message, during our own set-up (the launcher's
            // fence runs the transports): kept until the peer table exists.
            if (!e->c_.peers.ready()) [[unlikely]]
                return e->hold_early(b, n, d.tag);
            if (e->c_.any_failed) [[unlikely]] {
                if (!screen(e, d, b, source_offset(K), K == wire::bye_ack)) return;
            } else if (const Rank id = dynamic_source(e, d); id != any_rank) {
                // A tagged message, the RPC's own, is matched under the id
                // without a store into the transport's buffer (on_match_from).
                if constexpr (K == wire::match)
                    return e->receiver_.on_match_from(id, b, n, d.tag);
                else
                    rename(b, source_offset(K), id);
            }
        }
        if constexpr (K == wire::match)
            e->receiver_.on_match(b, n, d.tag);
        else if constexpr (K == wire::rndv) {
            if (wire::header_of<wire::RndvHdr>({b, n}).kind == wire::kind_am)
                e->am_.on_rndv(b, n);  // an active message too large to go eagerly
            else
                e->receiver_.on_rndv(b, n);
        } else if constexpr (K == wire::ack)
            e->sender_.on_ack(b, n, from(d));
        else if constexpr (K == wire::frag)
            e->receiver_.on_frag(b, n, from(d));
        else if constexpr (K == wire::fin)
            e->sender_.on_fin(b, n, from(d));
        else if constexpr (K == wire::am)
            e->am_.on_am(b, n);
        else if constexpr (K == wire::am_done)
            e->am_.on_am_done(b, n, from(d));
        else if constexpr (K == wire::osc_put || K == wire::osc_get || K == wire::osc_atomic)
            e->osc_.on_request(K, b, n);
        else if constexpr (K == wire::osc_ack || K == wire::osc_get_reply ||
                           K == wire::osc_atomic_reply)
            e->osc_.on_reply(K, b, n, from(d));
        else if constexpr (K == wire::barrier)
            e->on_barrier(b, n, from(d));
        else if constexpr (K == wire::throttle)
            e->sender_.on_throttle(b, n);
        else if constexpr (K == wire::split)
            e->sender_.on_split(b, n, from(d));
        else if constexpr (K == wire::split_fin)
            e->receiver_.on_split_fin(b, n, from(d));
        else if constexpr (K == wire::frag_abort)
            e->receiver_.on_frag_abort(b, n, from(d));
        else if constexpr (K == wire::lost)
            e->receiver_.on_match(b, n, d.tag);  // in sequence, like the message it stands for
        else if constexpr (K == wire::bye) {
            // Only a peer outside the job leaves: its endpoint says who it is.
            if (dynamic_source(e, d) == any_rank) [[unlikely]]
                return e->c_.drops.received(K, d, "a bye from a rank of the job");
            e->receiver_.on_bye(b);
        } else if constexpr (K == wire::bye_ack)
            e->on_bye_ack(b, from(d));
        else if constexpr (K == wire::ping) {
            if (PathMeasure::for_measure(b)) [[unlikely]]
                e->measure_.serve(b, n, from(d), module);  // a path measurement's
            else
                e->keepalive_.on_ping(b, from(d), module);
        } else if constexpr (K == wire::pong)
            e->measure_.on_pong(b, from(d));  // a keep-alive's: being heard (above)
    }
    template <int... K>
    static void register_all(Engine* e, std::integer_sequence<int, K...>) {
        (reg(e, static_cast<wire::Kind>(K), &recv<static_cast<wire::Kind>(K)>), ...);
    }
    static void reg(Engine* e, wire::Kind k, btl::ReceiveFn fn) {
        Status s = btl::am_table().register_callback(wire::tag(k), fn, e);
        if (!ok(s))
            throw std::runtime_error(
                fmt::format("pml: cannot register btl tag {:#x}: {}", wire::tag(k), to_string(s)));
        e->registered_tags_.push_back(wire::tag(k));
    }
};

void register_receivers(Engine* e) {
    Dispatch::register_all(e, std::make_integer_sequence<int, wire::kind_count>{});
}

}  // namespace transit::pml
