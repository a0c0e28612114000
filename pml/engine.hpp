// The pml engine: everything behind transit::Context.  One object per process,
// single-threaded (the progress thread, when enabled, takes a lock around it).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bml/r2.hpp"
#include "framework/btl_framework.hpp"
#include "pml/pools.hpp"
#include "pml/remote_key.hpp"
#include "pml/wire.hpp"
#include "transit/btl/types.hpp"
#include "transit/log_limiter.hpp"
#include "transit/transit.hpp"

namespace transit::pml {

// Registers the pml's parameters (for transit_info; the engine does it itself too).
void register_params();

struct Peer;

// Every request, send or receive, user or internal.
struct Req : Request {
    enum class Kind : std::uint8_t { send, recv };
    enum class Stage : std::uint8_t { none, eager, rndv_hdr, frags, gets, puts, done };

    Req* next = nullptr;
    Req* prev = nullptr;
    Kind kind = Kind::send;
    Stage stage = Stage::done;  // done while free too: a peer failure scans for live ones
    bool internal = false;      // no user handle: released by the engine on completion
    bool matched = false;
    bool posted = false;  // on a posted-receive list
    bool is_am = false;
    bool queued = false;   // on pending_sends_ / pending_gets_
    bool issuing = false;  // inside pump_frags / issue_gets: callbacks must not complete it
    Peer* peer = nullptr;  // for sends; the matched peer for receives
    std::uint32_t tag = 0;
    std::uint32_t seq = 0;
    std::uint64_t post_seq = 0;

    // receive side
    Rank src_filter = any_rank;
    std::uint32_t tag_filter = 0;
    void* buf = nullptr;  // contiguous buffer, or null when iov is used
    const iovec* iov = nullptr;
    std::size_t iov_count = 0;
    std::size_t capacity = 0;
    std::size_t received = 0;  // bytes of the message accounted for (placed or dropped)
    // The message's length; for a receive, the bytes it completes at (fewer
    // when the sender gave up: frag_abort).
    std::size_t total = 0;
    std::uint64_t remote_req = 0;  // the peer's request (sreq or rreq)
    std::uint64_t remote_addr = 0;
    // Rdma in flight: gets (receiver) or the split puts (sender) of [rdma_offset, rdma_end).
    std::uint32_t rdma_pending = 0;
    std::size_t rdma_offset = 0;
    std::size_t rdma_end = 0;
    // A split rendezvous: the receiver still waits for the sender's half
    // (split_wait) and has its own half in (own_done).
    bool split_wait = false;
    bool own_done = false;
    bml::BtlRef rdma{};
    btl::RegistrationHandle* local_handle = nullptr;
    btl::Module* handle_module = nullptr;
    std::uint16_t remote_handle_len = 0;
    std::uint32_t rdma_component = 0;
    std::uint32_t am_header_len = 0;  // sender of an am: user header after the handle bytes
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> remote_handle{};

    // active messages
    AmCompletionFn am_done = nullptr;
    void* am_user = nullptr;
    CounterRef am_target_counter = 0;
    std::uint64_t am_completion_token = 0;
    Counter* origin_counter = nullptr;
    std::uint32_t am_handler = 0;

    // send side
    btl::Convertor conv;
    std::uint32_t frags_out = 0;
    std::size_t frag_bytes_sent = 0;  // payload of the fragments the btls took

