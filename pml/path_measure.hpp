// Path measurement: which transport carries a rank on another node is decided
// by round trips measured at start-up, not by fixed exclusivity (on one
// network ofi's tcp;ofi_rxm, UCT's tcp and Transit's tcp differ several-fold
// in latency, and which is fastest depends on the host and its libraries).
//
// For every such rank whose endpoint kept several candidates (the bml, with
// bml_base_measure), probes go over each candidate in turn: keep-alive pings
// whose spare field carries a token, answered by the peer's pong over the
// same module, so a round trip is the
// candidate's both ways.  A peer that does not measure answers over its usual
// path, which is the same for every candidate: the ranking holds.  One probe per peer is in
// flight at a time (no probe waits behind another), the candidates take
// turns, and the least of a candidate's round trips counts (a peer busy
// elsewhere only adds time).
// Small probes (8 B of payload) choose the module for small messages, larger
// ones (16 KiB, or the module's largest eager frame) the module for large
// messages; the bml's choose() applies both from a progress callback, never
// from inside a transport's callback.
//
// Init waits for it up to `init_wait` (the ranks are all there then, and
// idle: the quietest moment a job has); a measurement not done by then goes
// on in the background, with the exclusivity order until it decides.  A peer
// that never answers (failed, or busy for good) keeps that order.  The
// decision and the figures behind it are printed at bml_base_verbose 10.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "pml/core.hpp"
#include "pml/headers.hpp"
#include "transit/progress.hpp"

namespace transit::bml {
class R2;
}

namespace transit::pml {

class Outbox;

class PathMeasure {
  public:
    PathMeasure(Core& core, Outbox& outbox) noexcept : c_(core), outbox_(outbox) {}
    PathMeasure(const PathMeasure&) = delete;
    PathMeasure& operator=(const PathMeasure&) = delete;

    // Starts measuring every job rank whose endpoint has candidates; joins the
    // progress engine while any measurement runs.
    void start(ProgressEngine& progress, bml::R2& bml);
    void stop() noexcept;
    // A pong: true when it answered one of our probes (the keep-alive's
    // pongs carry no token).
    void on_pong(const std::byte* b, Rank from) noexcept;
    // The answer to a probe (a ping with a token) that came by `arrived`,
    // sent back over that module when it is one of the peer's candidates;
    // false when it is not (the caller answers over the usual path).
    static bool answer(Peer& p, btl::Module* arrived, const wire::KeepAliveHdr& answer,
                       Outbox& outbox) noexcept;
    // Measurements still running (for tests and tools).
    std::size_t running() const noexcept;

    // The least round trip of each candidate (microseconds; < 0: none
    // answered); the index of the smallest, or none when nothing answered.
    static constexpr std::size_t none = static_cast<std::size_t>(-1);
    static constexpr auto init_wait = std::chrono::seconds(1);
    static std::size_t fastest(const std::vector<double>& least_us) noexcept;

  private:
    using Clock = std::chrono::steady_clock;
    enum class Phase : std::uint8_t { small, bulk, done, applied };
    struct Run {
        Rank peer = any_rank;
        std::size_t candidate = 0;
        Phase phase = Phase::small;
        std::uint32_t sample = 0;
        std::uint32_t token = 0;  // the probe in flight; 0: none
        Clock::time_point sent{};
        Clock::time_point began{};
        std::vector<double> small_us;  // least round trip per candidate
        std::vector<double> bulk_us;
    };

    static int tick_cb(void* self) noexcept;
    int tick() noexcept;
    void send_probe(Run& run) noexcept;
    void advance(Run& run) noexcept;
    void apply(Run& run) noexcept;
    std::string figures(const Run& run) const;

    Core& c_;
    Outbox& outbox_;
    bml::R2* bml_ = nullptr;
    ProgressEngine* progress_ = nullptr;
    ProgressEngine::Handle handle_{};
    std::vector<Run> runs_;
    std::uint32_t next_token_ = 0;
};

}  // namespace transit::pml
