// Peer loss for a uct module: UCT's error callback (a connection reset, a
// timeout), a local peer's process seen to exit, and the report of every
// lost peer, once, from the module's attend(): what waits for it is dropped
// and its operations end with peer_failed, unless it said goodbye and has
// nothing pending (it left, no error).  A failure is only noted where it is
// found (often inside UCT's progress) and handled after UCT returns.
//
// Owns: the flag that an endpoint failed since the last handle_failures()
// and the pace of the local peers' check.  Borrows: the module (its name,
// UCT's progress, error reports, its attention flag), the job endpoints (by
// rank), the peers outside the job, the send queue, the operations in
// flight, the receiver (what a lost peer sent first is delivered first) and
// the module's log stream.
#pragma once

#include <uct/api/uct.h>

#include <chrono>
#include <memory>
#include <vector>

#include "transit/btl/util/process_watch.hpp"
#include "transit/log.hpp"
#include "uct_endpoint.hpp"

namespace transit::uct {

class UctModule;
class UctOutside;
class UctSendQueue;
class UctOps;
class UctReceiver;

class UctPeerWatch {
  public:
    UctPeerWatch(UctModule& module, std::vector<std::unique_ptr<UctEndpoint>>& by_rank,
                 UctOutside& outside, UctSendQueue& send_queue, UctOps& ops, UctReceiver& receiver,
                 const log::Stream& out) noexcept
        : module_(module),
          by_rank_(by_rank),
          outside_(outside),
          send_queue_(send_queue),
          ops_(ops),
          receiver_(receiver),
          out_(out) {}

    // UCT's error handler: arg is the peer watch.
    static ucs_status_t error_cb(void* arg, uct_ep_h ep, ucs_status_t status) noexcept;
    // An endpoint failed (marked so by the caller): reported from attend().
    void note_failure() noexcept;
    bool failures() const noexcept { return failures_; }
    // Reports each endpoint that failed and was not reported yet.
    void handle_failures() noexcept;
    // A local peer whose process has exited is lost like one UCT reports.
    void check_local_peers() noexcept;

  private:
    bool left_quietly(const UctEndpoint& e) const noexcept;

    UctModule& module_;
    std::vector<std::unique_ptr<UctEndpoint>>& by_rank_;
    UctOutside& outside_;
    UctSendQueue& send_queue_;
    UctOps& ops_;
    UctReceiver& receiver_;
    const log::Stream& out_;
    bool failures_ = false;  // an endpoint failed inside UCT's progress
    // Called every 1024th poll.
    btl::util::WatchPace check_pace_{std::chrono::milliseconds(100), 1};
};

}  // namespace transit::uct