    // A recycled request, as new.
    void reset(Kind k, void* user_data) noexcept {
        kind = k;
        stage = Stage::none;
        user = user_data;
        internal = matched = posted = is_am = queued = issuing = false;
        received = total = 0;
        frags_out = rdma_pending = 0;
        frag_bytes_sent = 0;
        split_wait = own_done = false;
        local_handle = nullptr;
        handle_module = nullptr;
        origin_counter = nullptr;
        am_done = nullptr;
        am_target_counter = 0;
        am_completion_token = 0;
        am_header_len = 0;
        remote_handle_len = 0;
        remote_addr = 0;
        rdma_component = 0;
        status_ = RequestStatus{};
        reset_done();
    }
    void set_done() noexcept { done_.store(true, std::memory_order_release); }
    void reset_done() noexcept { done_.store(false, std::memory_order_relaxed); }
    RequestStatus& st() noexcept { return status_; }
};

// A message kept for later: unexpected, out of order, or a queued control message.
struct RawMsg {
    RawMsg* next = nullptr;
    RawMsg* prev = nullptr;
    btl::Tag btl_tag = 0;
    Rank src = any_rank;  // sender (unexpected) or destination (queued)
    std::uint32_t tag = 0;
    std::uint32_t seq = 0;
    std::uint64_t arrival = 0;
    std::size_t total = 0;  // message length (for probe)
    std::byte* data = nullptr;
    std::size_t len = 0;
    int cls = 0;
};

struct Peer {
    Rank rank = any_rank;
    bml::Endpoint* ep = nullptr;  // built on first send
    std::uint32_t send_seq = 0;
    std::uint32_t expect_seq = 0;
    List<Req> posted;
    List<RawMsg> unexpected;
    List<RawMsg> out_of_order;
    bool throttled = false;   // the peer asked us to stop sending eagerly
    bool throttling = false;  // we asked the peer to stop
    bool has_unexpected_listed = false;
    std::uint64_t osc_outstanding = 0;
    std::uint64_t osc_emulated = 0;  // the part of osc_outstanding the target answers
    bool failed = false;             // a transport reported it gone
    bool failure_handled = false;    // its requests were failed
    bool osc_lost = false;           // one-sided operations to it were lost
    // The first one-sided operation to it that its target refused since the
    // last flush of it (returned, then cleared, by flush and flush_all).
    Status osc_refused = Status::success;
    // Completion counters of active messages sent to it, with how many
    // completions each still waits for: lost if the peer fails.
    std::vector<std::pair<Counter*, std::uint64_t>> owed_completions;
    // Since when its transport has refused our control messages for good with
    // none sent in between: past settings' grace, the peer is failed.
    std::optional<std::chrono::steady_clock::time_point> control_refused_since;
};

// One-sided operation in flight over a btl.
struct OscOp {
    OscOp* next = nullptr;
    Peer* peer = nullptr;
    btl::Module* module = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    // A fetching atomic's old value lands here first: the caller's is written
    // only once the target applied the operation.
    std::uint64_t result = 0;
    std::uint64_t* fetched = nullptr;
    bool bits32 = false;
};

struct AmHandler {
    AmHeaderFn header = nullptr;
    AmCompletionFn completion = nullptr;
    void* arg = nullptr;
};

// A queued descriptor the btl refused with out_of_resource.
struct PendingDesc {
    Rank rank;
    btl::Module* module;
    btl::Endpoint* endpoint;
    btl::Descriptor* desc;
    btl::Tag tag;
    // A control message whose sender kept no copy (it was queued here, so
    // send_ctrlv counted it sent): refused for good, it is copied back to
    // pending_ctrl_ and sent again, like one refused at once.
    bool control = false;
};

struct Settings {
    std::size_t unexpected_limit = 64u << 20;
    std::uint64_t wait_spin_count = 2000;
    bool progress_thread = false;
    std::size_t rdma_threshold = 0;
    std::size_t rndv_split_min = 8u << 10;
    std::chrono::milliseconds launcher_grace{1000};
    std::chrono::milliseconds control_refusal_grace{2000};
    int verbose = 0;
};

class Engine {
  public:
    Engine(std::unique_ptr<rt::Runtime> runtime);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    void set_context(Context* ctx) noexcept { ctx_ = ctx; }
    void shutdown() noexcept;

    Rank rank() const noexcept { return rank_; }
    std::uint32_t size() const noexcept { return size_; }
    rt::Runtime& runtime() noexcept { return *runtime_; }
    const Settings& settings() const noexcept { return settings_; }
    // How often this process asked a sender to stop sending eagerly.
    std::uint64_t throttles_sent() const noexcept { return throttles_sent_; }
    // Modules that carry first fragments to `peer` in turn (for tests and tools).
    std::size_t eager_paths(Rank peer) noexcept {
        Peer* p = send_peer(peer);
        return p ? p->ep->eager_equal : 0;
    }

    // The bml's endpoint for `peer`, built if needed (for tests and tools).
    const bml::Endpoint* peer_endpoint(Rank peer) noexcept {
        Peer* p = send_peer(peer);
        return p ? p->ep : nullptr;
    }

    // Largest tagged message that goes to `peer` eagerly (for tests and tools).
    std::size_t eager_message_limit(Rank peer) noexcept {
        Peer* p = send_peer(peer);
        return p && p->ep->eager_limit > sizeof(wire::MatchHdr)
                   ? p->ep->eager_limit - sizeof(wire::MatchHdr)
                   : 0;
    }

