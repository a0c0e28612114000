#include "tests/stress/traffic.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace stress {

using transit::any_rank;
using transit::any_tag;
using transit::Rank;
using transit::RequestStatus;
using transit::Status;

namespace {

constexpr std::uint32_t seed_tag = 0x7fff0000u;
constexpr std::uint32_t am_hello = 1, am_stress = 2, am_report = 3;
constexpr std::uint32_t am_window = 64;
constexpr std::size_t am_max_size = 1u << 20;
constexpr std::size_t am_offsets = 4096;  // an active message's data starts at one of these words
constexpr auto stall_limit = std::chrono::seconds(20);
constexpr auto pending_limit = std::chrono::seconds(5);

struct HelloHdr {
    std::uint32_t rank;
    std::uint32_t key_length;
    transit::CounterRef counter;
};
struct AmHdr {
    std::uint32_t sender;
    std::uint32_t pad;
    std::uint64_t seq;
    std::uint64_t size;
};
struct ReportHdr {
    std::uint32_t sender;
    std::uint32_t pad;
    std::uint64_t count;
};

template <class T>
T read_header(const transit::AmInfo& info) {
    T h{};
    std::memcpy(&h, info.header.data(), std::min(sizeof h, info.header.size()));
    return h;
}

std::string name(Status s) {
    return std::string(transit::to_string(s));
}

std::string who(Rank r) {
    return r == any_rank ? std::string("any") : std::to_string(r);
}

double seconds(Clock::duration d) {
    return std::chrono::duration<double>(d).count();
}

std::uint64_t am_key(Rank sender) {
    return mix(sender, 0xa11ce);
}

}  // namespace

Traffic::Traffic(transit::Context& ctx, const Options& opt)
    : ctx_(ctx),
      opt_(opt),
      me_(ctx.rank()),
      n_(ctx.size()),
      rng_(0),
      // Ready before the first barrier: a peer's hello may come before we send ours.
      peer_counters_(n_, 0),
      peer_keys_(n_) {}

void Traffic::fail(const std::string& what) {
    if (++failures_ <= 20) std::printf("stress: rank %u FAIL: %s\n", me_, what.c_str());
    std::fflush(stdout);
}

void Traffic::give_up(const std::string& why) {
    fail(why);
    std::printf(
        "stress: rank %u state: sends posted %llu of %zu (%zu outstanding), receives outstanding "
        "%zu, active messages %llu of %zu (completion %llu, target %llu), atomics %llu of %zu, "
        "reports %u\n",
        me_, static_cast<unsigned long long>(next_send_), plans_[me_].sends.size(), sends_.size(),
        recvs_.size(), static_cast<unsigned long long>(next_am_), plans_[me_].ams.size(),
        static_cast<unsigned long long>(am_completion_.value()),
        static_cast<unsigned long long>(am_target_.value()),
        static_cast<unsigned long long>(next_atomic_), plans_[me_].atomics.size(), reports_);
    for (Rank s = 0; s < n_; ++s)
        for (std::uint32_t t = 0; t < opt_.tags; ++t)
            if (cell(s, t).remaining())
                std::printf("stress: rank %u state: from %u tag %u: %llu of %zu received\n", me_, s,
                            t, static_cast<unsigned long long>(cell(s, t).completed),
                            cell(s, t).sizes.size());
    for (const Recv& r : recvs_)
        std::printf("stress: rank %u state: receive (%s, %s) of %zu bytes pending\n", me_,
                    who(r.src).c_str(), r.tag == any_tag ? "any" : std::to_string(r.tag).c_str(),
                    r.length);
    std::fflush(stdout);
    std::_Exit(1);
}

Buffer Traffic::take(std::size_t size) {
    for (std::size_t i = pool_.size(); i-- > 0;) {
        if (pool_[i].capacity < size) continue;
        Buffer b = std::move(pool_[i]);
        pool_[i] = std::move(pool_.back());
        pool_.pop_back();
        return b;
    }
    const std::size_t cap =
        std::max<std::size_t>(std::bit_ceil(std::max<std::size_t>(size, 1)), 4096);
    return {std::make_unique_for_overwrite<std::byte[]>(cap), cap};
}

void Traffic::give(Buffer b) {
    if (pool_.size() < 4u * opt_.window) pool_.push_back(std::move(b));
}

// --- setup -----------------------------------------------------------------

