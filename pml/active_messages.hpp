// Active messages (LAPI): a header handler at the target chooses where the
// data lands; a completion handler runs once it is there; origin, target and
// completion counters report progress.  Small messages go in one fragment,
// large ones reuse the tagged rendezvous (Sender::start_send, Receiver::start_rndv).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "pml/core.hpp"
#include "pml/held_messages.hpp"
#include "pml/outbox.hpp"
#include "pml/receiver.hpp"
#include "pml/sender.hpp"
#include "transit/progress.hpp"

namespace transit::pml {

// A counter of ours that peers may name (Context::counter_ref): the handle of
// its slot is the CounterRef they send back as an active message's target.
struct CounterSlot {
    CounterSlot* next_free = nullptr;  // the pool's
    bool in_use = false;
    std::uint32_t slot = ~std::uint32_t{0};
    std::uint32_t generation = 0;
    Counter* counter = nullptr;
};

struct AmHandler {
    AmHeaderFn header = nullptr;
    AmCompletionFn completion = nullptr;
    void* arg = nullptr;
};

class ActiveMessages {
  public:
    ActiveMessages(Core& core, Outbox& outbox, Sender& sender, Receiver& receiver)
        : c_(core), outbox_(outbox), sender_(sender), receiver_(receiver) {}

    Status register_am(std::uint32_t id, const AmHandler& h);
    Status am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header, const void* data,
                   std::size_t len, const AmCounters& counters) noexcept;

    // The handle peers name c by as a target counter (the same for every call
    // with c); 0 when out of memory.
    CounterRef counter_ref(Counter& c) noexcept;
    // Peers can no longer name the counter behind `ref`; bad_param for a ref
    // not given out, or released already.
    Status release_counter_ref(CounterRef ref) noexcept;

    // Runs when an internal (active message) receive has all its data.
    void finish(Req* r) noexcept;
    // One completion `p` owed (under its token) came, or never will; false
    // when p owes none under that token.
    bool settle_completion(Peer* p, std::uint64_t token, bool lost) noexcept;
    // The peer failed: the completions it owed will never come.
    void write_off_completions(Peer* p) noexcept;

    // Received messages (the engine's dispatch).
    void on_am(const std::byte* b, std::size_t n) noexcept;
    void on_rndv(const std::byte* b, std::size_t n) noexcept;
    void on_am_done(const std::byte* b, std::size_t n, Rank from) noexcept;

    // Init is over: messages held for handlers not registered yet are
    // replayed at the next progress (the user registers right after init).
    void set_up(ProgressEngine& progress) noexcept;
    // The context goes: what is still held is dropped.
    void drop_held() noexcept;

  private:
    void decline_rndv(Peer* p, const wire::RndvHdr& h) noexcept;
    void answer_completion(Rank origin, std::uint64_t token, bool lost) noexcept;
    Counter* target_counter(CounterRef ref) const noexcept {
        const CounterSlot* s = ref ? counters_.find(ref) : nullptr;
        return s ? s->counter : nullptr;
    }
    // A message naming a counter we never gave out: not delivered.
    void counter_refused(Rank src, wire::Kind k) noexcept;
    std::uint64_t owe_completion(Peer* p, Counter* c) noexcept;
    Counter* take_owed(Peer* p, std::uint64_t token) noexcept;

    Core& c_;
    Outbox& outbox_;
    Sender& sender_;
    Receiver& receiver_;
    std::array<AmHandler, Context::am_max_handlers> am_handlers_{};
    NamedPool<CounterSlot> counters_;
    bool warned_bad_am_ = false;

    // Messages for handlers not registered yet, kept during set-up only
    // (their btl tag says eager or rendezvous).
    static constexpr std::size_t max_held = 4096;
    bool hold_unclaimed(const std::byte* b, std::size_t n, bool rndv) noexcept;
    static int replay_cb(void* self) noexcept;
    bool setting_up_ = true;
    HeldMessages held_{max_held};
    ProgressEngine* progress_ = nullptr;
    ProgressEngine::Handle replay_handle_{};
};

}  // namespace transit::pml
