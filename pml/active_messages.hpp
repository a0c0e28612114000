// Active messages (LAPI): a header handler at the target chooses where the
// data lands; a completion handler runs once it is there; origin, target and
// completion counters report progress.  Small messages go in one fragment,
// large ones reuse the tagged rendezvous (Tagged::start_send, start_rndv).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "pml/core.hpp"
#include "pml/outbox.hpp"
#include "pml/tagged.hpp"

namespace transit::pml {

struct AmHandler {
    AmHeaderFn header = nullptr;
    AmCompletionFn completion = nullptr;
    void* arg = nullptr;
};

class ActiveMessages {
  public:
    ActiveMessages(Core& core, Outbox& outbox, Tagged& tagged)
        : c_(core), outbox_(outbox), tagged_(tagged) {}

    Status register_am(std::uint32_t id, const AmHandler& h);
    Status am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header, const void* data,
                   std::size_t len, const AmCounters& counters) noexcept;

    // Runs when an internal (active message) receive has all its data.
    void finish(Req* r) noexcept;
    // One completion `p` owed to counter c came, or never will.
    void settle_completion(Peer* p, Counter* c, bool lost) noexcept;
    // The peer failed: the completions it owed will never come.
    void write_off_completions(Peer* p) noexcept;

    // Received messages (the engine's dispatch).
    void on_am(const std::byte* b, std::size_t n) noexcept;
    void on_rndv(const std::byte* b, std::size_t n) noexcept;
    void on_am_done(const std::byte* b, std::size_t n) noexcept;

  private:
    void decline_rndv(Peer* p, const wire::RndvHdr& h) noexcept;
    void answer_completion(Rank origin, std::uint64_t token, bool lost) noexcept;
    bool owe_completion(Peer* p, Counter* c) noexcept;
    void forget_owed(Peer* p, Counter* c) noexcept;

    Core& c_;
    Outbox& outbox_;
    Tagged& tagged_;
    std::array<AmHandler, Context::am_max_handlers> am_handlers_{};
    bool warned_bad_am_ = false;
};

}  // namespace transit::pml