void Traffic::register_handlers() {
    auto hello_done = [](transit::Context&, Rank, void*, std::size_t, void* user) {
        ++static_cast<Traffic*>(user)->hellos_;
    };
    auto am_done = [](transit::Context&, Rank source, void* buf, std::size_t len, void* user) {
        auto* l = static_cast<Landing*>(user);
        Traffic& t = *l->self;
        std::uint64_t sum = 0;
        if (source != l->sender || !matches({static_cast<const std::byte*>(buf), len},
                                            am_key(l->sender), 0, sum, l->seq % am_offsets)) {
            ++t.am_bad_;
        } else if (l->seq >= t.am_seen_[l->sender].size() || t.am_seen_[l->sender][l->seq]) {
            ++t.am_bad_;
        } else {
            t.am_seen_[l->sender][l->seq] = true;
        }
        t.am_landing_.remove_if([l](const Landing& x) { return &x == l; });
    };
    auto report_done = [](transit::Context&, Rank, void*, std::size_t, void* user) {
        ++static_cast<Traffic*>(user)->reports_;
    };
    if (!ok(ctx_.register_am_handler(am_hello, on_hello, hello_done, this)) ||
        !ok(ctx_.register_am_handler(am_stress, on_am, am_done, this)) ||
        !ok(ctx_.register_am_handler(am_report, on_report, report_done, this)))
        throw std::runtime_error("cannot register the active message handlers");
}

transit::AmDestination Traffic::on_hello(transit::Context&, const transit::AmInfo& info,
                                         void* arg) {
    auto& t = *static_cast<Traffic*>(arg);
    const auto h = read_header<HelloHdr>(info);
    if (h.rank >= t.n_) return {};
    t.peer_counters_[h.rank] = h.counter;
    t.peer_keys_[h.rank].resize(info.data_length);
    return {t.peer_keys_[h.rank].data(), nullptr, &t};
}

transit::AmDestination Traffic::on_am(transit::Context&, const transit::AmInfo& info, void* arg) {
    auto& t = *static_cast<Traffic*>(arg);
    const auto h = read_header<AmHdr>(info);
    if (h.sender >= t.n_ || h.size != info.data_length) {
        ++t.am_bad_;
        return {};
    }
    Landing& l = t.am_landing_.emplace_back(
        &t, h.sender, h.seq, std::make_unique_for_overwrite<std::byte[]>(info.data_length + 1));
    return {l.data.get(), nullptr, &l};
}

transit::AmDestination Traffic::on_report(transit::Context&, const transit::AmInfo& info,
                                          void* arg) {
    auto& t = *static_cast<Traffic*>(arg);
    const auto h = read_header<ReportHdr>(info);
    // Reports land one after another in tickets_in_, sized for all of them.
    const std::size_t at = t.tickets_filled_;
    if (h.count * 8 != info.data_length || at + h.count > t.tickets_in_.size()) {
        t.fail("a ticket report of " + std::to_string(h.count) + " tickets does not fit");
        return {nullptr, nullptr, &t};
    }
    t.tickets_filled_ += h.count;
    return {t.tickets_in_.data() + at, nullptr, &t};
}

void Traffic::exchange_seed() {
    if (me_ == 0) {
        for (Rank r = 1; r < n_; ++r)
            if (!ok(ctx_.send(r, seed_tag, &opt_.seed, sizeof opt_.seed)))
                throw std::runtime_error("cannot send the seed to rank " + std::to_string(r));
    } else if (!ok(ctx_.recv(0, seed_tag, &opt_.seed, sizeof opt_.seed))) {
        throw std::runtime_error("cannot receive the seed from rank 0");
    }
}

