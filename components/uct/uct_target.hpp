// The target side of a uct module's one-sided operations: a peer's put, get
// or atomic, sent as an active message, is checked against the registrations
// (key, bounds, access), performed here and answered; a refusal is answered
// too, with its status, so the initiator's operation ends with that error.
//
// Owns: the pool of replies, the replies waiting for room in UCT's queues
// (sent in order from the module's progress) and the log of refused requests.
// Borrows: the module (its endpoints and its progress
// membership), the registrations every module of the component shares, and
// the module's log stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "transit/btl/util/refusal_log.hpp"
#include "transit/log.hpp"
#include "uct_frag.hpp"
#include "uct_regions.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctModule;
class UctSender;

class UctTarget {
  public:
    UctTarget(UctModule& module, UctSender& sender, Regions& regions,
              const log::Stream& out) noexcept
        : module_(module), sender_(sender), regions_(regions), out_(out) {}

    // `max_rdma_ops`: the module's operation slots; `chunk`: the data bytes
    // one piece of a put or get carries.
    void setup(std::size_t max_rdma_ops, std::size_t chunk);

    // A request needs a reply slot: false leaves it in the receive ring.
    bool can_answer() const noexcept { return replies_.available() != 0; }
    // Performs and answers a request of `kind` (put, get_req, amo_req) from
    // `source`; can_answer() was true.
    void serve(Kind kind, Rank source, std::span<const std::byte> body) noexcept;
    // From attend(): the replies that waited, in order, until UCT has no room.
    int retry() noexcept;
    bool waiting() const noexcept { return !waiting_replies_.empty(); }
    std::size_t replies_in_use() const noexcept { return replies_.size() - replies_.available(); }
    // The peer goes: its waiting replies are dropped by the next retry.
    void forget(Rank peer) noexcept;

  private:
    // Whether a peer's key names a live registration covering the range with
    // that access: success, or the refusal's status.
    Status permits(const btl::util::RegistrationKey& key, std::uint64_t address,
                   std::uint64_t length, std::uint32_t access) const noexcept;
    // Each answers the request in `body`, which is answerable(): served, or
    // refused with the reason in the reply.
    void on_put(Rank source, std::span<const std::byte> body) noexcept;
    void on_get(Rank source, std::span<const std::byte> body) noexcept;
    void on_atomic(Rank source, std::span<const std::byte> body) noexcept;
    // A peer's put, get or atomic refused (wrong key, outside the region, not
    // that access): 5 logged per 10 s, the rest counted.
    void refused(const char* what, Rank source, std::uint64_t address, Status why) noexcept;
    Status send_reply(PendingReply& r) noexcept;
    void reply(PendingReply& r) noexcept;

    UctModule& module_;
    UctSender& sender_;
    Regions& regions_;
    const log::Stream& out_;
    std::size_t chunk_ = 0;
    Pool<PendingReply> replies_;
    FifoQueue<PendingReply> waiting_replies_;
    btl::util::RefusalLog rdma_refusals_{"one-sided requests"};
};

}  // namespace transit::uct
