// The send side of the pml: a send request's life from the call to its end.
// Eager (sendi, else one packed descriptor) or rendezvous: the header, then
// what the receiver's answer asks for (fragments on ack, puts on split) until
// fin; a send the transport refused for good, the peer's throttle, and the
// sends waiting for room.  Tagged sends and large active messages (start_send)
// both run here; the receive side is Receiver (receiver.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "pml/core.hpp"
#include "pml/headers.hpp"
#include "pml/outbox.hpp"

namespace transit::pml {

class Sender {
  public:
    Sender(Core& core, Outbox& outbox) : c_(core), outbox_(outbox) {}

    // How a send starts: `choose` by size and throttle, `eager` when the
    // caller found it eager and sendi refused it already, `rndv` always.
    enum class Path : std::uint8_t { choose, eager, rndv };

    // A small contiguous send to a connected peer is tried inline
    // (send_inline); everything else, and anything the transport cannot take
    // at once, goes through the full path.
    Status isend(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count, const void* buf,
                 std::size_t len, Req*& out, void* user) noexcept {
        if (Peer* p = iov ? nullptr : eager_peer(dst, len)) [[likely]] {
            if (send_inline(p, tag, buf, len, out, user)) return Status::completed;
            return isend_full(p, tag, nullptr, 0, buf, len, out, user, Path::eager);
        }
        return isend_full(dst, tag, iov, count, buf, len, out, user);
    }
    // A blocking send: one the transport takes at once needs no request
    // (success, out null); else as isend.
    Status send(Rank dst, std::uint32_t tag, const void* buf, std::size_t len, Req*& out) noexcept {
        out = nullptr;
        if (Peer* p = eager_peer(dst, len)) [[likely]] {
            if (sendi_now(p, tag, buf, len)) [[likely]]
                return Status::success;
            return isend_full(p, tag, nullptr, 0, buf, len, out, nullptr, Path::eager);
        }
        return isend_full(dst, tag, nullptr, 0, buf, len, out, nullptr);
    }

    // Largest message that goes to p eagerly.
    static std::size_t eager_message_limit(const Peer& p) noexcept {
        return p.ep->eager_limit > sizeof(wire::MatchHdr)
                   ? p.ep->eager_limit - sizeof(wire::MatchHdr)
                   : 0;
    }

    // For active messages: a send of r whose fields are set (rendezvous).
    Status start_send(Req* r, Path path) noexcept;

    // For the outbox: a descriptor the btl refused for good.
    void report_lost_message(const PendingDesc& pd, Status s) noexcept;
    void fail_unsent_rndv(const PendingDesc& pd, Status s) noexcept;

    // For the engine's progress: the sends waiting for room.
    int drain() noexcept;
    bool busy() const noexcept { return !pending_sends_.empty(); }
    // For failure handling: r leaves the queue.
    void unqueue(Req* r) noexcept {
        if (!r->queued) return;
        pending_sends_.erase(r);
        r->queued = false;
    }

    // The receiver's answers to our rendezvous headers and its throttle
    // (the engine's dispatch).  `from`: the peer whose endpoint the message
    // came over (any_rank: the transport did not say).
    void on_ack(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_split(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_fin(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_throttle(const std::byte* b, std::size_t n) noexcept;

  private:
    static bool eager_fits(const Peer* p, std::size_t len) noexcept {
        return !p->throttled && len + sizeof(wire::MatchHdr) <= p->ep->eager_limit;
    }
    // The peer, when a message of len bytes can go to it eagerly right now.
    Peer* eager_peer(Rank dst, std::size_t len) noexcept {
        Peer* p = c_.peers.peer(dst);
        return p && p->ep && !p->failed && eager_fits(p, len) ? p : nullptr;
    }
    Status isend_full(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count,
                      const void* buf, std::size_t len, Req*& out, void* user) noexcept;
    Status isend_full(Peer* p, std::uint32_t tag, const iovec* iov, std::size_t count,
                      const void* buf, std::size_t len, Req*& out, void* user, Path path) noexcept;
    bool send_inline(Peer* p, std::uint32_t tag, const void* buf, std::size_t len, Req*& out,
                     void* user) noexcept;
    bool sendi_now(Peer* p, std::uint32_t tag, const void* buf, std::size_t len) noexcept;
    bool send_eager(Req* r, bool try_sendi) noexcept;
    Status start_rndv_send(Req* r) noexcept;
    bool advance_send(Req* r) noexcept;
    void enqueue_send(Req* r) noexcept {
        if (!r->queued) {
            r->queued = true;
            pending_sends_.push_back(r);
            c_.has_pending = true;
        }
    }

    // the rendezvous: header, fragments (on ack), split puts (on split)
    void prepare_rdma(Req* r) noexcept;
    bool send_rndv_header(Req* r) noexcept;
    bool pump_frags(Req* r) noexcept;
    static void frag_done(btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) noexcept;
    void end_frags(Req* r) noexcept;
    bool issue_puts(Req* r) noexcept;
    static void put_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                         void* context, void* cbdata, Status s) noexcept;
    void finish_puts(Req* r) noexcept;

    Core& c_;
    Outbox& outbox_;
    List<Req> pending_sends_;
};

}  // namespace transit::pml
