// The pml's wire headers.  Each message kind travels on its own btl tag from the
// pml range, so the receive side dispatches by tag with no type switch.  Fields
// are fixed-size; all ranks of a job share one byte order (one node or one
// homogeneous cluster).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "transit/btl/am_table.hpp"

namespace transit::pml::wire {

enum Kind : int {
    match,    // eager tagged message: MatchHdr + data
    rndv,     // rendezvous: RndvHdr + handle + user header
    ack,      // receiver -> sender: send the data as fragments
    frag,     // sender -> receiver: FragHdr + data at an offset
    fin,      // receiver -> sender: the rdma get is done
    am,       // eager active message: AmHdr + user header + data
    am_done,  // target -> origin: completion handler ran (or the message was lost)
    osc_put,  // emulated put: OscHdr + data
    osc_ack,  // emulated put applied
    osc_get,  // emulated get request
    osc_get_reply,
    osc_atomic,
    osc_atomic_reply,
    barrier,
    throttle,    // receiver -> sender: unexpected budget exceeded (on) / recovered (off)
    split,       // receiver -> sender: put the tail of a rendezvous while I get the head
    split_fin,   // sender -> receiver: the tail is in place (or failed)
    frag_abort,  // sender -> receiver: the fragments stopped; only `delivered` bytes come
    lost,        // sender -> receiver: stands in for an eager message that never left
    bye,         // a leaving peer: in its tagged sequence, after all it sent (MatchHdr)
    bye_ack,     // -> the leaving peer: everything before its bye arrived
    ping,        // keep-alive probe: are you there? (KeepAliveHdr)
    pong,        // the answer to a ping (KeepAliveHdr)
    kind_count
};

constexpr btl::Tag tag(Kind k) noexcept {
    return btl::AmTable::tag(btl::TagRange::pml, static_cast<int>(k));
}
static_assert(kind_count <= btl::AmTable::range_size);

// 12 bytes, no padding: with a transport's 4-byte record header an 8-byte
// message fills 24 bytes of a shared-memory ring, not 32.
struct MatchHdr {
    std::uint32_t src;
    std::uint32_t tag;
    std::uint32_t seq;
};
static_assert(sizeof(MatchHdr) == 12);

// An eager tagged message refused for good by the btl: the stand-in takes its
// place in the peer's sequence, so the messages behind it are not held for
// good, and completes the receive it matches with `status`.
struct LostHdr {
    MatchHdr m;
    std::int32_t status;
    std::uint64_t total;  // the lost message's length
};
static_assert(sizeof(LostHdr) == 24);

inline constexpr std::uint8_t kind_tagged = 0;
inline constexpr std::uint8_t kind_am = 1;

struct RndvHdr {
    MatchHdr m;                    // for AMs: tag = handler id, seq unused
    std::uint32_t rdma_component;  // hash of the component that registered addr
    std::uint64_t total;           // message length
    std::uint64_t sreq;            // the sender's request
    std::uint64_t addr;            // the sender's buffer, for an rdma get (0: none)
    std::uint64_t am_target_counter;
    std::uint64_t am_completion_token;
    std::uint16_t handle_len;  // registration handle bytes following
    std::uint8_t kind;         // kind_tagged or kind_am
    std::uint8_t pad;
    std::uint32_t am_header_len;  // user header bytes following the handle
};
static_assert(sizeof(RndvHdr) == 64);  // no holes: every byte sent is set
// A kept copy of a match or rendezvous message is renamed by writing our id
// for its sender over its first bytes (Receiver::store_unexpected, match).
static_assert(offsetof(MatchHdr, src) == 0 && offsetof(RndvHdr, m) == 0);

struct AckHdr {
    std::uint64_t sreq;
    std::uint64_t rreq;
};

struct FragHdr {
    std::uint64_t rreq;
    std::uint64_t offset;
};

// Followed by handle_len bytes: the receive buffer's registration handle.
struct SplitHdr {
    std::uint64_t sreq;
    std::uint64_t rreq;
    std::uint64_t offset;  // the sender puts [offset, offset + len) of the message
    std::uint64_t len;
    std::uint64_t addr;  // the receive buffer (offset 0)
    std::uint16_t handle_len;
    std::uint16_t pad;
    std::uint32_t pad2;
};

struct SplitFinHdr {
    std::uint64_t rreq;
    std::int32_t status;  // the sender's puts: Status::success or why they failed
    std::uint32_t pad;
};

// A streamed send that failed with its receiver alive (a fragment refused for
// good): the fragments that did go still arrive, perhaps after this message
// over another module, so the receiver completes once it has `delivered` bytes.
struct FragAbortHdr {
    std::uint64_t rreq;
    std::uint64_t delivered;
    std::int32_t status;  // why the sender stopped
    std::uint32_t pad;
};

struct FinHdr {
    std::uint64_t sreq;
};

struct AmHdr {
    std::uint32_t src;
    std::uint32_t handler;
    std::uint32_t header_len;
    std::uint32_t pad;
    std::uint64_t target_counter;
    std::uint64_t completion_token;
};

struct AmDoneHdr {
    std::uint64_t token;  // the origin's completion counter
    std::uint32_t src;
    std::uint32_t lost;  // 1: the message never completed at the target
};

// An emulated put, get or atomic names the target's region as its key does
// (slot and random secret, from the packed key) and the address the key's
// base gave the origin: the target takes it only inside that region, as a
// transport's target does with a registration key.
struct OscHdr {
    std::uint32_t src;
    std::uint8_t op;     // AtomicOp, or 0xff for compare-and-swap
    std::uint8_t width;  // 4 or 8
    std::uint16_t pad;
    std::uint32_t region;  // the region's slot at the target
    std::uint32_t pad2;
    std::uint64_t secret;  // the registration's secret: a wrong one is refused
    std::uint64_t addr;    // target address, inside the region
    std::uint64_t len;
    std::uint64_t operand;
    std::uint64_t compare;
    std::uint64_t token;  // names the origin's operation (echoed in the reply)
};
static_assert(sizeof(OscHdr) == 64);  // no holes: every byte sent is set

struct OscReplyHdr {
    std::uint32_t src;
    std::int32_t status;  // Status: not success when the target refused the operation
    std::uint64_t token;
    std::uint64_t len;
    std::uint64_t value;
};

struct BarrierHdr {
    std::uint32_t src;
    std::uint32_t epoch;
    std::uint32_t round;
    std::uint32_t pad;
};

struct ThrottleHdr {
    std::uint32_t src;
    std::uint32_t on;
};

// Answers a bye (whose header is a MatchHdr with tag 0): sent once every
// message before the bye in its sender's sequence has arrived.
struct ByeAckHdr {
    std::uint32_t src;
    std::uint32_t pad;
};

// A keep-alive probe and its answer (keepalive.hpp): the sender, nothing else.
// A path measurement's probe (path_measure.hpp) carries a token in `pad`,
// which its answer returns; the keep-alive's own carry 0.
struct KeepAliveHdr {
    std::uint32_t src;
    std::uint32_t pad;
};
// The token's bits beside its number: a burst's frame that is not answered,
// a probe that asks for gets (fetch_probes.hpp), an answer saying the gets
// could not be done, and a rank's word to its peer (not answered; the number
// says which): the higher rank of a pair is there to answer (the lower's
// turn), or the sender's probes are over (the higher's turn, or the end of
// the lower's wait in init).
inline constexpr std::uint32_t probe_silent = 1u << 31;
inline constexpr std::uint32_t probe_fetch = 1u << 30;
inline constexpr std::uint32_t probe_refused = 1u << 29;
inline constexpr std::uint32_t probe_turn = 1u << 28;
inline constexpr std::uint32_t probe_number = probe_turn - 1;
inline constexpr std::uint32_t turn_ready = 1;
inline constexpr std::uint32_t turn_done = 2;
// After the KeepAliveHdr of a probe with probe_fetch: the prober's region to
// read and how much, then `handle_size` bytes of its registration handle.
struct FetchProbeHdr {
    std::uint64_t address;
    std::uint64_t length;
    std::uint32_t handle_size;
    std::uint32_t pad;
};

// After the KeepAliveHdr of a rank's turn_done: what it measured over each of
// its candidates (path_readings.hpp), as entries of this header followed by
// `name_len` bytes of the candidate's key (its component's name).  A figure
// < 0 is none.
struct PathReadingHdr {
    double small_us;
    double bulk_mbps;
    std::uint8_t name_len;
    std::uint8_t pad[7];
};
static_assert(sizeof(PathReadingHdr) == 24);  // no holes: every byte sent is set

inline constexpr std::uint8_t cswap_op = 0xff;

// The fixed header every message of a kind starts with: anything shorter is
// malformed and dropped (with a log) before its handler runs.
constexpr std::size_t header_size(Kind k) noexcept {
    switch (k) {
        case match:
            return sizeof(MatchHdr);
        case rndv:
            return sizeof(RndvHdr);
        case ack:
            return sizeof(AckHdr);
        case frag:
            return sizeof(FragHdr);
        case fin:
            return sizeof(FinHdr);
        case am:
            return sizeof(AmHdr);
        case am_done:
            return sizeof(AmDoneHdr);
        case osc_put:
        case osc_get:
        case osc_atomic:
            return sizeof(OscHdr);
        case osc_ack:
        case osc_get_reply:
        case osc_atomic_reply:
            return sizeof(OscReplyHdr);
        case barrier:
            return sizeof(BarrierHdr);
        case throttle:
            return sizeof(ThrottleHdr);
        case split:
            return sizeof(SplitHdr);
        case split_fin:
            return sizeof(SplitFinHdr);
        case frag_abort:
            return sizeof(FragAbortHdr);
        case lost:
            return sizeof(LostHdr);
        case bye:
            return sizeof(MatchHdr);
        case bye_ack:
            return sizeof(ByeAckHdr);
        case ping:
        case pong:
            return sizeof(KeepAliveHdr);
        case kind_count:
            break;
    }
    return 0;
}

constexpr const char* name(Kind k) noexcept {
    constexpr const char* names[] = {"match",
                                     "rndv",
                                     "ack",
                                     "frag",
                                     "fin",
                                     "am",
                                     "am_done",
                                     "osc_put",
                                     "osc_ack",
                                     "osc_get",
                                     "osc_get_reply",
                                     "osc_atomic",
                                     "osc_atomic_reply",
                                     "barrier",
                                     "throttle",
                                     "split",
                                     "split_fin",
                                     "frag_abort",
                                     "lost",
                                     "bye",
                                     "bye_ack",
                                     "ping",
                                     "pong"};
    static_assert(std::size(names) == kind_count);
    return k < kind_count ? names[k] : "unknown";
}

}  // namespace transit::pml::wire
