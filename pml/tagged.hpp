// Tagged messages: matching, eager and rendezvous.
//
//   tagged_send.cpp  the sender: eager (sendi, else one packed descriptor) and
//                    the start of a rendezvous
//   tagged_recv.cpp  the receiver: sequence order, matching against posted
//                    receives, the unexpected queue and its throttle
//   rendezvous.cpp   both halves of the rendezvous: the rendezvous receiver
//                    (start_rndv: gets, or an ack asking for fragments), the
//                    sender's fragment pump, the split (sender puts, receiver
//                    gets), fin
//
// Active messages reuse the rendezvous (start_send, start_rndv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pml/core.hpp"
#include "pml/headers.hpp"
#include "pml/outbox.hpp"

namespace transit::pml {

class Tagged {
  public:
    Tagged(Core& core, Outbox& outbox) : c_(core), outbox_(outbox) {}

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
    // A receive from a known peer with nothing unexpected from it is posted
    // inline; wildcards, iovecs and the rest take the full path.
    Status irecv(Rank src, std::uint32_t tag, void* buf, const iovec* iov, std::size_t count,
                 std::size_t len, Req*& out, void* user) noexcept {
        Peer* p = iov ? nullptr : c_.peers.peer(src);
        if (p && p->unexpected.empty() && !p->failed) [[likely]] {
            if (Req* r = c_.new_req(Req::Kind::recv, user)) [[likely]] {
                set_recv(r, src, tag, buf, nullptr, 0, len);
                post(r, p->posted);
                out = r;
                return Status::success;
            }
        }
        return irecv_full(src, tag, buf, iov, count, len, out, user);
    }
    Status cancel(Req* r) noexcept;
    bool iprobe(Rank src, std::uint32_t tag, RequestStatus& st) noexcept;

    // Largest message that goes to p eagerly.
    static std::size_t eager_message_limit(const Peer& p) noexcept {
        return p.ep->eager_limit > sizeof(wire::MatchHdr)
                   ? p.ep->eager_limit - sizeof(wire::MatchHdr)
                   : 0;
    }
    // How often this process asked a sender to stop sending eagerly.
    std::uint64_t throttles_sent() const noexcept { return throttles_sent_; }

    // For active messages: a send of r (rendezvous), a matched receive's rendezvous.
    Status start_send(Req* r, Path path) noexcept;
    void start_rndv(Req* r, Peer* p, const wire::RndvHdr& h, const std::byte* handle) noexcept;

    // For the outbox: a descriptor the btl refused for good.
    void report_lost_message(const PendingDesc& pd, Status s) noexcept;
    void fail_unsent_rndv(const PendingDesc& pd, Status s) noexcept;

    // For the engine's progress: the sends and gets waiting for room.
    int drain() noexcept;
    // A dynamic peer's record goes (PeerTable::erase): no list here names it.
    void forget(Peer* p) noexcept;
    bool busy() const noexcept { return !pending_sends_.empty() || !pending_gets_.empty(); }
    // For failure handling: r leaves the queues.
    void unqueue(Req* r) noexcept {
        if (!r->queued) return;
        (r->kind == Req::Kind::send ? pending_sends_ : pending_gets_).erase(r);
        r->queued = false;
    }