void Traffic::draw_plans() {
    Rng fate(mix(opt_.seed, 0xdead));
    const Rank victim = opt_.fault && n_ > 1 ? static_cast<Rank>(fate.below(n_)) : any_rank;
    job_ = {n_, opt_.seed, &opt_, victim};
    for (Rank s = 0; s < n_; ++s) plans_.push_back(draw_plan(job_, s));
    if (victim != any_rank) kill_at_ = fate.below(plans_[victim].sends.size());
    cells_.resize(std::size_t{n_} * opt_.tags);
    wild_src_.assign(n_, 0);
    wild_tag_.assign(opt_.tags, 0);
    am_seen_.resize(n_);
    std::size_t tickets = 0;
    for (Rank s = 0; s < n_; ++s) {
        for (const TaggedSend& m : plans_[s].sends)
            if (m.dst == me_) cell(s, m.tag).sizes.push_back(m.size);
        for (const AmSend& a : plans_[s].ams)
            if (a.dst == me_) am_seen_[s].push_back(false);
        for (const AtomicOpPlan& a : plans_[s].atomics)
            if (a.dst == me_ && a.word == Word::ticket64) ++tickets;
    }
    tickets_in_.assign(tickets, 0);
    fetched_.assign(plans_[me_].atomics.size(), 0);
    rng_ = Rng(mix(opt_.seed, 1000 + me_));
    const char* tmp = std::getenv("TMPDIR");
    death_file_ = std::string(tmp && *tmp ? tmp : "/tmp") + "/transit_stress." +
                  std::to_string(::getppid()) + "." + std::to_string(opt_.seed);
}

void Traffic::say_hello() {
    words_ = ctx_.mem_alloc(4096);
    if (!words_) throw std::runtime_error("mem_alloc failed");
    for (std::uint32_t w = 0; w < word_count; ++w) {
        const std::uint64_t v = initial_value(static_cast<Word>(w));
        std::memcpy(static_cast<std::byte*>(words_) + w * word_stride, &v, sizeof v);
    }
    if (!ok(ctx_.register_memory(words_, 4096, region_)))
        throw std::runtime_error("register_memory failed");
    const std::vector<std::byte> key = ctx_.pack_key(region_);
    am_source_.resize(am_max_size + am_offsets * 8);
    fill(am_source_, am_key(me_), 0);
    keys_.assign(n_, nullptr);
    const HelloHdr h{me_, static_cast<std::uint32_t>(key.size()), ctx_.counter_ref(am_target_)};
    transit::Counter sent;
    for (Rank r = 0; r < n_; ++r) {
        const auto hb = std::as_bytes(std::span(&h, 1));
        Status s;
        while ((s = ctx_.am_send(r, am_hello, hb, key.data(), key.size(), {&sent, 0, nullptr})) ==
               Status::out_of_resource)
            ctx_.progress();
        if (!ok(s)) throw std::runtime_error("hello to rank " + std::to_string(r) + ": " + name(s));
    }
    const auto until = Clock::now() + stall_limit;
    while ((hellos_ < n_ || sent.value() < n_) && Clock::now() < until) ctx_.progress();
    if (hellos_ < n_) throw std::runtime_error("the other ranks' hellos never came");
    for (Rank r = 0; r < n_; ++r)
        if (!ok(ctx_.unpack_key(peer_keys_[r], keys_[r])))
            throw std::runtime_error("cannot unpack the key of rank " + std::to_string(r));
}

// --- the main loop -----------------------------------------------------------

bool Traffic::open_cell(Rank s, std::uint32_t) const {
    return !(s == job_.victim && victim_failed_);
}

std::uint32_t Traffic::cover(Rank s, std::uint32_t t) const {
    return wild_all_ + wild_src_[s] + wild_tag_[t];
}

// A receive may be posted when, in every covered cell, the messages still to
// come outnumber the receives that could take them: whatever order matching
// picks, every receive then gets a message.
bool Traffic::can_post(Rank s, std::uint32_t t) const {
    for (Rank cs = 0; cs < n_; ++cs) {
        if (s != any_rank && cs != s) continue;
        for (std::uint32_t ct = 0; ct < opt_.tags; ++ct) {
            if (t != any_tag && ct != t) continue;
            const Cell& c = cell(cs, ct);
            if (!open_cell(cs, ct) || c.specific + cover(cs, ct) + 1 > c.remaining()) return false;
        }
    }
    return true;
}

void Traffic::claim(Rank s, std::uint32_t t, int by) {
    if (s != any_rank && t != any_tag)
        cell(s, t).specific += by;
    else if (s != any_rank)
        wild_src_[s] += by;
    else if (t != any_tag)
        wild_tag_[t] += by;
    else
        wild_all_ += by;
}

