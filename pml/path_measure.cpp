// Path measurement (path_measure.hpp): probes over each candidate, their
// answers, and the choice handed to the bml.
#include "pml/path_measure.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "bml/r2.hpp"
#include "pml/headers.hpp"
#include "pml/outbox.hpp"

namespace transit::pml {

namespace {

constexpr std::uint32_t small_samples = 8;
constexpr std::uint32_t bulk_samples = 4;
constexpr std::size_t small_payload = 8;
constexpr std::size_t bulk_payload = 16 * 1024;
// A probe not answered by then counts as no sample; a measurement not done by
// the deadline decides on what it has.
constexpr auto probe_patience = std::chrono::seconds(1);
constexpr auto deadline = std::chrono::seconds(15);

constinit const std::array<std::byte, bulk_payload> zeros{};

}  // namespace

std::size_t PathMeasure::fastest(const std::vector<double>& least_us) noexcept {
    std::size_t best = none;
    for (std::size_t i = 0; i < least_us.size(); ++i)
        if (least_us[i] >= 0 && (best == none || least_us[i] < least_us[best])) best = i;
    return best;
}

void PathMeasure::start(ProgressEngine& progress, bml::R2& bml) {
    bml_ = &bml;
    const auto now = Clock::now();
    for (Rank r = 0; r < c_.size; ++r) {
        const Peer* p = c_.peers.peer(r);
        if (r == c_.rank || !p->ep || p->ep->candidates.size() < 2) continue;
        Run run;
        run.peer = r;
        run.began = now;
        run.small_us.assign(p->ep->candidates.size(), -1.0);
        run.bulk_us.assign(p->ep->candidates.size(), -1.0);
        runs_.push_back(std::move(run));
    }
    if (runs_.empty()) return;
    progress_ = &progress;
    handle_ = progress.add(&PathMeasure::tick_cb, this, ProgressPriority::low);
    for (Run& run : runs_) send_probe(run);
}

void PathMeasure::stop() noexcept {
    if (handle_) progress_->remove(handle_);
    handle_ = {};
    runs_.clear();
}

std::size_t PathMeasure::running() const noexcept {
    return static_cast<std::size_t>(std::count_if(
        runs_.begin(), runs_.end(), [](const Run& r) { return r.phase != Phase::applied; }));
}

void PathMeasure::send_probe(Run& run) noexcept {
    Peer* p = c_.peers.peer(run.peer);
    if (p->failed || !p->ep) {
        run.phase = Phase::applied;  // nothing to choose for a peer gone
        return;
    }
    const bml::BtlRef& b = p->ep->candidates[run.candidate];
    std::size_t payload = small_payload;
    if (run.phase == Phase::bulk) {
        const std::size_t limit = b.module->attributes().eager_limit;
        const std::size_t room = limit > 64 ? limit - 64 : small_payload;
        payload = std::min(bulk_payload, room);
    }
    if (++next_token_ == 0) next_token_ = 1;
    run.token = next_token_;
    run.sent = Clock::now();
    const wire::KeepAliveHdr hdr{c_.rank, run.token};
    const iovec v{const_cast<std::byte*>(zeros.data()), payload};
    if (!ok(outbox_.send_over(p, b, wire::tag(wire::ping), &hdr, sizeof hdr, &v, 1,
                              Outbox::Refusal::lost)))
        run.token = 0;  // retried by tick
}

// The candidates take turns, one sample each: a peer that stops answering
// for a while (computing, descheduled) delays all of them alike.
void PathMeasure::advance(Run& run) noexcept {
    run.token = 0;
    if (++run.candidate < run.small_us.size()) return send_probe(run);
    run.candidate = 0;
    const std::uint32_t samples = run.phase == Phase::small ? small_samples : bulk_samples;
    if (++run.sample < samples) return send_probe(run);
    run.sample = 0;
    if (run.phase == Phase::small) {
        run.phase = Phase::bulk;
        return send_probe(run);
    }
    run.phase = Phase::done;
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

void PathMeasure::on_pong(const std::byte* b, Rank from) noexcept {
    wire::KeepAliveHdr h;
    std::memcpy(&h, b, sizeof h);
    if (h.pad == 0) return;  // the keep-alive's
    const Rank sender = Core::job_sender(from, h.src);
    for (Run& run : runs_) {
        if (run.peer != sender || run.token != h.pad) continue;
        const double us =
            std::chrono::duration<double, std::micro>(Clock::now() - run.sent).count();
        double& least = (run.phase == Phase::bulk ? run.bulk_us : run.small_us)[run.candidate];
        if (least < 0 || us < least) least = us;
        advance(run);
        return;
    }
}

int PathMeasure::tick_cb(void* self) noexcept {
    return static_cast<PathMeasure*>(self)->tick();
}

int PathMeasure::tick() noexcept {
    const auto now = Clock::now();
    std::size_t left = 0;
    for (Run& run : runs_) {
        if (run.phase == Phase::applied) continue;
        if (run.phase != Phase::done && now - run.began > deadline) run.phase = Phase::done;
        if (run.phase == Phase::done) {
            apply(run);
            continue;
        }
        ++left;
        if (run.token == 0)
            send_probe(run);  // the module had no room for the last one
        else if (now - run.sent > probe_patience)
            advance(run);  // lost or held up: no sample
    }
    if (left == 0 && handle_) {
        progress_->remove(handle_);
        handle_ = {};
    }
    return 0;
}

std::string PathMeasure::figures(const Run& run) const {
    const bml::Endpoint& ep = *c_.peers.peer(run.peer)->ep;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - run.began).count();
    std::string out = fmt::format("in {:.0f} ms, ", ms);
    auto us = [](double v) { return v < 0 ? std::string("no answer") : fmt::format("{:.1f}", v); };
    for (std::size_t i = 0; i < ep.candidates.size(); ++i)
        out += fmt::format("{}{}: {} / {} us", i == 0 ? "" : "; ", ep.candidates[i].module->name(),
                           us(run.small_us[i]), us(run.bulk_us[i]));
    return out;
}

void PathMeasure::apply(Run& run) noexcept {
    run.phase = Phase::applied;
    Peer* p = c_.peers.peer(run.peer);
    if (p->failed || !p->ep) return;
    try {
        const std::size_t small = fastest(run.small_us);
        std::size_t bulk = fastest(run.bulk_us);
        if (small == none) {
            bml_->explain(
                fmt::format("rank {}: no probe answered ({}); the exclusivity order stays",
                            run.peer, figures(run)));
            return;
        }
        if (bulk == none) bulk = small;
        bml_->choose(*p->ep, small, bulk, figures(run));
    } catch (const std::exception&) {
        // Out of memory for a log line: the exclusivity order stays.
    }
}

}  // namespace transit::pml
