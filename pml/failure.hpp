// Peer failures: a transport reports a peer gone (its process died, its
// connection broke), or the launcher does; every request that waits on that
// peer completes with Status::peer_failed and new operations to it fail at
// once, so nothing hangs.
//
// The btl's error callback may run anywhere inside the btl (in its progress,
// or inside a send we are making), so it only marks the peer.  The requests
// are failed from the engine's progress (handle), a point where no pml loop
// is walking them.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

#include "pml/core.hpp"
#include "transit/runtime.hpp"

namespace transit::pml {

class Outbox;
class Receiver;
class Sender;
class ActiveMessages;
class OneSided;

class Failure {
  public:
    Failure(Core& core, rt::Runtime& runtime, Outbox& outbox, Sender& sender, Receiver& receiver,
            ActiveMessages& am, OneSided& osc)
        : c_(core),
          runtime_(runtime),
          outbox_(outbox),
          sender_(sender),
          receiver_(receiver),
          am_(am),
          osc_(osc) {}

    // The btl's error callback (cbdata: this).
    static void on_btl_error(btl::Module* m, std::uint32_t flags, Rank peer, const char* info,
                             void* cbdata) noexcept;
    // The launcher's word, polled from progress at low priority (self: this).
    static int check_launcher(void* self) noexcept;
    // A peer's control messages were refused for good (see failure.cpp).
    void control_refused(Peer* p, Status s) noexcept;

    // Failed peers whose requests still wait to be failed.
    bool pending() const noexcept { return to_handle_; }
    // Failed peers are looked at again at the next progress (a lingering
    // one's time ran out: release_gone_peers releases it).
    void recheck() noexcept {
        to_handle_ = true;
        c_.has_pending = true;
    }
    void transport_lost(Peer* p) noexcept;
    void handle() noexcept;
    // Marks the peer failed; its requests end at the next handle().
    void declare_failed(Peer* p, const char* info) noexcept;

  private:
    void mark_failed(Rank r, const char* info) noexcept;
    void drop_queued_to(Peer* p) noexcept;
    void fail_peer_requests(Peer* p) noexcept;
    void fail_req(Req* r) noexcept;

    Core& c_;
    rt::Runtime& runtime_;
    Outbox& outbox_;
    Sender& sender_;
    Receiver& receiver_;
    ActiveMessages& am_;
    OneSided& osc_;
    bool to_handle_ = false;     // a peer was marked failed; progress cleans up
    std::size_t lost_seen_ = 0;  // of the runtime's lost_ranks()
    std::optional<std::chrono::steady_clock::time_point> launcher_grace_end_;
};

}  // namespace transit::pml
