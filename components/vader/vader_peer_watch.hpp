// The watch of a vader module over its peers' processes: a peer that exits
// without saying goodbye is given up (VaderModule::peer_lost), one that
// finalized first and holds none of our fragments leaves quietly.  The sleep's
// wait set (VaderSleep) holds the watched peers' pidfds, so one system call
// says whether any exited; the peers are asked one by one only then, or at a
// slower pace while some peer is not in the set.
//
// Owns the list of watched peers, the two paces and the low-priority progress
// callback that runs the check.  Borrows from the module the job's endpoints
// (`endpoints` by local index, `active` those in use), its fragments (whether a
// peer holds some), its pass state (vader_pass.hpp: `exit_seen`, a sleep ended
// by a peer's exit, read by every progress pass; `in_check`, noted here while a
// check runs: a peer deleted then is freed later,
// VaderOutside::delete_dynamic), the sleep's wait set, VaderOutside's share of
// the check and its peers to watch, and the module's progress
// (VaderModule::progress, to take what a dead peer sent first) and peer_lost
// (the "used by VaderPeerWatch" section of vader_module.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "components/vader/vader_endpoint.hpp"
#include "components/vader/vader_frag.hpp"
#include "components/vader/vader_pass.hpp"
#include "transit/btl/util/free_list.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/log.hpp"
#include "transit/progress.hpp"

namespace transit::vader {

class VaderModule;
class VaderOutside;
class VaderSleep;

class VaderPeerWatch {
  public:
    VaderPeerWatch(VaderModule& module, ProgressEngine& engine, VaderSleep& sleep,
                   VaderOutside& outside, const btl::util::FreeList<Frag>& frags,
                   const std::vector<std::unique_ptr<VaderEndpoint>>& endpoints,
                   const std::vector<std::uint32_t>& active, VaderPass& pass,
                   const log::Stream& out) noexcept
        : module_(module),
          engine_(engine),
          sleep_(sleep),
          outside_(outside),
          frags_(frags),
          endpoints_(endpoints),
          active_(active),
          pass_(pass),
          out_(out) {}
    VaderPeerWatch(const VaderPeerWatch&) = delete;
    VaderPeerWatch& operator=(const VaderPeerWatch&) = delete;

    // The check runs as a low-priority progress callback from now on (until stop).
    void start();
    void stop();
    // Looks for peers that died (paced: the wait set every 10 ms, and at once
    // after a sleep a peer's exit ended).
    int check() noexcept;
    // The next check looks at every peer (for a caller about to wait on one).
    void hurry() noexcept {
        exit_pace_.hurry();
        check_pace_.hurry();
    }
    // A sleep ends when ep's process exits; a process the wait set cannot hold
    // makes the check ask every peer at the slower pace.
    void watch_exit(const VaderEndpoint& ep) noexcept;
    // The watched peers anew: the job's live ones and VaderOutside's.
    void rebuild();
    // Room for one more watched peer: rebuild does not allocate then.
    void reserve() { watched_.reserve(watched_.size() + 1); }
    // A deleted peer: the check skips it.
    void forget(VaderEndpoint* ep) noexcept;

  private:
    static int check_cb(void* self) noexcept;
    void peer_died(VaderEndpoint* ep) noexcept;
    bool departed_quietly(VaderEndpoint* ep) noexcept;

    VaderModule& module_;
    ProgressEngine& engine_;
    VaderSleep& sleep_;
    VaderOutside& outside_;
    const btl::util::FreeList<Frag>& frags_;
    const std::vector<std::unique_ptr<VaderEndpoint>>& endpoints_;  // by local index
    const std::vector<std::uint32_t>& active_;  // local indexes with an endpoint
    VaderPass& pass_;                           // exit_seen: look now; in_check: a check runs
    const log::Stream& out_;
    std::vector<VaderEndpoint*> watched_;  // live peers watched for exit
    // The clock is read every 4th low-priority call: after a nap every pass
    // runs them (ProgressEngine::low_next), and a napping rank on a loaded
    // node makes a pass every few milliseconds only.
    // The wait set asked whether a peer exited (one system call): every 10 ms.
    btl::util::WatchPace exit_pace_{std::chrono::milliseconds(10), 4};
    // Each peer asked (a system call each): every 100 ms, where some peer is
    // not in the wait set; else only when the set said one exited.
    btl::util::WatchPace check_pace_{std::chrono::milliseconds(100), 4};
    bool all_in_wait_set_ = true;  // every watched peer's pidfd is in the sleep's wait set
    ProgressEngine::Handle handle_{};
};

}  // namespace transit::vader
