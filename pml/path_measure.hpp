// Path measurement: which transport carries a rank on another node is decided
// by what is measured at start-up, not by fixed exclusivity (on one network
// ofi's tcp;ofi_rxm, UCT's tcp and Transit's tcp differ several-fold in
// latency and in bandwidth, and which is fastest depends on the host, its
// libraries and the size: the fastest at 8 B is not the widest at 1 MiB).
//
// For every such rank whose endpoint kept several candidates (the bml, with
// bml_base_measure), probes go over each candidate in turn: keep-alive pings
// whose spare field carries a token, answered by the peer's pong over the
// same module.  A peer that does not measure answers over its usual path,
// which is the same for every candidate: the ranking holds.  One probe per
// peer is in flight at a time (no probe waits behind another), the
// candidates take turns, and each candidate's best sample counts (a peer
// busy elsewhere only makes a sample worse).
// - Small probes: 8 B round trips; the fastest carries the small messages.
// - Bulk probes time what a large message costs over the module, about 1 MiB
//   (less when many ranks are measured): over a module that offers get, the
//   peer reads a region of ours with the module's gets, as a rendezvous does
//   (fetch_probes.hpp), and answers when all arrived; over one that does not,
//   a burst of its largest eager frames (up to 64 KiB each, as a large
//   message's fragments go) of which only the last is answered.  The widest
//   in MB/s carries large messages and goes first for put and get, unless
//   the small messages' choice reads within a quarter of it (bulk_choice:
//   the readings move that much from run to run).
//   What bulk probes move is a region of real, touched pages: a
//   never-written one maps the kernel's zero page, and a transport that
//   copies would read one cached page over and over.
// Of each pair of ranks one measures at a time: the lower, once the higher
// says it is there (its init is polling), makes all its probes while the
// higher only answers, then tells the higher it is its turn
// (wire::probe_turn), which says the same when it is done; a rank goes on
// without a word after `turn_patience`.  The first round of samples warms
// the paths and is not counted.  Both at once, each rank's
// round trips read the other's probes queued on the link and in the peer's
// progress passes (UCT's and ofi's tcp then beat Transit's now and then),
// and two bulk transfers share the link and both hosts' cores, cutting every
// figure to a third or a half.
// Each rank's word that it is done carries its figures, and both ranks
// decide on the two sets merged (path_readings.hpp): the higher with the
// lower's, which came before its own probes, the lower once the higher's
// come.  So both choose alike, and a path is as wide as both directions
// found it.
// The bml's choose() applies both from a progress callback, never from
// inside a transport's callback.
//
// Init waits for it up to `init_wait` (the ranks are all there then, and
// idle: the quietest moment a job has), and for the peers' measurements of
// this rank (it serves their probes at full speed while it polls there,
// not from inside the application's first waits); a measurement not done by then goes
// on in the background, with the exclusivity order until it decides.  A peer
// that never answers (failed, or busy for good) keeps that order.  The
// decision and the figures behind it are printed at bml_base_verbose 10.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pml/core.hpp"
#include "pml/fetch_probes.hpp"
#include "pml/headers.hpp"
#include "transit/progress.hpp"

namespace transit::bml {
class R2;
}

namespace transit::pml {

class Outbox;

class PathMeasure {
  public:
    PathMeasure(Core& core, Outbox& outbox) noexcept
        : c_(core), outbox_(outbox), fetches_(core, outbox) {}
    PathMeasure(const PathMeasure&) = delete;
    PathMeasure& operator=(const PathMeasure&) = delete;

    // Starts measuring every job rank whose endpoint has candidates; joins the
    // progress engine while any measurement runs.
    void start(ProgressEngine& progress, bml::R2& bml);
    // Ends it, and releases what probing registered (before the transports go).
    void stop() noexcept;
    // A ping for the measurement, not the keep-alive: one that asks for
    // gets (wire::probe_fetch) or gives the turn (wire::probe_turn).  Served
    // when it comes from a job rank, refused (counted) otherwise.
    static bool for_measure(const std::byte* b) noexcept {
        wire::KeepAliveHdr h;
        std::memcpy(&h, b, sizeof h);
        return (h.pad & (wire::probe_fetch | wire::probe_turn)) != 0;
    }
    void serve(const std::byte* b, std::size_t n, Rank from, btl::Module* arrived) noexcept;
    // A pong: true when it answered one of our probes (the keep-alive's
    // pongs carry no token).
    void on_pong(const std::byte* b, Rank from) noexcept;
    // The answer to a probe (a ping with a token) that came by `arrived`,
    // sent back over that module when it is one of the peer's candidates;
    // false when it is not (the caller answers over the usual path).
    static bool answer(Peer& p, btl::Module* arrived, const wire::KeepAliveHdr& answer,
                       Outbox& outbox) noexcept;
    // Measurements still running: ours, or a peer's of us (for init, tests and tools).
    std::size_t running() const noexcept;

    // The least round trip of each candidate (microseconds; < 0: none
    // answered); the index of the smallest, or none when nothing answered.
    static constexpr std::size_t none = static_cast<std::size_t>(-1);
    static constexpr auto init_wait = std::chrono::seconds(1);
    // How long the higher rank of a pair waits for the lower's word that its
    // bulk probes are over (a lower rank that measures nothing sends none).
    static constexpr auto turn_patience = std::chrono::seconds(3);
    static std::size_t fastest(const std::vector<double>& least_us) noexcept;
    // The same for the best bandwidth of each (MB/s; < 0: none): the largest.
    static std::size_t widest(const std::vector<double>& best_mbps) noexcept;
    // The candidate for large messages: the widest, unless the one chosen
    // for small messages (`small`) reads within a quarter of it; `small`
    // when none read.
    static std::size_t bulk_choice(std::size_t small,
                                   const std::vector<double>& best_mbps) noexcept;

