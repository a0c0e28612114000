// The receive side of the pml: posted receives, matching in each peer's
// sequence order, the unexpected queue and its throttle, and a receive
// request's life to its end: eager data copied, or the rendezvous answered
// (gets and fin, an ack asking for fragments, or a split).  A large active
// message's target runs its rendezvous here too (start_rndv); the send side is
// Sender (sender.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pml/core.hpp"
#include "pml/headers.hpp"
#include "pml/outbox.hpp"

namespace transit::pml {

class Receiver {
  public:
    Receiver(Core& core, Outbox& outbox) : c_(core), outbox_(outbox) {}

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

    // How often this process asked a sender to stop sending eagerly.
    std::uint64_t throttles_sent() const noexcept { return throttles_sent_; }

    // For active messages: a matched receive's rendezvous.
    void start_rndv(Req* r, Peer* p, const wire::RndvHdr& h, const std::byte* handle) noexcept;

    // For the engine's progress: the gets waiting for room.
    int drain() noexcept;
    bool busy() const noexcept { return !pending_gets_.empty(); }
    // For failure handling: r leaves the queue.
    void unqueue(Req* r) noexcept {
        if (!r->queued) return;
        pending_gets_.erase(r);
        r->queued = false;
    }
    // A dynamic peer's record goes (PeerTable::erase): no list here names it.
    void forget(Peer* p) noexcept;

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
    void on_frag(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_frag_abort(const std::byte* b, std::size_t n, Rank from) noexcept;
    void on_split_fin(const std::byte* b, std::size_t n, Rank from) noexcept;
    // A peer outside the job leaves (wire::bye, a MatchHdr): heard in its turn.
    void on_bye(const std::byte* b) noexcept;

  private:
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

    // matching, in each peer's sequence order
    // inline, defined in receiver.cpp (its only user)
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

    // the unexpected queue and its budget
    void store_unexpected(Peer* p, const std::byte* bytes, std::size_t len, btl::Tag tag,
                          std::uint32_t mtag, std::uint32_t seq, std::size_t total) noexcept;
    void throttle_sender(Peer* p) noexcept;
    RawMsg* find_unexpected(Rank src, std::uint32_t tag, Peer*& from) noexcept;
    void check_throttle() noexcept;

    // the rendezvous: gets (and a split), or an ack asking for fragments
    bool start_gets(Req* r, Peer* sp, const wire::RndvHdr& h, const std::byte* handle) noexcept;
    void fall_back_to_frags(Req* r) noexcept;
    bool offer_split(Req* r, std::size_t handle_len, bool put_all) noexcept;
    bool issue_gets(Req* r) noexcept;
    void queue_gets(Req* r) noexcept {
        r->queued = true;
        pending_gets_.push_back(r);
        c_.has_pending = true;
    }
    static void get_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                         void* context, void* cbdata, Status s) noexcept;
    void finish_get(Req* r) noexcept;

    Core& c_;
    Outbox& outbox_;
    std::vector<Peer*> unexpected_peers_;  // peers that ever held unexpected messages
    List<Req> any_posted_;
    std::uint64_t post_seq_ = 0;
    std::uint64_t arrival_ = 0;
    std::size_t unexpected_bytes_ = 0;
    bool any_throttling_ = false;
    std::uint64_t throttles_sent_ = 0;
    List<Req> pending_gets_;
};

}  // namespace transit::pml