    int progress() noexcept {
        int n = progress_.progress();
        if (has_pending_) n += drain_pending();
        return n;
    }
    // Progress until pred() holds: spin, then yield between polls.
    template <typename Pred>
    void wait_until(Pred pred) noexcept {
        std::uint64_t idle = 0;
        while (!pred()) {
            if (progress() > 0)
                idle = 0;
            else if (++idle > settings_.wait_spin_count)
                yield();
        }
    }
    // Held by every API call when the progress thread runs; empty (no lock
    // taken) otherwise.  Recursive: handlers run under it and may call the API.
    std::unique_lock<std::recursive_mutex> lock() noexcept {
        if (!threaded_) [[likely]]
            return {};
        return std::unique_lock<std::recursive_mutex>(mutex_);
    }

    // tagged
    // A small contiguous send to a connected peer is tried inline (send_inline);
    // everything else, and anything the transport cannot take at once, goes
    // through the full path.
    Status isend(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count, const void* buf,
                 std::size_t len, Req*& out, void* user) noexcept {
        if (Peer* p = iov ? nullptr : eager_peer(dst, len)) [[likely]]
            if (send_inline(p, tag, buf, len, out, user)) return Status::completed;
        return isend_full(dst, tag, iov, count, buf, len, out, user);
    }
    // A blocking send the transport takes at once needs no request at all.
    bool send_now(Rank dst, std::uint32_t tag, const void* buf, std::size_t len) noexcept {
        Peer* p = eager_peer(dst, len);
        return p && sendi_now(p, tag, buf, len);
    }
    // The peer, when a message of len bytes can go to it eagerly right now.
    Peer* eager_peer(Rank dst, std::size_t len) const noexcept {
        Peer* p = dst < size_ ? peers_[dst].get() : nullptr;
        return p && p->ep && !p->failed && !p->throttled &&
                       len + sizeof(wire::MatchHdr) <= p->ep->eager_limit
                   ? p
                   : nullptr;
    }
    Status isend_full(Rank dst, std::uint32_t tag, const iovec* iov, std::size_t count,
                      const void* buf, std::size_t len, Req*& out, void* user) noexcept;
    // A receive from a known peer with nothing unexpected from it is posted
    // inline; wildcards, iovecs and the rest take the full path.
    Status irecv(Rank src, std::uint32_t tag, void* buf, const iovec* iov, std::size_t count,
                 std::size_t len, Req*& out, void* user) noexcept {
        Peer* p = !iov && src < size_ ? peers_[src].get() : nullptr;
        if (p && p->unexpected.empty() && !p->failed) [[likely]] {
            if (Req* r = new_req(Req::Kind::recv, user)) [[likely]] {
                set_recv(r, src, tag, buf, nullptr, 0, len);
                post(r, p->posted);
                out = r;
                return Status::success;
            }
        }
        return irecv_full(src, tag, buf, iov, count, len, out, user);
    }
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
    Status cancel(Req* r) noexcept;
    bool iprobe(Rank src, std::uint32_t tag, RequestStatus& st) noexcept;
    void release(Req* r) noexcept {
        r->stage = Req::Stage::done;  // free requests are never live (see handle_failures)
        reqs_.put(r);
    }

    // active messages
    Status register_am(std::uint32_t id, const AmHandler& h);
    Status am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header, const void* data,
                   std::size_t len, const AmCounters& counters) noexcept;

    // one-sided
    Status register_memory(void* base, std::size_t size, RegionImpl*& out);
    Status deregister_memory(RegionImpl* region);
    std::vector<std::byte> pack_key(const RegionImpl* region) const;
    Status unpack_key(std::span<const std::byte> bytes, RemoteKeyImpl*& out);
    bool handle_size_fits(std::uint32_t component, std::size_t len) const noexcept;
    Status rma(bool is_put, Rank dst, void* local, std::size_t len, const RemoteKeyImpl* key,
               std::uint64_t offset) noexcept;
    Status atomic(Rank dst, std::uint8_t op, AtomicWidth width, const RemoteKeyImpl* key,
                  std::uint64_t offset, std::uint64_t operand, std::uint64_t compare,
                  std::uint64_t* fetched) noexcept;
    // One put/get or atomic over one btl with one of the key's handles:
    // success when issued or done, else what the btl said.
    OscOp* new_osc_op(const bml::BtlRef& b, Peer* p) noexcept;
    Status rma_over(const bml::BtlRef& b, Peer* p, bool is_put, void* local, std::size_t len,
                    std::uint64_t raddr, const btl::RegistrationHandle* rh) noexcept;
    Status atomic_over(const bml::BtlRef& b, Peer* p, std::uint8_t op, bool bits32,
                       std::uint64_t raddr, const btl::RegistrationHandle* rh,
                       std::uint64_t operand, std::uint64_t compare,
                       std::uint64_t* fetched) noexcept;
    // The btl's operation (rma_over or atomic_over, in `issue`) with each of
    // the key's handles for its component until one is its own.
    template <typename Issue>
    Status over_each_handle(const bml::BtlRef& b, const RemoteKeyImpl* key, Issue issue) noexcept;
    Status flush(Rank dst) noexcept;
    Status flush_all() noexcept;
    Status barrier() noexcept;
    void* mem_alloc(std::size_t size) noexcept;
    void mem_free(void* p) noexcept;