bool Traffic::finished() const {
    const RankPlan& p = plans_[me_];
    if (next_send_ < p.sends.size() || !sends_.empty()) return false;
    if (next_am_ < p.ams.size() || am_completion_.value() + am_completion_.lost() < p.ams.size())
        return false;
    std::uint64_t am_expected = 0;
    for (const auto& seen : am_seen_) am_expected += seen.size();
    if (am_target_.value() < am_expected || next_atomic_ < p.atomics.size()) return false;
    for (Rank s = 0; s < n_; ++s) {
        for (std::uint32_t t = 0; t < opt_.tags; ++t) {
            const Cell& c = cell(s, t);
            if (!open_cell(s, t) ? c.specific > 0 || wild_src_[s] > 0 : c.remaining() > 0)
                return false;
        }
    }
    return true;
}

void Traffic::die_now() {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count();
    std::ofstream(death_file_) << ns << "\n";
    std::printf("stress: rank %u raises SIGKILL before its send %llu of %zu\n", me_,
                static_cast<unsigned long long>(next_send_), plans_[me_].sends.size());
    std::fflush(stdout);
    std::raise(SIGKILL);
}

void Traffic::note_victim_failure(Clock::time_point when) {
    if (!victim_failed_) first_failure_ = when;
    victim_failed_ = true;
    ++peer_failed_;
}

void Traffic::post_sends() {
    const RankPlan& p = plans_[me_];
    while (sends_.size() < opt_.window && next_send_ < p.sends.size()) {
        if (me_ == job_.victim && next_send_ == kill_at_) die_now();
        const TaggedSend& m = p.sends[next_send_];
        Buffer b = take(m.size);
        write_message({b.data.get(), m.size}, me_, m);
        transit::Request* r = nullptr;
        const Status s = ctx_.isend(m.dst, m.tag, b.data.get(), m.size, r);
        if (s == Status::out_of_resource) {
            give(std::move(b));
            break;
        }
        ++next_send_;
        if (!ok(s)) {
            if (s == Status::peer_failed && m.dst == job_.victim)
                note_victim_failure(Clock::now());
            else
                fail("isend to " + std::to_string(m.dst) + " returned " + name(s));
            if (r) ctx_.wait(r);
            give(std::move(b));
            continue;
        }
        bytes_sent_ += m.size;
        if (m.dst == job_.victim) ++victim_pending_;
        sends_.push_back({r, m.dst, std::move(b)});
    }
}

void Traffic::poll_sends() {
    for (std::size_t i = 0; i < sends_.size();) {
        bool done = false;
        RequestStatus st;
        const Status ret = ctx_.test(sends_[i].req, done, &st);
        if (!done) {
            if (!ok(ret)) give_up("test of a send returned " + name(ret));
            ++i;
            continue;
        }
        last_progress_ = Clock::now();
        const Rank dst = sends_[i].dst;
        if (dst == job_.victim) {
            --victim_pending_;
            if (st.status == Status::peer_failed) {
                note_victim_failure(last_progress_);
                last_failure_ = std::max(last_failure_, last_progress_);
            }
        }
        if (st.status != Status::success &&
            !(dst == job_.victim && st.status == Status::peer_failed))
            fail("a send to " + std::to_string(dst) + " ended with " + name(st.status));
        give(std::move(sends_[i].buf));
        sends_[i] = std::move(sends_.back());
        sends_.pop_back();
    }
}

bool Traffic::post_recv(Rank s, std::uint32_t t, std::size_t len, bool preposted) {
    Buffer b = take(len);
    transit::Request* r = nullptr;
    const Status st = ctx_.irecv(s, t, b.data.get(), len, r);
    if (st == Status::out_of_resource) {
        give(std::move(b));
        return false;
    }
    if (!ok(st)) {
        if (st == Status::peer_failed && s == job_.victim)
            note_victim_failure(Clock::now());
        else
            fail("irecv from " + who(s) + " returned " + name(st));
        if (r) ctx_.wait(r);
        give(std::move(b));
        return false;
    }
    claim(s, t, +1);
    if (preposted) ++preposted_;
    if (s == job_.victim) ++victim_pending_;
    recvs_.push_back({r, s, t, post_index_++, std::move(b), len, preposted});
    return true;
}

void Traffic::post_receives() {
    while (preposted_ < opt_.window) {
        const auto kind = rng_.below(10);
        bool posted = false;
        for (int attempt = 0; attempt < 4 && !posted; ++attempt) {
            Rank s = static_cast<Rank>(rng_.below(n_));
            std::uint32_t t = static_cast<std::uint32_t>(rng_.below(opt_.tags));
            if (kind == 5 || kind == 6) t = any_tag;
            if (kind == 7 || kind == 8) s = any_rank;
            if (kind == 9) s = any_rank, t = any_tag;
            if (!can_post(s, t)) continue;
            const std::size_t len = rng_.chance(15) ? rng_.log_size(opt_.max_size) : opt_.max_size;
            if (!post_recv(s, t, len, true)) return;
            posted = true;
        }
        if (!posted) return;
    }
}

