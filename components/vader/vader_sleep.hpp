// btl::WaitObject of a vader module: how a process sleeps until a local peer
// sends to it, and how a sender wakes a sleeping peer.  The receiver declares
// it sleeps in its segment header (`sleeping`), and a sender that sees that
// after publishing rings the receiver's doorbell (vader_doorbell.hpp); the
// receiver sleeps on a wait set (vader_wait_set.hpp) that holds the doorbell,
// the watched peers' pidfds and the timer of a light sleep.
//
// Owns the doorbell, the wait set and the choice of a light or a full sleep.
// Borrows from the module its segment header (null while it has none), the
// look for work before a sleep (VaderModule::has_work) and the module's pass
// state (vader_pass.hpp), where it notes that a sleep ended by a peer's exit
// (`exit_seen`, read by every progress pass).
#pragma once

#include <cstdint>

#include "components/vader/vader_doorbell.hpp"
#include "components/vader/vader_layout.hpp"
#include "components/vader/vader_pass.hpp"
#include "components/vader/vader_wait_set.hpp"
#include "transit/btl/module.hpp"
#include "transit/log.hpp"

namespace transit::vader {

struct Config;
class VaderModule;

class VaderSleep final : public btl::WaitObject {
  public:
    VaderSleep(VaderModule& module, SegmentHeader* const& header, VaderPass& pass,
               const Config& config, const log::Stream& out) noexcept
        : module_(module), header_(header), pass_(pass), config_(config), out_(out) {}
    VaderSleep(const VaderSleep&) = delete;
    VaderSleep& operator=(const VaderSleep&) = delete;

    // Opens the doorbell and the wait set; without a doorbell waits poll.
    void open() noexcept;
    bool can_sleep() const noexcept { return bell_.fd() >= 0; }
    // What peers ring, for the segment header.
    const char* bell_name() const noexcept { return bell_.name(); }
    // A sleep ends when the process of `pidfd` exits; false when the set cannot watch it.
    bool watch(int pidfd) noexcept { return waits_.watch(pidfd); }
    // A watched peer exited (one system call).
    bool peer_exited() noexcept { return waits_.exit_seen(); }
    // VaderModule::ring's slow half: `peer` declared it sleeps.
    void ring_slow(SegmentHeader& peer) noexcept;

    // The doorbell and the watched peers' pidfds (vader_wait_set.hpp).
    int wait_fd() const noexcept override { return waits_.fd() >= 0 ? waits_.fd() : bell_.fd(); }
    Armed arm() noexcept override;
    void disarm() noexcept override;

  private:
    // arm()'s half of the Dekker pair; false when it cannot be had.
    bool sleep_barrier() noexcept;

    VaderModule& module_;
    SegmentHeader* const& header_;
    VaderPass& pass_;  // exit_seen: a sleep ended by a peer's exit
    const Config& config_;
    const log::Stream& out_;
    Doorbell bell_;           // fd -1: cannot sleep
    WaitSet waits_;           // the doorbell and the peers' pidfds; fd -1: the bell alone
    bool light_next_ = true;  // the next sleep skips the membarrier (sleep_barrier)
};

}  // namespace transit::vader