  private:
    friend struct Handlers;
    void setup();
    void register_params();
    void yield() noexcept;
    int drain_pending() noexcept;
    // Sends a descriptor, or queues it when the btl is out of resources; one
    // refused otherwise ends with its callback (end_desc), and its loss is
    // logged unless the caller sends the message again itself.
    enum class Refusal : std::uint8_t { lost, retried };
    Status post_desc(const PendingDesc& pd, Refusal refusal = Refusal::lost) noexcept;
    void end_desc(const PendingDesc& pd, Status s, Refusal refusal = Refusal::lost) noexcept;
    void report_lost_message(const PendingDesc& pd, Status s) noexcept;
    bool requeue_control(const PendingDesc& pd) noexcept;
    void fail_unsent_rndv(const PendingDesc& pd, Status s) noexcept;
    void settle_completion(Peer* p, Counter* c, bool lost) noexcept;
    void update_pending() noexcept {
        has_pending_ = !pending_desc_.empty() || !pending_ctrl_.empty() ||
                       !pending_sends_.empty() || !pending_gets_.empty() || failures_to_handle_;
    }

    // A received message that cannot be handled: logged, never silently lost
    // (engine.cpp).
    void drop_received(wire::Kind k, const btl::ReceiveDescriptor& d, const char* why) noexcept;
    void malformed(wire::Kind k, std::size_t n, Rank from) noexcept;
    bool log_drop(wire::Kind k) noexcept;
    const char* drop_note(wire::Kind k) const noexcept;
    void report_drops() const noexcept;

    // peer failures (failure.cpp)
    static void on_btl_error(btl::Module* m, std::uint32_t flags, Rank peer, const char* info,
                             void* cbdata) noexcept;
    void mark_failed(Rank r, const char* info) noexcept;
    void declare_failed(Peer* p, const char* info) noexcept;
    void control_refused(Peer* p, Status s) noexcept;
    void control_sent(Peer* p) noexcept {
        if (p) p->control_refused_since.reset();
    }
    static int check_launcher(void* self) noexcept;
    bool peer_failed(Rank r) const noexcept { return r < size_ && peers_[r] && peers_[r]->failed; }
    // Its requests were failed: what it still sends refers to requests that
    // are complete (maybe reused), and to replies already written off.
    bool written_off(Rank r) const noexcept {
        return r < size_ && peers_[r] && peers_[r]->failure_handled;
    }
    void handle_failures() noexcept;
    void fail_peer_requests(Peer* p) noexcept;
    void fail_req(Req* r) noexcept;
    // A transfer of r (fragment, get, put) ended with error s: once r's peer
    // is known gone, that is the cause whatever the transport said, and a
    // request already failed keeps peer_failed.
    void transfer_failed(Req* r, Status s) noexcept {
        if (r->st().status == Status::peer_failed) return;
        r->st().status = r->peer && r->peer->failed ? Status::peer_failed : s;
    }
    void drop_queued_to(Peer* p) noexcept;

    // The per-message helpers are inline: every send and receive runs them,
    // and a call into another translation unit costs more than their bodies.
    Peer* peer(Rank r) noexcept {  // state, no endpoint needed
        Peer* p = r < size_ ? peers_[r].get() : nullptr;
        return p ? p : make_peer(r);
    }
    Peer* send_peer(Rank r) noexcept {  // state with an endpoint
        Peer* p = r < size_ ? peers_[r].get() : nullptr;
        if (p && p->ep) [[likely]]
            return p;
        return connect_peer(r);
    }
    Peer* make_peer(Rank r) noexcept;
    Peer* connect_peer(Rank r) noexcept;
    Req* new_req(Req::Kind k, void* user) noexcept {
        Req* r = reqs_.get();
        if (!r) [[unlikely]]
            return nullptr;
        r->reset(k, user);
        return r;
    }
    void complete(Req* r) noexcept {
        r->stage = Req::Stage::done;
        if (r->local_handle) [[unlikely]] {
            r->handle_module->rdma()->deregister_mem(r->local_handle);
            r->local_handle = nullptr;
        }
        if (r->internal) [[unlikely]]
            complete_internal(r);
        else
            r->set_done();
    }
    void complete_internal(Req* r) noexcept;

