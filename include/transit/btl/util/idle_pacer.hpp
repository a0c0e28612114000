// Polls a transport less often while it carries nothing.
//
// Across nodes the path measurement leaves some transports unused: no peer
// sends over them, yet the progress engine polls each on every pass beside the
// chosen ones, and a poll of a network transport is a system call or a walk
// through a provider's progress.  After `idle_polls` polls in a row that found
// nothing while nothing was in flight, the pacer lets one call in `stride`
// through.  The first poll that finds work, any call made while something is
// in flight, or a send puts the transport back on every pass.  The cost of a
// message arriving on a paced transport is at most `stride` passes, each of
// which is cheap when the other transports are idle too.
//
//   int Module::progress_cb(void* self) noexcept {
//       auto* m = static_cast<Module*>(self);
//       const bool busy = m->ops_pending_ > 0;
//       if (!m->pacer_.due(busy)) return 0;
//       const int n = m->poll();
//       m->pacer_.found(n, busy);
//       return n;
//   }
#pragma once

#include <cstdint>

namespace transit::btl::util {

class IdlePacer {
  public:
    static constexpr std::uint32_t idle_polls = 4096;
    static constexpr std::uint32_t stride = 16;  // a power of two

    // Whether this call polls: always, unless the transport has been idle
    // for idle_polls polls and `in_flight` is false.
    bool due(bool in_flight) noexcept {
        if (empty_ < idle_polls || in_flight) [[likely]]
            return true;
        return (++skipped_ & (stride - 1)) == 0;
    }
    // What the poll found: `events` completed, or work still in flight.
    void found(int events, bool in_flight) noexcept {
        if (events > 0 || in_flight)
            empty_ = 0;
        else if (empty_ < idle_polls)
            ++empty_;
    }
    // Work started by a call outside progress (a send): every pass again.
    void wake() noexcept { empty_ = 0; }
    bool idle() const noexcept { return empty_ >= idle_polls; }

  private:
    std::uint32_t empty_ = 0;
    std::uint32_t skipped_ = 0;
};

}  // namespace transit::btl::util
