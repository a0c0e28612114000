// Whether and how a vader module's progress runs: as a callback of the
// progress engine (with the exit watch's check, VaderPeerWatch::start) while
// some peer is there to poll for, dropped when none is left (a process alone
// on its node costs nothing between its clients); and by hand in flush's
// wait when it is not registered.
//
// Owns the progress callback's handle.  Borrows from the module its progress
// (VaderModule::progress), the progress engine, the exit watch (its check
// runs in flush's wait: VaderPeerWatch::check), the local indexes of the
// job's peers with an endpoint (`active`) and VaderOutside's word on whether
// it is idle.
#pragma once

#include <cstdint>
#include <vector>

#include "transit/progress.hpp"

namespace transit::vader {

class VaderModule;
class VaderOutside;
class VaderPeerWatch;

class VaderProgressHook {
  public:
    VaderProgressHook(VaderModule& module, ProgressEngine& engine, VaderPeerWatch& peer_watch,
                      const VaderOutside& outside,
                      const std::vector<std::uint32_t>& active) noexcept
        : module_(module),
          engine_(engine),
          peer_watch_(peer_watch),
          outside_(outside),
          active_(active) {}
    VaderProgressHook(const VaderProgressHook&) = delete;
    VaderProgressHook& operator=(const VaderProgressHook&) = delete;

    // The module's progress runs as a progress callback from now on, and the
    // exit watch's check as a low-priority one.
    void start();
    void stop();
    // No peer to poll for: progress stops.  Parked fast boxes wait for their
    // release.
    void stop_if_idle() noexcept;
    // One round of flush's wait: progress, and a look for dead peers now.
    void flush_round();

  private:
    static int progress_cb(void* module) noexcept;

    VaderModule& module_;
    ProgressEngine& engine_;
    VaderPeerWatch& peer_watch_;
    const VaderOutside& outside_;
    const std::vector<std::uint32_t>& active_;  // local indexes with an endpoint
    ProgressEngine::Handle handle_{};
};

}  // namespace transit::vader