    // sending
    Status start_send(Req* r, bool force_rndv) noexcept;
    bool advance_send(Req* r) noexcept;
    void enqueue_send(Req* r) noexcept {
        if (!r->queued) {
            r->queued = true;
            pending_sends_.push_back(r);
            has_pending_ = true;
        }
    }
    void finish_get(Req* r) noexcept;
    bool offer_split(Req* r, std::size_t handle_len) noexcept;
    bool issue_puts(Req* r) noexcept;
    void finish_puts(Req* r) noexcept;
    enum class RdmaIssue { issued, blocked, refused };
    RdmaIssue issue_rdma(Req* r) noexcept;
    static void rdma_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*,
                          void* context, void* cbdata, Status s) noexcept;
    void on_split(const std::byte* b, std::size_t n) noexcept;
    void on_split_fin(const std::byte* b, std::size_t n) noexcept;
    void on_frag_abort(const std::byte* b, std::size_t n) noexcept;
    void fall_back_to_frags(Req* r) noexcept;
    bool send_eager(Req* r) noexcept;
    bool send_inline(Peer* p, std::uint32_t tag, const void* buf, std::size_t len, Req*& out,
                     void* user) noexcept;
    bool sendi_now(Peer* p, std::uint32_t tag, const void* buf, std::size_t len) noexcept;
    bool send_rndv_header(Req* r) noexcept;
    bool pump_frags(Req* r) noexcept;
    void end_frags(Req* r) noexcept;
    void prepare_rdma(Req* r, wire::RndvHdr& h, std::byte* handle) noexcept;
    // Sends a small control message; queues it when the btl is out of resources.
    Status send_ctrl(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                     const void* data = nullptr, std::size_t data_len = 0) noexcept {
        iovec v{const_cast<void*>(data), data_len};
        return send_ctrlv(p, kind, hdr, hdr_len, &v, 1);
    }
    Status send_ctrlv(Peer* p, wire::Kind kind, const void* hdr, std::size_t hdr_len,
                      const iovec* pieces, std::size_t count) noexcept;
    // One message now: success when the btl took it (or queued its descriptor
    // on out_of_resource), out_of_resource when nothing happened, another
    // status when the btl refused it for good (its descriptor ended, end_desc).
    // `refusal`: retried when the caller keeps a copy to send again.
    Status try_send(Peer* p, btl::Tag tag, const void* hdr, std::size_t hdr_len,
                    const iovec* pieces, std::size_t count, Refusal refusal) noexcept;
    std::size_t ctrl_payload_limit(Peer* p) const noexcept;

    // receiving
    void on_match(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept;
    // inline, defined in tagged_recv.cpp (its only user)
    inline void deliver_tagged(Peer* p, const std::byte* bytes, std::size_t len,
                               btl::Tag tag) noexcept;
    void deliver_unexpected(Peer* p, const std::byte* bytes, std::size_t len,
                            btl::Tag tag) noexcept;
    void replay_out_of_order(Peer* p) noexcept;
    Req* match_posted(Peer* p, std::uint32_t tag) noexcept;
    void start_matched(Req* r, Peer* p, const std::byte* bytes, std::size_t len,
                       btl::Tag tag) noexcept;
    void start_rndv(Req* r, Peer* p, const wire::RndvHdr& h, const std::byte* handle) noexcept;
    bool issue_gets(Req* r) noexcept;
    void recv_data(Req* r, std::size_t offset, const std::byte* data, std::size_t len) noexcept;
    void store_unexpected(Peer* p, const std::byte* bytes, std::size_t len, btl::Tag tag,
                          std::uint32_t mtag, std::uint32_t seq, std::size_t total) noexcept;
    RawMsg* find_unexpected(Rank src, std::uint32_t tag, Peer*& from) noexcept;
    RawMsg* keep(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept;
    void drop(RawMsg* m) noexcept;
    void check_throttle() noexcept;
    void finish_recv_data(Req* r) noexcept;

    void on_rndv(const std::byte* b, std::size_t n) noexcept;
    void on_ack(const std::byte* b, std::size_t n) noexcept;
    void on_frag(const std::byte* b, std::size_t n) noexcept;
    void on_fin(const std::byte* b, std::size_t n) noexcept;
    void on_am(const std::byte* b, std::size_t n) noexcept;
    void on_am_rndv(const std::byte* b, std::size_t n) noexcept;
    void decline_am_rndv(Peer* p, const wire::RndvHdr& h) noexcept;
    void on_am_done(const std::byte* b, std::size_t n) noexcept;
    void on_osc(wire::Kind k, const std::byte* b, std::size_t n) noexcept;
    void on_osc_reply(wire::Kind k, const std::byte* b, std::size_t n) noexcept;
    void on_barrier(const std::byte* b, std::size_t n) noexcept;
    void on_throttle(const std::byte* b, std::size_t n) noexcept;
    void am_finish(Req* r) noexcept;
    void answer_completion(Rank origin, std::uint64_t token, bool lost) noexcept;
    bool owe_completion(Peer* p, Counter* c) noexcept;
    void write_off_completions(Peer* p) noexcept;
    void forget_owed(Peer* p, Counter* c) noexcept;
    bool address_registered(std::uint64_t addr, std::size_t len) const noexcept;
    void note_refused(Peer* p, Status s) noexcept;
    Status take_refused(Peer* p) noexcept;
    static void frag_done(btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) noexcept;
    static void osc_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*,
                         void*, Status) noexcept;

    std::unique_ptr<rt::Runtime> runtime_;
    ProgressEngine& progress_;
    std::unique_ptr<btl::Framework> framework_;
    std::unique_ptr<bml::R2> bml_;
    Context* ctx_ = nullptr;
    Rank rank_ = 0;
    std::uint32_t size_ = 1;
    Settings settings_;
    log::Stream out_;
    std::vector<std::uint32_t> component_hash_;  // by module index

    std::vector<std::unique_ptr<Peer>> peers_;
    std::vector<Peer*> unexpected_peers_;  // peers that ever held unexpected messages
    List<Req> any_posted_;
    std::uint64_t post_seq_ = 0;
    std::uint64_t arrival_ = 0;
    std::size_t unexpected_bytes_ = 0;
    bool any_throttling_ = false;
    std::uint64_t throttles_sent_ = 0;

    FreeList<Req> reqs_;
    FreeList<RawMsg> raws_;
    FreeList<OscOp> osc_ops_;
    BufferPool buffers_;

    bool has_pending_ = false;
    bool failures_to_handle_ = false;  // a peer was marked failed; progress cleans up
    bool any_failed_ = false;
    std::size_t lost_seen_ = 0;  // of the runtime's lost_ranks()
    std::optional<std::chrono::steady_clock::time_point> launcher_grace_end_;
    ProgressEngine::Handle launcher_watch_;  // check_launcher, low priority
    std::vector<PendingDesc> pending_desc_;
    List<RawMsg> pending_ctrl_;
    List<Req> pending_sends_;
    List<Req> pending_gets_;

    std::array<AmHandler, Context::am_max_handlers> am_handlers_{};
    std::vector<RegionImpl*> regions_;
    std::uint64_t osc_outstanding_total_ = 0;
    bool any_osc_refused_ = false;  // some peer's osc_refused is set
    std::uint32_t barrier_epoch_ = 0;
    std::array<std::array<std::uint32_t, 32>, 2> barrier_arrivals_{};
    struct Allocation {
        void* p;
        btl::Module* module;  // whose mem_alloc gave it; nullptr: the heap
    };
    std::vector<Allocation> allocations_;
    bool shut_down_ = false;
    std::vector<btl::Tag> registered_tags_;
    bool warned_bad_am_ = false;
    std::array<log::Limiter, wire::kind_count> drops_{};  // received messages dropped, by kind
    void start_progress_thread();
    void stop_progress_thread() noexcept;
    bool threaded_ = false;
    std::recursive_mutex mutex_;
    std::atomic<bool> stop_thread_{false};
    std::thread thread_;
    std::vector<std::byte> scratch_;  // a message a btl split into several segments
};

// Registered local memory.
struct RegionImpl {
    void* base = nullptr;
    std::size_t size = 0;
    struct Entry {
        btl::Module* module;
        std::uint32_t component;
        btl::RegistrationHandle* handle;
        std::size_t handle_len;
    };
    std::vector<Entry> entries;
};

}  // namespace transit::pml