// A message no receive is waiting for gets one of its own: whatever the
// pre-posted receives chose, no sender waits for ever.
void Traffic::probe_receives() {
    const auto first = static_cast<Rank>(rng_.below(n_));
    for (Rank i = 0; i < n_; ++i) {
        const Rank s = (first + i) % n_;
        if (!open_cell(s, 0)) continue;
        for (int k = 0; k < 4; ++k) {
            bool found = false;
            RequestStatus st;
            if (!ok(ctx_.iprobe(s, any_tag, found, st)) || !found) break;
            if (st.source != s || st.tag >= opt_.tags)
                give_up("iprobe(" + std::to_string(s) + ", any) found a message from " +
                        who(st.source) + " tag " + std::to_string(st.tag) + " nobody sent");
            if (!can_post(s, st.tag)) break;
            const std::size_t len =
                rng_.chance(15) ? rng_.log_size(st.sent_length) : st.sent_length;
            if (!post_recv(s, st.tag, len, false)) break;
            ++probed_;
        }
    }
}

void Traffic::poll_receives() {
    for (std::size_t i = 0; i < recvs_.size();) {
        bool done = false;
        RequestStatus st;
        const Status ret = ctx_.test(recvs_[i].req, done, &st);
        if (!done) {
            if (!ok(ret) && ret != Status::truncated)
                give_up("test of a receive returned " + name(ret));
            ++i;
            continue;
        }
        last_progress_ = Clock::now();
        on_received(recvs_[i], st);
        give(std::move(recvs_[i].buf));
        recvs_[i] = std::move(recvs_.back());
        recvs_.pop_back();
    }
}

void Traffic::on_received(Recv& r, const RequestStatus& st) {
    claim(r.src, r.tag, -1);
    if (r.preposted) --preposted_;
    if (r.src == job_.victim) --victim_pending_;
    if (st.status == Status::cancelled) return;
    if (st.status == Status::peer_failed) {
        // A wildcard receive fails only once it matched a message of the victim.
        if (r.src != job_.victim && !(r.src == any_rank && st.source == job_.victim)) {
            fail("a receive from " + who(r.src) + " ended with peer failed (source " +
                 who(st.source) + ")");
            return;
        }
        note_victim_failure(last_progress_);
        last_failure_ = std::max(last_failure_, last_progress_);
        return;
    }
    if (st.status != Status::success && st.status != Status::truncated) {
        fail("a receive from " + who(r.src) + " ended with " + name(st.status));
        return;
    }
    if (st.source >= n_ || st.tag >= opt_.tags || (r.src != any_rank && st.source != r.src) ||
        (r.tag != any_tag && st.tag != r.tag)) {
        fail("a receive (" + who(r.src) + ", " + std::to_string(r.tag) + ") got source " +
             who(st.source) + " tag " + std::to_string(st.tag));
        return;
    }
    const bool cut = st.sent_length > r.length;
    if ((st.status == Status::truncated) != cut || st.length != std::min(st.sent_length, r.length))
        fail("a receive of " + std::to_string(r.length) + " bytes of a " +
             std::to_string(st.sent_length) + "-byte message reports " + name(st.status) + ", " +
             std::to_string(st.length) + " bytes");
    Cell& c = cell(st.source, st.tag);
    if (c.remaining() == 0) {
        fail("one message more than rank " + std::to_string(st.source) + " sent with tag " +
             std::to_string(st.tag));
        return;
    }
    ++c.completed;
    ++received_;
    bytes_received_ += st.length;
    truncated_ += cut;
    wildcard_hits_ += r.src == any_rank || r.tag == any_tag;
    Cell::Arrival a{r.post_index, no_seq, st.sent_length, st.length, {}};
    std::memcpy(a.prefix.data(), r.buf.data.get(), std::min(st.length, sizeof(Header)));
    check_payload(r, st, a);
    c.arrivals.push_back(a);
}

