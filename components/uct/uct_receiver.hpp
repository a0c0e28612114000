// The receive side of a uct module: UCT's AM handler, which hands a plain
// message with nothing queued before it straight to the tag table from UCT's
// own buffer and copies anything else into the receive ring, and the
// delivery of what waits in the ring after UCT's progress returns (messages,
// one-sided requests and replies, goodbyes, hellos, a peer outside the job's
// join and welcome).
//
// Owns: the receive ring, the count of receptions dropped (larger than the
// ring takes: protocol errors) and the re-entry guard raised around a
// delivery from inside UCT's progress.  Borrows: the module (the receive
// callbacks name it; its error reports and attention flag), the tag table,
// the module's job endpoints (by rank), the peers outside the job, the
// target's side, the operations in flight and the goodbyes.
#pragma once

#include <uct/api/uct.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "transit/btl/am_table.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctOutside;
class UctTarget;
class UctOps;
class UctFarewells;

class UctReceiver {
  public:
    UctReceiver(UctModule& module, btl::AmTable& am_table,
                std::vector<std::unique_ptr<UctEndpoint>>& by_rank, UctOutside& outside,
                UctTarget& target, UctOps& ops, UctFarewells& farewells) noexcept
        : module_(module),
          am_table_(am_table),
          by_rank_(by_rank),
          outside_(outside),
          target_(target),
          ops_(ops),
          farewells_(farewells) {}

    // The ring's slots: `slots` of `slot_size` bytes (larger messages wait beside them).
    void setup(std::size_t slots, std::size_t slot_size) { ring_.setup(slots, slot_size); }

    // UCT's AM handler: arg is the receiver.
    static ucs_status_t am_cb(void* arg, void* data, std::size_t length, unsigned flags) noexcept;
    // What waits in the ring, delivered in order (from attend(), never inside
    // UCT's progress): the number delivered.
    int deliver() noexcept;
    bool waiting() const noexcept { return !ring_.empty(); }
    // A handler runs inside uct_worker_progress: no re-entry.
    bool in_callback() const noexcept { return in_callback_; }
    // Receptions were dropped since the last report_dropped().
    bool dropped() const noexcept { return dropped_ > 0; }
    // Reports the drops (one error for all of them).
    void report_dropped() noexcept;
    const RecvRing& ring() const noexcept { return ring_; }

  private:
    // A plain message (not a one-sided request, which may need a reply slot)
    // straight to its callback; false for anything else.
    bool deliver_now(const std::byte* data, std::size_t length) noexcept;
    // Kept out of am_cb, so the direct delivery stays a short call.
    [[gnu::noinline]] void queue_reception(const void* data, std::size_t length) noexcept;
    void dispatch(const WireHeader& h, const std::byte* body, std::size_t len) noexcept;
    void drop_unregistered(Rank source) noexcept;
    // One message from the ring; false, leaving it there, when it is a
    // request that could need a reply slot and none is free.
    bool handle(const std::byte* data, std::size_t length) noexcept;

    UctModule& module_;
    btl::AmTable& am_table_;
    std::vector<std::unique_ptr<UctEndpoint>>& by_rank_;
    UctOutside& outside_;
    UctTarget& target_;
    UctOps& ops_;
    UctFarewells& farewells_;
    bool in_callback_ = false;  // a handler runs inside uct_worker_progress: no re-entry
    std::size_t dropped_ = 0;   // receptions larger than a slot (protocol errors)
    RecvRing ring_;
};

}  // namespace transit::uct