  private:
    using Clock = std::chrono::steady_clock;
    // waiting: for the higher rank's word that it is there (the lower rank of
    // a pair), or the lower's that its probes are over (the higher).
    enum class Phase : std::uint8_t { small, waiting, bulk, done, applied };
    // How this rank's probes of a peer were timed against the peer's.
    enum class Turn : std::uint8_t { first, given, waited_out };
    struct Run {
        Rank peer = any_rank;
        std::size_t candidate = 0;
        Phase phase = Phase::small;
        std::uint32_t sample = 0;
        std::uint32_t token = 0;      // the probe in flight; 0: none
        std::size_t burst_bytes = 0;  // what the bulk probe in flight carried
        Clock::time_point sent{};
        Clock::time_point began{};
        Clock::time_point phase_began{};  // of the small or the bulk probes
        bool peer_done = false;           // the peer's word that its probes are over
        Turn turn = Turn::first;
        std::vector<double> small_us;   // least round trip per candidate
        std::vector<double> bulk_mbps;  // best burst bandwidth per candidate
        // The peer's figures of the same paths (path_readings.hpp), in our
        // candidates' order; empty until they come with its turn_done.
        std::vector<double> peer_small_us;
        std::vector<double> peer_bulk_mbps;
    };

    static int tick_cb(void* self) noexcept;
    int tick() noexcept;
    // One run's step: a probe lost or due, the turn waited out, the decision.
    void measure(Run& run, Clock::time_point now) noexcept;
    void send_probe(Run& run) noexcept;
    // A bulk probe's frames; false when not even the first one went.
    bool send_burst(Run& run, Peer* p, const bml::BtlRef& b, std::size_t payload) noexcept;
    // A bulk probe asking the peer to read our region (registered with b's
    // module as `h`); false when it did not go.
    bool send_fetch(Run& run, Peer* p, const bml::BtlRef& b, btl::RegistrationHandle* h) noexcept;
    // A bulk probe over b is a fetch: b offers get and our region registered
    // with it as `h` (registering it on first use).  Otherwise it is a burst.
    bool probes_by_get(const bml::BtlRef& b, btl::RegistrationHandle*& h) noexcept;
    // The same, once probing has registered what it could (for the figures).
    bool probed_by_get(const bml::BtlRef& b) const noexcept;
    // Our region, registered for reading with b's module; nullptr with
    // `ok` false when it cannot be.
    btl::RegistrationHandle* exposed(const bml::BtlRef& b, bool& ok) noexcept;
    void advance(Run& run) noexcept;
    // Probing begins on the peer's word (on_turn) or after turn_patience.
    void start_probes(Run& run, Turn turn) noexcept;
    // `readings`: what came after the word's header (the peer's figures,
    // with turn_done).
    void on_turn(Rank from, std::uint32_t what, std::span<const std::byte> readings) noexcept;
    // Tells the peer we are there (wire::turn_ready) or done (turn_done,
    // with our figures).
    void tell(const Run& run, std::uint32_t what) noexcept;
    // The decision waits for the peer's figures: it probes after us and
    // sends them when it is done (or fails, or the deadline passes).
    bool awaits_peer(const Run& run, Clock::time_point now) const noexcept;
    // The peer may still be probing us (no word that its bulk probes are over).
    bool serving(const Run& run, Clock::time_point now) const noexcept;
    // Probing ends (all samples, or the deadline): the peer hears it (the
    // higher rank's turn; the lower's scratch can go).
    void finish(Run& run) noexcept;
    void release_region() noexcept;
    // What names each candidate to the peer (path_readings.hpp): its
    // component's name, the same on both nodes where the module's own name
    // holds a local device's; empty for one of two of a component.
    static std::vector<std::string> candidate_keys(const bml::Endpoint& ep);
    // Our figures for the peer, as much of them as its eager path's frames
    // hold beside a `header`; none when they cannot be written.
    static std::vector<std::byte> our_readings(const Run& run, const bml::Endpoint& ep,
                                               std::size_t header) noexcept;
    // The peer's figures from its turn_done; a malformed list is refused
    // (counted) and the decision made on ours alone.
    void take_readings(Run& run, std::span<const std::byte> readings) noexcept;
    void apply(Run& run) noexcept;
    // The decision's inputs: per candidate the merged figures, then ours and
    // the peer's where it sent them.
    std::string figures(const Run& run, const std::vector<double>& small_us,
                        const std::vector<double>& bulk_mbps) const;

    Core& c_;
    Outbox& outbox_;
    bml::R2* bml_ = nullptr;
    ProgressEngine* progress_ = nullptr;
    ProgressEngine::Handle handle_{};
    std::vector<Run> runs_;
    std::uint32_t next_token_ = 0;
    std::size_t burst_target_ = 0;  // bytes per bulk probe (start())
    struct Exposed {
        btl::Module* module;
        btl::RegistrationHandle* handle;
        bool ok;
    };
    // What bulk probes carry and peers read: touched pages, released with
    // their registrations once this process has measured its paths.
    std::unique_ptr<std::byte[]> region_;
    std::vector<Exposed> exposed_;  // our region, per module that probes by get
    FetchProbes fetches_;           // the other side: the peers' probes we serve
};

}  // namespace transit::pml