void Traffic::check_payload(Recv& r, const RequestStatus& st, Cell::Arrival& a) {
    if (st.length < sizeof(Header)) return;  // checked at the end, once its seq is known
    Header h;
    std::memcpy(&h, r.buf.data.get(), sizeof h);
    const std::string from = "a message from " + std::to_string(st.source) + " tag " +
                             std::to_string(st.tag) + " seq " + std::to_string(h.seq);
    const Cell& c = cell(st.source, st.tag);
    if (h.magic != magic || h.header_check != header_check(h)) {
        fail("a message from " + std::to_string(st.source) + " has a corrupted header");
        return;
    }
    if (h.sender != st.source || h.dst != me_ || h.tag != st.tag || h.length != st.sent_length ||
        h.seq >= c.sizes.size() || c.sizes[h.seq] != h.length) {
        fail(from + " has a header that does not match its envelope or the plan");
        return;
    }
    a.seq = h.seq;
    std::uint64_t sum = 0;
    if (!matches({r.buf.data.get(), st.length}, message_key(h.sender, h.dst, h.tag, h.seq),
                 sizeof(Header), sum))
        fail(from + ": payload corrupted");
    else if (st.length == st.sent_length && sum != h.checksum)
        fail(from + ": checksum mismatch");
}

void Traffic::post_ams() {
    const RankPlan& p = plans_[me_];
    while (next_am_ < p.ams.size() && next_am_ - am_completion_.value() < am_window) {
        const AmSend& a = p.ams[next_am_];
        const AmHdr h{me_, 0, a.seq, a.size};
        const Status s = ctx_.am_send(a.dst, am_stress, std::as_bytes(std::span(&h, 1)),
                                      am_source_.data() + (a.seq % am_offsets) * 8, a.size,
                                      {&am_origin_, peer_counters_[a.dst], &am_completion_});
        if (s == Status::out_of_resource) return;
        if (!ok(s)) fail("am_send to " + std::to_string(a.dst) + " returned " + name(s));
        ++next_am_;
    }
}

void Traffic::post_atomics() {
    const RankPlan& p = plans_[me_];
    for (int k = 0; k < 4 && next_atomic_ < p.atomics.size(); ++k) {
        const AtomicOpPlan& a = p.atomics[next_atomic_];
        std::uint64_t* fetched =
            a.word == Word::ticket64 || rng_.chance(50) ? &fetched_[next_atomic_] : nullptr;
        const Status s =
            ctx_.atomic(a.dst, op_of(a.word), width_of(a.word), keys_[a.dst],
                        static_cast<std::uint32_t>(a.word) * word_stride, a.operand, fetched);
        if (s == Status::out_of_resource) return;
        if (!ok(s)) fail("atomic on " + std::to_string(a.dst) + " returned " + name(s));
        ++next_atomic_;
        if (++since_flush_ >= 32) {
            since_flush_ = 0;
            if (const Status f = ctx_.flush_all(); !ok(f)) fail("flush_all returned " + name(f));
        }
    }
}

void Traffic::step() {
    ctx_.progress();
    poll_sends();
    poll_receives();
    post_sends();
    post_receives();
    probe_receives();
    post_ams();
    post_atomics();
    const auto now = Clock::now();
    const std::uint64_t moved = am_completion_.value() + am_target_.value() + next_atomic_;
    if (moved != last_moved_) last_moved_ = moved, last_progress_ = now;
    if (now - last_progress_ > stall_limit)
        give_up("nothing (request, active message, atomic) finished for 20 s");
    if (victim_failed_ && victim_pending_ > 0 && now - first_failure_ > pending_limit)
        give_up(std::to_string(victim_pending_) +
                " request(s) with the killed rank still pending 5 s after the first ended");
}

// --- the end -------------------------------------------------------------------

void Traffic::finish_onesided() {
    if (const Status f = ctx_.flush_all(); !ok(f)) fail("the last flush_all returned " + name(f));
    // Every live rank reports to every live rank the tickets it drew there.
    std::vector<std::vector<std::uint64_t>> tickets(n_);
    const RankPlan& p = plans_[me_];
    for (std::size_t i = 0; i < p.atomics.size(); ++i)
        if (p.atomics[i].word == Word::ticket64) tickets[p.atomics[i].dst].push_back(fetched_[i]);
    transit::Counter sent;
    std::uint32_t live = 0;
    for (Rank r = 0; r < n_; ++r) {
        if (r == job_.victim) continue;
        ++live;
        const ReportHdr h{me_, 0, tickets[r].size()};
        Status s;
        while ((s = ctx_.am_send(r, am_report, std::as_bytes(std::span(&h, 1)), tickets[r].data(),
                                 tickets[r].size() * 8, {nullptr, 0, &sent})) ==
               Status::out_of_resource)
            ctx_.progress();
        if (!ok(s)) fail("the ticket report to " + std::to_string(r) + " returned " + name(s));
    }
    const auto until = Clock::now() + stall_limit;
    while ((sent.value() + sent.lost() < live || reports_ < live) && Clock::now() < until)
        ctx_.progress();
    if (reports_ < live || sent.value() < live)
        give_up("ticket reports: " + std::to_string(reports_) + " of " + std::to_string(live) +
                " came, " + std::to_string(sent.value()) + " of ours completed");
}

