// Path measurement (path_measure.hpp): probes over each candidate, their
// answers, and the choice handed to the bml.
#include "pml/path_measure.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "bml/r2.hpp"
#include "pml/headers.hpp"
#include "pml/outbox.hpp"
#include "pml/path_readings.hpp"
#include "transit/btl/component.hpp"

namespace transit::pml {

namespace {

// Rounds of samples (one per candidate each): small_samples, or bulk_samples,
// unless the phase has used its budget once least_samples rounds are in (on
// a loaded host a round trip takes a scheduler's time slice, and the
// measurement must end well within a job).  The least of many round trips
// finds the quiet moments: with 8, taken while the peer probed too, Transit's
// tcp and UCT's (16-19 against 21-24 us) changed places in about one run in
// ten.
constexpr std::uint32_t small_samples = 32;
constexpr std::uint32_t bulk_samples = 6;
constexpr std::uint32_t least_samples = 3;
// Rounds before those, not counted: the first probes over a path meet its
// cold state (connections still being set up, the peer's scratch untouched).
constexpr std::uint32_t warmup_rounds = 1;
constexpr auto small_budget = std::chrono::milliseconds(20);
constexpr auto bulk_budget = std::chrono::milliseconds(50);
constexpr std::size_t small_payload = 8;
// A burst's frames, and what a bulk probe moves: 512 KiB to one peer (large
// enough that a round trip is a small part of its time), shared out when
// many are measured (a 64-rank node pair must not move a gigabyte at
// start-up), never less than one largest frame.
constexpr std::size_t bulk_payload = 64 * 1024;
constexpr std::size_t bulk_total = 512 * 1024;
constexpr std::size_t max_burst_frames = 64;
// Large messages stay with the transport chosen for small ones unless
// another reads this much wider: over one network the best of the bulk
// samples moves by a fifth from run to run, and a low reading comes at times
// (tcp between two namespaces of one host, 2026-12-04: 1,800-9,300 MB/s from
// one run to the next, where UCT read 2,000-3,500), so a narrower lead is
// noise, and one transport for both keeps one path warm.
constexpr double bulk_margin = 1.25;
// A probe not answered by then counts as no sample; a measurement not done by
// the deadline decides on what it has.
constexpr auto probe_patience = std::chrono::seconds(1);
constexpr auto deadline = std::chrono::seconds(15);

// What small probes carry.
constexpr std::array<std::byte, small_payload> small_bytes{};

}  // namespace

std::size_t PathMeasure::fastest(const std::vector<double>& least_us) noexcept {
    std::size_t best = none;
    for (std::size_t i = 0; i < least_us.size(); ++i)
        if (least_us[i] >= 0 && (best == none || least_us[i] < least_us[best])) best = i;
    return best;
}

std::size_t PathMeasure::widest(const std::vector<double>& best_mbps) noexcept {
    std::size_t best = none;
    for (std::size_t i = 0; i < best_mbps.size(); ++i)
        if (best_mbps[i] >= 0 && (best == none || best_mbps[i] > best_mbps[best])) best = i;
    return best;
}

std::size_t PathMeasure::bulk_choice(std::size_t small,
                                     const std::vector<double>& best_mbps) noexcept {
    const std::size_t wide = widest(best_mbps);
    if (wide == none) return small;
    if (small != none && small < best_mbps.size() && best_mbps[small] >= 0 &&
        best_mbps[wide] < best_mbps[small] * bulk_margin)
        return small;
    return wide;
}

void PathMeasure::start(ProgressEngine& progress, bml::R2& bml) {
    bml_ = &bml;
    const auto now = Clock::now();
    for (Rank r = 0; r < c_.size; ++r) {
        const Peer* p = c_.peers.peer(r);
        if (r == c_.rank || !p->ep || p->ep->candidates.size() < 2) continue;
        Run run;
        run.peer = r;
        run.began = run.phase_began = now;
        // Of each pair the lower rank measures first, once the higher is
        // there to answer; the higher when the lower is done.
        run.phase = Phase::waiting;
        run.small_us.assign(p->ep->candidates.size(), -1.0);
        run.bulk_mbps.assign(p->ep->candidates.size(), -1.0);
        runs_.push_back(std::move(run));
    }
    if (runs_.empty()) return;
    burst_target_ = std::max(bulk_payload, bulk_total / runs_.size());
    // Written, so each page is its own (a pattern, not zeros, which an
    // allocator may hand out untouched).
    region_ = std::make_unique_for_overwrite<std::byte[]>(burst_target_);
    std::memset(region_.get(), 0xa5, burst_target_);
    progress_ = &progress;
    handle_ = progress.add(&PathMeasure::tick_cb, this, ProgressPriority::low);
    for (Run& run : runs_)
        if (run.peer < c_.rank) tell(run, wire::turn_ready);
}

void PathMeasure::stop() noexcept {
    if (handle_) progress_->remove(handle_);
    handle_ = {};
    runs_.clear();
    release_region();
    exposed_.clear();
    fetches_.stop();
}

void PathMeasure::release_region() noexcept {
    for (Exposed& e : exposed_) {
        if (e.handle) e.module->rdma()->deregister_mem(e.handle);
        e.handle = nullptr;
    }
    region_.reset();
}

std::size_t PathMeasure::running() const noexcept {
    const auto now = Clock::now();
    return static_cast<std::size_t>(std::count_if(runs_.begin(), runs_.end(), [&](const Run& r) {
        return r.phase != Phase::applied || serving(r, now);
    }));
}

bool PathMeasure::serving(const Run& run, Clock::time_point now) const noexcept {
    const Peer* p = c_.peers.peer(run.peer);
    return !run.peer_done && !p->failed && now - run.began <= deadline;
}

void PathMeasure::send_probe(Run& run) noexcept {
    Peer* p = c_.peers.peer(run.peer);
    if (p->failed || !p->ep) {
        run.phase = Phase::applied;  // nothing to choose for a peer gone
        return;
    }
    const bml::BtlRef& b = p->ep->candidates[run.candidate];
    if (++next_token_ > wire::probe_number) next_token_ = 1;
    run.token = next_token_;
    run.sent = Clock::now();
    bool went;
    if (run.phase == Phase::small) {
        const wire::KeepAliveHdr hdr{c_.rank, run.token};
        const iovec v{const_cast<std::byte*>(small_bytes.data()), small_payload};
        went = ok(outbox_.send_over(p, b, wire::tag(wire::ping), &hdr, sizeof hdr, &v, 1,
                                    Outbox::Refusal::lost));
    } else if (btl::RegistrationHandle* h = nullptr; probes_by_get(b, h)) {
        went = send_fetch(run, p, b, h);
    } else {
        const std::size_t limit = b.module->attributes().eager_limit;
        const std::size_t room = limit > 64 ? limit - 64 : small_payload;
        went = send_burst(run, p, b, std::min(bulk_payload, room));
    }
    if (!went) run.token = 0;  // retried by tick
}

bool PathMeasure::send_burst(Run& run, Peer* p, const bml::BtlRef& b,
                             std::size_t payload) noexcept {
    const std::size_t frames =
        std::clamp<std::size_t>(burst_target_ / payload, 1, max_burst_frames);
    const iovec v{region_.get(), payload};
    // The frames but the last go unanswered; a module that runs out of room
    // ends the burst early, and the bytes that went are what is timed.
    const wire::KeepAliveHdr quiet{c_.rank, run.token | wire::probe_silent};
    std::size_t went = 0;
    while (went + 1 < frames && ok(outbox_.send_over(p, b, wire::tag(wire::ping), &quiet,
                                                     sizeof quiet, &v, 1, Outbox::Refusal::lost)))
        ++went;
    const wire::KeepAliveHdr last{c_.rank, run.token};
    if (!ok(outbox_.send_over(p, b, wire::tag(wire::ping), &last, sizeof last, &v, 1,
                              Outbox::Refusal::lost)))
        return false;
    run.burst_bytes = (went + 1) * payload;
    return true;
}

bool PathMeasure::probes_by_get(const bml::BtlRef& b, btl::RegistrationHandle*& h) noexcept {
    if (!region_) return false;  // released: nothing more is probed
    const auto& a = b.module->attributes();
    if (!b.rdma || !(a.flags & btl::flags::get)) return false;
    if (a.registration_handle_size > btl::max_registration_handle_size) return false;
    bool registered = false;
    h = exposed(b, registered);
    return registered;
}

bool PathMeasure::probed_by_get(const bml::BtlRef& b) const noexcept {
    for (const Exposed& e : exposed_)
        if (e.module == b.module) return e.ok;
    return false;
}

bool PathMeasure::send_fetch(Run& run, Peer* p, const bml::BtlRef& b,
                             btl::RegistrationHandle* h) noexcept {
    const std::size_t handle_size = b.module->attributes().registration_handle_size;
    const std::size_t length = std::min(burst_target_, FetchProbes::max_length);
    const wire::FetchProbeHdr probe{reinterpret_cast<std::uintptr_t>(region_.get()), length,
                                    static_cast<std::uint32_t>(handle_size), 0};
    const wire::KeepAliveHdr hdr{c_.rank, run.token | wire::probe_fetch};
    const iovec v[2] = {{const_cast<wire::FetchProbeHdr*>(&probe), sizeof probe},
                        {h, h ? handle_size : 0}};
    if (!ok(outbox_.send_over(p, b, wire::tag(wire::ping), &hdr, sizeof hdr, v, 2,
                              Outbox::Refusal::lost)))
        return false;
    run.burst_bytes = length;
    return true;
}

btl::RegistrationHandle* PathMeasure::exposed(const bml::BtlRef& b, bool& registered) noexcept {
    for (const Exposed& e : exposed_)
        if (e.module == b.module) {
            registered = e.ok;
            return e.handle;
        }
    btl::RegistrationHandle* h = nullptr;
    try {
        h = b.rdma->register_mem(nullptr, region_.get(), burst_target_,
                                 btl::reg_flags::remote_read);
        const bool usable = h != nullptr || b.module->attributes().registration_handle_size == 0;
        exposed_.push_back({b.module, h, usable});
        registered = usable;
    } catch (...) {
        if (h) b.rdma->deregister_mem(h);
        registered = false;
        h = nullptr;
    }
    return h;
}

// The candidates take turns, one sample each: a peer that stops answering
// for a while (computing, descheduled) delays all of them alike.
void PathMeasure::advance(Run& run) noexcept {
    run.token = 0;
    if (++run.candidate < run.small_us.size()) return send_probe(run);
    run.candidate = 0;
    const bool small = run.phase == Phase::small;
    const auto spent = Clock::now() - run.phase_began;
    const bool enough = run.sample + 1 >= warmup_rounds + least_samples &&
                        (small ? spent > small_budget : spent > bulk_budget);
    const std::uint32_t rounds = warmup_rounds + (small ? small_samples : bulk_samples);
    if (++run.sample < rounds && !enough) return send_probe(run);
    run.sample = 0;
    if (!small) return finish(run);
    run.phase = Phase::bulk;
    run.phase_began = Clock::now();
    send_probe(run);
}

void PathMeasure::start_probes(Run& run, Turn turn) noexcept {
    run.phase = Phase::small;
    run.phase_began = Clock::now();
    run.turn = turn;
    send_probe(run);
}

void PathMeasure::on_turn(Rank from, std::uint32_t what,
                          std::span<const std::byte> readings) noexcept {
    for (Run& run : runs_) {
        if (run.peer != from) continue;
        const bool lower = run.peer > c_.rank;
        if (what == wire::turn_done && !run.peer_done) {
            run.peer_done = true;
            take_readings(run, readings);
        }
        if (run.phase == Phase::waiting && what == (lower ? wire::turn_ready : wire::turn_done))
            start_probes(run, lower ? Turn::first : Turn::given);
        return;
    }
}

void PathMeasure::tell(const Run& run, std::uint32_t what) noexcept {
    Peer* p = c_.peers.peer(run.peer);
    if (p->failed || !p->ep) return;
    const wire::KeepAliveHdr turn{c_.rank, wire::probe_turn | what};
    const std::vector<std::byte> readings =
        what == wire::turn_done ? our_readings(run, *p->ep, sizeof turn) : std::vector<std::byte>{};
    (void)outbox_.send_ctrl(p, wire::ping, &turn, sizeof turn, readings.data(), readings.size());
}

std::vector<std::byte> PathMeasure::our_readings(const Run& run, const bml::Endpoint& ep,
                                                 std::size_t header) noexcept {
    try {
        // As much as the eager modules' frames hold beside the header (a
        // vendor's small-fragment btl may take a few hundred bytes).
        const std::size_t limit = ep.eager_limit;
        const std::size_t room = limit > header + 64 ? limit - header - 64 : 0;
        const std::vector<std::string> keys = candidate_keys(ep);
        const std::vector<std::string_view> views(keys.begin(), keys.end());
        return PathReadings::encode(views, run.small_us, run.bulk_mbps, room);
    } catch (const std::exception&) {
        return {};  // out of memory: the word alone
    }
}

std::vector<std::string> PathMeasure::candidate_keys(const bml::Endpoint& ep) {
    std::vector<std::string> keys;
    for (const bml::BtlRef& b : ep.candidates) keys.push_back(b.module->component().name());
    // Two modules of one component (two rails) cannot be told apart from
    // the other side: neither is matched.
    for (std::size_t i = 0; i < keys.size(); ++i)
        if (std::count(keys.begin(), keys.end(), keys[i]) > 1 && !keys[i].empty())
            std::replace(keys.begin(), keys.end(), std::string(keys[i]), std::string());
    return keys;
}

void PathMeasure::take_readings(Run& run, std::span<const std::byte> readings) noexcept {
    const Peer* p = c_.peers.peer(run.peer);
    if (readings.empty() || !p->ep) return;  // a peer that sends none
    try {
        const std::vector<std::string> keys = candidate_keys(*p->ep);
        const std::vector<std::string_view> views(keys.begin(), keys.end());
        if (!PathReadings::decode(readings, views, run.peer_small_us, run.peer_bulk_mbps)) {
            run.peer_small_us.clear();
            run.peer_bulk_mbps.clear();
            c_.drops.refused(wire::ping, run.peer, "a malformed list of path figures");
        }
    } catch (const std::exception&) {
        run.peer_small_us.clear();  // out of memory: our figures alone
        run.peer_bulk_mbps.clear();
    }
}

bool PathMeasure::awaits_peer(const Run& run, Clock::time_point now) const noexcept {
    return run.turn == Turn::first && serving(run, now);
}

void PathMeasure::finish(Run& run) noexcept {
    run.phase = Phase::done;
    run.token = 0;
    tell(run, wire::turn_done);
}

bool PathMeasure::answer(Peer& p, btl::Module* arrived, const wire::KeepAliveHdr& answer,
                         Outbox& outbox) noexcept {
    if (!p.ep) return false;
    for (const bml::BtlRef& r : p.ep->candidates)
        if (r.module == arrived)
            return ok(outbox.send_over(&p, r, wire::tag(wire::pong), &answer, sizeof answer,
                                       nullptr, 0, Outbox::Refusal::lost));
    return false;
}

void PathMeasure::serve(const std::byte* b, std::size_t n, Rank from,
                        btl::Module* arrived) noexcept {
    wire::KeepAliveHdr h;
    std::memcpy(&h, b, sizeof h);
    const Rank sender = Core::job_sender(from, h.src);
    if (!c_.other_job_rank(sender)) [[unlikely]]
        return c_.drops.refused(wire::ping, sender, "a probe from a peer outside the job");
    if (h.pad & wire::probe_turn)
        return on_turn(sender, h.pad & wire::probe_number, {b + sizeof h, n - sizeof h});
    fetches_.serve(sender, arrived, {b, n});
}

void PathMeasure::on_pong(const std::byte* b, Rank from) noexcept {
    wire::KeepAliveHdr h;
    std::memcpy(&h, b, sizeof h);
    if (h.pad == 0) return;  // the keep-alive's
    const Rank sender = Core::job_sender(from, h.src);
    for (Run& run : runs_) {
        if (run.peer != sender || run.token != (h.pad & wire::probe_number)) continue;
        const double us =
            std::chrono::duration<double, std::micro>(Clock::now() - run.sent).count();
        if (h.pad & wire::probe_refused) {
            // The peer could not read our region over this module: no sample.
        } else if (run.sample < warmup_rounds) {
            // A warm-up round: not counted.
        } else if (run.phase == Phase::bulk) {
            // Bytes per microsecond are MB/s.
            const double mbps = static_cast<double>(run.burst_bytes) / std::max(us, 1e-3);
            double& best = run.bulk_mbps[run.candidate];
            if (best < 0 || mbps > best) best = mbps;
        } else {
            double& least = run.small_us[run.candidate];
            if (least < 0 || us < least) least = us;
        }
        advance(run);
        return;
    }
}

int PathMeasure::tick_cb(void* self) noexcept {
    return static_cast<PathMeasure*>(self)->tick();
}

int PathMeasure::tick() noexcept {
    const auto now = Clock::now();
    std::size_t measuring = 0;
    std::size_t served = 0;  // peers whose probes of us may still come
    std::size_t probing = 0;
    for (Run& run : runs_) {
        if (run.phase != Phase::applied) measure(run, now);
        if (run.phase != Phase::applied) ++measuring;
        if (run.phase != Phase::applied && run.phase != Phase::done) ++probing;
        if (serving(run, now)) ++served;
    }
    if (probing == 0) release_region();
    if (measuring == 0 && served == 0 && handle_) {
        progress_->remove(handle_);
        handle_ = {};
        fetches_.release();  // the peers measured theirs meanwhile
    }
    return 0;
}

void PathMeasure::measure(Run& run, Clock::time_point now) noexcept {
    if (run.phase != Phase::done && now - run.began > deadline) finish(run);
    if (run.phase == Phase::done) {
        if (!awaits_peer(run, now)) apply(run);
        return;
    }
    if (run.phase == Phase::waiting) {
        if (now - run.began > turn_patience) start_probes(run, Turn::waited_out);
    } else if (run.token == 0)
        send_probe(run);  // the module had no room for the last one
    else if (now - run.sent > probe_patience)
        advance(run);  // lost or held up: no sample
}

std::string PathMeasure::figures(const Run& run, const std::vector<double>& small_us,
                                 const std::vector<double>& bulk_mbps) const {
    const bml::Endpoint& ep = *c_.peers.peer(run.peer)->ep;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - run.began).count();
    std::string out = fmt::format("in {:.0f} ms, ", ms);
    switch (run.turn) {
        case Turn::first:
            out += "probes first; ";
            break;
        case Turn::given:
            out += fmt::format("probes after rank {}'s; ", run.peer);
            break;
        case Turn::waited_out:
            out += fmt::format("probes without rank {}'s word; ", run.peer);
            break;
    }
    const bool both = !run.peer_small_us.empty();
    out += both ? std::string("both ranks' figures; ")
                : fmt::format("no figures from rank {}; ", run.peer);
    auto figure = [](double v, const char* unit) {
        return v < 0 ? std::string("no answer") : fmt::format("{:.1f} {}", v, unit);
    };
    for (std::size_t i = 0; i < ep.candidates.size(); ++i) {
        const auto& b = ep.candidates[i];
        const bool by_get = probed_by_get(b);
        out += fmt::format("{}{}: {}, {} by {}", i == 0 ? "" : "; ", b.module->name(),
                           figure(small_us[i], "us"), figure(bulk_mbps[i], "MB/s"),
                           by_get ? "get" : "frames");
        if (both)
            out += fmt::format(" (here {} {}, rank {} {} {})", figure(run.small_us[i], "us"),
                               figure(run.bulk_mbps[i], "MB/s"), run.peer,
                               figure(run.peer_small_us[i], "us"),
                               figure(run.peer_bulk_mbps[i], "MB/s"));
    }
    return out;
}

void PathMeasure::apply(Run& run) noexcept {
    run.phase = Phase::applied;
    Peer* p = c_.peers.peer(run.peer);
    if (p->failed || !p->ep) return;
    try {
        std::vector<double> small_us = run.small_us;
        std::vector<double> bulk_mbps = run.bulk_mbps;
        PathReadings::merge(small_us, run.peer_small_us);
        PathReadings::merge(bulk_mbps, run.peer_bulk_mbps);
        const std::size_t small = fastest(small_us);
        const std::size_t bulk = bulk_choice(small, bulk_mbps);
        if (small == none) {
            bml_->explain(
                fmt::format("rank {}: no probe answered ({}); the exclusivity order stays",
                            run.peer, figures(run, small_us, bulk_mbps)));
            return;
        }
        bml_->choose(*p->ep, small, bulk, figures(run, small_us, bulk_mbps));
    } catch (const std::exception&) {
        // Out of memory for a log line: the exclusivity order stays.
    }
}

}  // namespace transit::pml
