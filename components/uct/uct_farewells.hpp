// The goodbyes of a uct module: a process leaving tells each job peer (and
// each peer outside the job) with a header-only goodbye, so that its exit is
// a departure rather than a loss; a peer told goodbye and added again hears
// hello, which takes the goodbye back.  Goodbyes and hellos carry a count, so
// a hello that overtakes a goodbye (over another connection) wins.
//
// Owns: per job rank, what outlives its endpoint: the goodbyes said to it and
// the count of the last hello heard from it.  Borrows: the module (its name,
// UCT's progress, the wire header an endpoint's messages carry) and its send
// queue (what waits for a peer's FIFO goes before the goodbye).
#pragma once

#include <uct/api/uct.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "transit/log.hpp"
#include "uct_endpoint.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctSendQueue;

class UctFarewells {
  public:
    UctFarewells(UctModule& module, UctSendQueue& send_queue, const log::Stream& out) noexcept
        : module_(module), send_queue_(send_queue), out_(out) {}

    void setup(std::size_t ranks) { farewells_.resize(ranks); }
    // Tells the peer we are leaving: pushed out with a bounded wait (a peer
    // that no longer listens must not hold up finalize).
    void say_goodbye(UctEndpoint& e) noexcept;
    // A job peer added (again): one told goodbye hears hello.
    void added(UctEndpoint& e) noexcept {
        if (farewells_[e.peer()].owe_hello) [[unlikely]]
            say_hello(e);
    }
    // A job peer's goodbye counts unless its hello (with that count) came first.
    bool goodbye_counts(Rank source, btl::Tag tag) const noexcept {
        return farewells_[source].heard != tag;
    }
    void heard_hello(Rank source, btl::Tag tag) noexcept { farewells_[source].heard = tag; }

  private:
    // Per rank.
    struct Farewells {
        std::uint8_t said = 0;    // goodbyes said to it (the count they carry)
        bool owe_hello = false;   // said goodbye, not yet taken back
        std::int16_t heard = -1;  // count of its last hello, -1: none
    };

    // Tells a peer we said goodbye to that we added it again.
    void say_hello(UctEndpoint& e) noexcept;
    // A header-only message (goodbye, hello), retried while UCT has no room
    // until `deadline`.
    ucs_status_t send_header(UctEndpoint& e, const WireHeader& h,
                             std::chrono::steady_clock::time_point deadline) noexcept;

    UctModule& module_;
    UctSendQueue& send_queue_;
    const log::Stream& out_;
    std::vector<Farewells> farewells_;
};

}  // namespace transit::uct