void Traffic::cancel_leftovers() {
    // Only wildcard receives that were waiting for the killed rank may be left.
    for (Recv& r : recvs_) {
        if (r.src != any_rank || !victim_failed_)
            fail("a receive (" + who(r.src) + ", " + std::to_string(r.tag) + ") is left over");
        const Status c = ctx_.cancel(r.req);
        if (!ok(c) && c != Status::not_available) fail("cancel returned " + name(c));
        RequestStatus st;
        ctx_.wait(r.req, &st);
        on_received(r, st);
    }
    recvs_.clear();
}

void Traffic::check_cell_order(Rank s, std::uint32_t t) {
    Cell& c = cell(s, t);
    std::ranges::sort(c.arrivals, {}, &Cell::Arrival::post_index);
    const bool exact = s != job_.victim;
    const std::string where = "from " + std::to_string(s) + " tag " + std::to_string(t);
    std::uint64_t last = 0;
    bool any = false;
    for (std::size_t k = 0; k < c.arrivals.size(); ++k) {
        const Cell::Arrival& a = c.arrivals[k];
        if (a.seq == no_seq && exact) {
            // Short: the k-th match must hold message k's first bytes.
            std::vector<std::byte> want(c.sizes[k]);
            write_message(want, s, {me_, t, k, c.sizes[k]});
            if (a.sent_length != c.sizes[k] ||
                (a.length != 0 && std::memcmp(want.data(), a.prefix.data(), a.length) != 0))
                fail(where + ": match " + std::to_string(k) + " is not message " +
                     std::to_string(k) + " (out of order, or corrupted)");
            continue;
        }
        if (a.seq == no_seq) continue;
        if (exact ? a.seq != k : any && a.seq <= last)
            fail(where + ": match " + std::to_string(k) + " got message " + std::to_string(a.seq) +
                 " (out of order)");
        last = a.seq;
        any = true;
    }
}

void Traffic::check_cells() {
    for (Rank s = 0; s < n_; ++s) {
        for (std::uint32_t t = 0; t < opt_.tags; ++t) {
            const Cell& c = cell(s, t);
            if (s != job_.victim && c.completed != c.sizes.size())
                fail("from " + std::to_string(s) + " tag " + std::to_string(t) + ": " +
                     std::to_string(c.completed) + " of " + std::to_string(c.sizes.size()) +
                     " messages received");
            check_cell_order(s, t);
        }
    }
}

void Traffic::check_ams() {
    const std::size_t mine = plans_[me_].ams.size();
    if (am_origin_.value() != mine || am_completion_.value() != mine || am_completion_.lost() != 0)
        fail("active messages: " + std::to_string(mine) + " sent, origin counter " +
             std::to_string(am_origin_.value()) + ", completion counter " +
             std::to_string(am_completion_.value()) + " (lost " +
             std::to_string(am_completion_.lost()) + ")");
    std::uint64_t expected = 0, seen = 0;
    for (const auto& s : am_seen_) {
        expected += s.size();
        seen += static_cast<std::uint64_t>(std::ranges::count(s, true));
    }
    if (am_target_.value() != expected || seen != expected || am_bad_ != 0)
        fail("active messages to us: " + std::to_string(expected) + " sent, target counter " +
             std::to_string(am_target_.value()) + ", " + std::to_string(seen) + " intact, " +
             std::to_string(am_bad_) + " corrupted or duplicated");
}