    // Received messages (the engine's dispatch).  `from`: the peer whose
    // endpoint the message came over (any_rank: the transport did not say).
    void on_match(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
        wire::MatchHdr h;
        std::memcpy(&h, bytes, sizeof h);
        match(h, bytes, len, tag);
    }
    // A match message of a peer outside the job, whose header names it by its
    // rank in its own job: `src` is our id for it.  The header in `bytes` is
    // left as it came (a kept copy is renamed): they are the transport's, and
    // a store into the sender's line of a fast box would make the sender wait
    // for it to come back before its next message.
    void on_match_from(Rank src, const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept {
        wire::MatchHdr h;
        std::memcpy(&h, bytes, sizeof h);
        h.src = src;
        match(h, bytes, len, tag);
    }
    void on_rndv(const std::byte* b, std::size_t n) noexcept;
    void on_ack(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_frag(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_fin(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_split(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_split_fin(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_frag_abort(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_throttle(const std::byte* b, std::size_t n) noexcept;
    // A peer outside the job leaves (wire::bye, a MatchHdr): heard in its turn.
    void on_bye(const std::byte* b) noexcept;

  private:
    // sending (tagged_send.cpp)
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
    bool advance_send(Req* r) noexcept;
    void enqueue_send(Req* r) noexcept {
        if (!r->queued) {
            r->queued = true;
            pending_sends_.push_back(r);
            c_.has_pending = true;
        }
    }

    // receiving (tagged_recv.cpp)
    Status irecv_full(Rank src, std::uint32_t tag, void* buf, const iovec* iov, std::size_t count,
                      std::size_t len, Req*& out, void* user) noexcept;
    // The receive's filters and destination (capacity: len, or the iovec's sum).
    static void set_recv(Req* r, Rank src, std::uint32_t tag, void* buf, const iovec* iov,
                         std::size_t count, std::size_t len) noexcept {
        r->src_filter = src;
        r->tag_filter = tag;
        r->buf = buf;
        r->iov = iov;
        r->iov_count = count;
        r->capacity = len;
        if (iov) {
            r->capacity = 0;
            for (std::size_t i = 0; i < count; ++i) r->capacity += iov[i].iov_len;
        }
    }
    void post(Req* r, List<Req>& list) noexcept {
        r->post_seq = post_seq_++;
        r->posted = true;
        list.push_back(r);
    }
    // inline, defined in tagged_recv.cpp (its only user)
    void match(const wire::MatchHdr& h, const std::byte* bytes, std::size_t len,
               btl::Tag tag) noexcept;
    inline void deliver_tagged(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                               std::size_t len, btl::Tag tag) noexcept;
    void deliver_unexpected(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                            std::size_t len, btl::Tag tag) noexcept;
    void replay_out_of_order(Peer* p) noexcept;
    [[gnu::noinline]] void hold(Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                                std::size_t len, btl::Tag tag) noexcept;
    void hear_bye(Peer* p) noexcept;
    Req* match_posted(Peer* p, std::uint32_t tag) noexcept;
    void start_matched(Req* r, Peer* p, const wire::MatchHdr& h, const std::byte* bytes,
                       std::size_t len, btl::Tag tag) noexcept;
    void recv_data(Req* r, std::size_t offset, const std::byte* data, std::size_t len) noexcept;
    void store_unexpected(Peer* p, const std::byte* bytes, std::size_t len, btl::Tag tag,
                          std::uint32_t mtag, std::uint32_t seq, std::size_t total) noexcept;
    RawMsg* find_unexpected(Rank src, std::uint32_t tag, Peer*& from) noexcept;
    void check_throttle() noexcept;

    // rendezvous (rendezvous.cpp)
    bool send_rndv_header(Req* r) noexcept;
    void prepare_rdma(Req* r) noexcept;
    bool pump_frags(Req* r) noexcept;
    void end_frags(Req* r) noexcept;
    static void frag_done(btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) noexcept;
    void fall_back_to_frags(Req* r) noexcept;
    bool offer_split(Req* r, std::size_t handle_len, bool put_all) noexcept;
    bool issue_puts(Req* r) noexcept;
    void finish_puts(Req* r) noexcept;
    bool issue_gets(Req* r) noexcept;
    void finish_get(Req* r) noexcept;
    enum class RdmaIssue : std::uint8_t { issued, blocked, refused };
    RdmaIssue issue_rdma(Req* r) noexcept;
    static void rdma_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                          void* context, void* cbdata, Status s) noexcept;

    Core& c_;
    Outbox& outbox_;
    std::vector<Peer*> unexpected_peers_;  // peers that ever held unexpected messages
    List<Req> any_posted_;
    std::uint64_t post_seq_ = 0;
    std::uint64_t arrival_ = 0;
    std::size_t unexpected_bytes_ = 0;
    bool any_throttling_ = false;
    std::uint64_t throttles_sent_ = 0;
    List<Req> pending_sends_;
    List<Req> pending_gets_;
};

}  // namespace transit::pml
