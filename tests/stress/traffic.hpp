// One rank's part of the stress job: it sends its plan, receives what the
// others' plans send it (through specific, wildcard, truncating and
// probe-driven receives), and checks everything it got.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "tests/stress/plan.hpp"
#include "transit/transit.hpp"

namespace stress {

using Clock = std::chrono::steady_clock;

// A receive or send buffer, reused: no zeroing, no reallocation per message.
struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
};

class Traffic {
  public:
    Traffic(transit::Context& ctx, const Options& opt);
    // True when every check held.
    bool run();
    // Where the victim of --fault writes its time of death (read by every survivor).
    const std::string& death_file() const { return death_file_; }

  private:
    struct Cell {                        // messages from one sender with one tag
        std::vector<std::size_t> sizes;  // in seq order
        std::uint64_t completed = 0;
        std::uint32_t specific = 0;  // outstanding receives naming this cell
        struct Arrival {
            std::uint64_t post_index;
            std::uint64_t seq;  // no_seq: too short to carry a header
            std::size_t sent_length;
            std::size_t length;
            std::array<std::byte, sizeof(Header)> prefix;
        };
        std::vector<Arrival> arrivals;
        std::uint64_t remaining() const { return sizes.size() - completed; }
    };
    struct Recv {
        transit::Request* req;
        transit::Rank src;
        std::uint32_t tag;
        std::uint64_t post_index;
        Buffer buf;
        std::size_t length;
        bool preposted;
    };
    struct Send {
        transit::Request* req;
        transit::Rank dst;
        Buffer buf;
    };
    static constexpr std::uint64_t no_seq = ~0ull;

    // setup
    void exchange_seed();
    void draw_plans();
    void say_hello();
    void register_handlers();
    // the main loop
    bool finished() const;
    void step();
    void post_sends();
    void post_receives();
    void probe_receives();
    void post_ams();
    void post_atomics();
    void poll_sends();
    void poll_receives();
    // receive bookkeeping
    Cell& cell(transit::Rank s, std::uint32_t t) { return cells_[std::size_t{s} * opt_.tags + t]; }
    const Cell& cell(transit::Rank s, std::uint32_t t) const {
        return cells_[std::size_t{s} * opt_.tags + t];
    }
    std::uint32_t cover(transit::Rank s, std::uint32_t t) const;
    bool open_cell(transit::Rank s, std::uint32_t t) const;
    bool can_post(transit::Rank s, std::uint32_t t) const;
    void claim(transit::Rank s, std::uint32_t t, int by);
    bool post_recv(transit::Rank s, std::uint32_t t, std::size_t len, bool preposted);
    void on_received(Recv& r, const transit::RequestStatus& st);
    void check_payload(Recv& r, const transit::RequestStatus& st, Cell::Arrival& a);
    // the end
    void finish_onesided();
    void cancel_leftovers();
    void check_cells();
    void check_cell_order(transit::Rank s, std::uint32_t t);
    void check_ams();
    void check_atomics();
    void check_fault_timing();
    void note_victim_failure(Clock::time_point when);
    Buffer take(std::size_t size);
    void give(Buffer b);
    void fail(const std::string& what);
    void die_now();
    [[noreturn]] void give_up(const std::string& why);

    // active message handlers (handler_arg is this)
    static transit::AmDestination on_hello(transit::Context&, const transit::AmInfo&, void*);
    static transit::AmDestination on_am(transit::Context&, const transit::AmInfo&, void*);
    static transit::AmDestination on_report(transit::Context&, const transit::AmInfo&, void*);

    transit::Context& ctx_;
    Options opt_;
    transit::Rank me_;
    std::uint32_t n_;
    JobShape job_{};
    std::vector<RankPlan> plans_;
    std::vector<Cell> cells_;
    std::vector<std::uint32_t> wild_src_;  // (s, any_tag) outstanding, per s
    std::vector<std::uint32_t> wild_tag_;  // (any_rank, t) outstanding, per t
    std::uint32_t wild_all_ = 0;           // (any_rank, any_tag) outstanding
    std::vector<Recv> recvs_;
    std::uint32_t preposted_ = 0;
    std::vector<Send> sends_;
    std::vector<Buffer> pool_;
    std::uint64_t next_send_ = 0, post_index_ = 0;
    std::uint64_t kill_at_ = ~0ull;  // the victim dies before posting this send
    Rng rng_;

    // active messages
    transit::Counter am_origin_, am_completion_, am_target_;
    std::vector<transit::CounterRef> peer_counters_;
    std::vector<std::vector<std::byte>> peer_keys_;
    std::uint32_t hellos_ = 0;
    std::vector<std::byte> am_source_;
    std::uint64_t next_am_ = 0;
    std::vector<std::vector<bool>> am_seen_;  // per sender, per seq
    struct Landing {  // where one active message lands, with what it should hold
        Traffic* self;
        transit::Rank sender;
        std::uint64_t seq;
        std::unique_ptr<std::byte[]> data;
    };
    std::list<Landing> am_landing_;  // stable addresses: each is a handler's user_data
    std::uint64_t am_bad_ = 0;

    // one-sided
    void* words_ = nullptr;
    transit::MemoryRegion* region_ = nullptr;
    std::vector<transit::RemoteKey*> keys_;
    std::uint64_t next_atomic_ = 0, since_flush_ = 0;
    std::vector<std::uint64_t> fetched_;  // one per planned atomic
    std::vector<std::uint64_t> tickets_in_;
    std::size_t tickets_filled_ = 0;
    std::uint32_t reports_ = 0;

    // fault mode
    bool victim_failed_ = false;
    Clock::time_point first_failure_{}, last_failure_{};
    std::uint32_t victim_pending_ = 0;
    std::string death_file_;

    // figures and verdict
    Clock::time_point start_{}, last_progress_{};
    std::uint64_t last_moved_ = 0;
    std::uint64_t bytes_sent_ = 0, bytes_received_ = 0, received_ = 0, truncated_ = 0;
    std::uint64_t wildcard_hits_ = 0, probed_ = 0, peer_failed_ = 0;
    std::uint32_t failures_ = 0;
};

}  // namespace stress