void Traffic::check_atomics() {
    std::array<std::uint64_t, word_count> want{};
    for (std::uint32_t w = 0; w < word_count; ++w) want[w] = initial_value(static_cast<Word>(w));
    for (Rank o = 0; o < n_; ++o)
        for (const AtomicOpPlan& a : plans_[o].atomics)
            if (a.dst == me_) {
                auto& v = want[static_cast<std::uint32_t>(a.word)];
                v = apply(a.word, v, a.operand);
            }
    for (std::uint32_t w = 0; w < word_count; ++w) {
        auto* at = static_cast<std::byte*>(words_) + w * word_stride;
        std::uint64_t got = 0;
        if (width_of(static_cast<Word>(w)) == transit::AtomicWidth::bits32) {
            std::uint32_t v = 0;
            __atomic_load(reinterpret_cast<std::uint32_t*>(at), &v, __ATOMIC_ACQUIRE);
            got = v;
        } else {
            __atomic_load(reinterpret_cast<std::uint64_t*>(at), &got, __ATOMIC_ACQUIRE);
        }
        if (got != want[w])
            fail("atomic word " + std::to_string(w) + " holds " + std::to_string(got) +
                 ", expected " + std::to_string(want[w]));
    }
    std::ranges::sort(tickets_in_);
    for (std::size_t i = 0; i < tickets_in_.size(); ++i)
        if (tickets_in_[i] != i) {
            fail("the fetched tickets are not 0.." + std::to_string(tickets_in_.size() - 1) +
                 " (position " + std::to_string(i) + " holds " + std::to_string(tickets_in_[i]) +
                 ")");
            break;
        }
}

void Traffic::check_fault_timing() {
    if (job_.victim == any_rank) return;
    std::ifstream in(death_file_);
    long long ns = 0;
    if (!(in >> ns)) {
        if (victim_failed_) fail("rank " + std::to_string(job_.victim) + " left no time of death");
        return;
    }
    if (last_failure_ == Clock::time_point{}) {
        std::printf("stress: rank %u: no request with rank %u was pending at its death\n", me_,
                    job_.victim);
        return;
    }
    const auto death = Clock::time_point(std::chrono::nanoseconds(ns));
    const double after = seconds(last_failure_ - death);
    std::printf("stress: rank %u: the last request with rank %u ended %.3f s after its death\n",
                me_, job_.victim, after);
    if (after > opt_.failure_limit)
        fail("requests with the killed rank ended " + std::to_string(after) +
             " s after its death (limit " + std::to_string(opt_.failure_limit) + " s)");
}

bool Traffic::run() {
    start_ = Clock::now();
    register_handlers();
    if (!ok(ctx_.barrier())) throw std::runtime_error("the first barrier failed");
    exchange_seed();
    draw_plans();
    if (me_ == 0) {
        std::printf("stress: seed %llu (rerun with --seed %llu), %u ranks, %llu messages\n",
                    static_cast<unsigned long long>(opt_.seed),
                    static_cast<unsigned long long>(opt_.seed), n_,
                    static_cast<unsigned long long>(opt_.messages));
        if (job_.victim != any_rank)
            std::printf("stress: fault: rank %u dies before its send %llu\n", job_.victim,
                        static_cast<unsigned long long>(kill_at_));
        std::fflush(stdout);
    }
    say_hello();
    last_progress_ = Clock::now();
    while (!finished()) step();
    finish_onesided();
    cancel_leftovers();
    check_cells();
    check_ams();
    check_atomics();
    check_fault_timing();
    const double took = seconds(Clock::now() - start_);
    std::printf(
        "stress: rank %u %s: sent %llu messages (%llu bytes), received %llu (%llu bytes; %llu "
        "truncated, %llu by wildcard, %llu after a probe), %zu active messages, %zu atomics, "
        "%llu peer_failed, %.2f s\n",
        me_, failures_ ? "FAIL" : "PASS", static_cast<unsigned long long>(next_send_),
        static_cast<unsigned long long>(bytes_sent_), static_cast<unsigned long long>(received_),
        static_cast<unsigned long long>(bytes_received_),
        static_cast<unsigned long long>(truncated_),
        static_cast<unsigned long long>(wildcard_hits_), static_cast<unsigned long long>(probed_),
        plans_[me_].ams.size(), plans_[me_].atomics.size(),
        static_cast<unsigned long long>(peer_failed_), took);
    std::fflush(stdout);
    for (auto*& k : keys_)
        if (k) ctx_.release_key(k);
    ctx_.deregister_memory(region_);
    ctx_.mem_free(words_);
    return failures_ == 0;
}

}  // namespace stress
