// Peers the launcher reports lost: a PMIx event says a process of our job
// ended without closing its runtime (PMIX_ERR_PROC_TERM_WO_SYNC, or aborted by
// a signal).  The handler runs on PMIx's own thread and only records the
// ranks; the progress engine's thread reads them (Runtime::lost_count,
// lost_ranks).
#pragma once

#include <pmix_common.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "transit/runtime.hpp"

namespace transit::rt {

// The ranks of job `nspace` an event names: its PMIX_EVENT_AFFECTED_PROC or
// PMIX_EVENT_AFFECTED_PROCS, else its source; wildcard and other jobs' ranks
// are left out.
std::vector<Rank> affected_ranks(std::string_view nspace, const pmix_proc_t* source,
                                 const pmix_info_t* info, std::size_t ninfo);

// The event codes that mean a process is gone without having finalized.
inline constexpr pmix_status_t lost_process_events[] = {
    PMIX_ERR_PROC_TERM_WO_SYNC, PMIX_ERR_PROC_ABORTED_BY_SIG, PMIX_ERR_PROC_KILLED_BY_CMD,
    -7 /* PMIX_ERR_PROC_ABORTED, deprecated: older launchers send it */};

class LostPeers {
  public:
    // Registers the handler for job `nspace`, rank `self`; without one (PMIx
    // refused) count() stays 0 and the job runs as before.
    LostPeers(std::string nspace, Rank self);
    ~LostPeers();
    LostPeers(const LostPeers&) = delete;
    LostPeers& operator=(const LostPeers&) = delete;

    std::uint32_t count() const noexcept { return state_->count.load(std::memory_order_acquire); }
    std::vector<Rank> ranks() const;
    // Adds a rank found lost by other means than the launcher's event.
    void add(Rank lost) noexcept;

    // What the handler fills: the ranks of `nspace` reported lost, each once,
    // never `self`.
    struct State {
        std::string nspace;
        Rank self = any_rank;
        mutable std::mutex mutex;
        std::vector<Rank> ranks;
        std::atomic<std::uint32_t> count{0};
        void record(const std::vector<Rank>& lost);
    };

  private:
    std::unique_ptr<State> state_;  // found by the handler through a registry
    std::size_t ref_ = 0;
    bool registered_ = false;
};

}  // namespace transit::rt
