// The Transit user API: one Context per process, tagged messages, active
// messages with counters, one-sided put/get/atomics, transport-friendly memory.
//
//   auto ctx = transit::init(argc, argv);
//   transit::Request* r;
//   ctx.isend(peer, 7, buf, len, r);
//   ctx.wait(r);
//
// Every post (isend, irecv, ...) returns Status::completed when the operation
// finished at once, Status::success when it is under way, or an error.  Either
// way a returned request must be finished with wait/test (which release it and
// set the handle to nullptr) or, for an unmatched receive, cancelled.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "transit/runtime.hpp"
#include "transit/status.hpp"

namespace transit {

namespace pml {
class Engine;
struct RemoteKeyImpl;
struct RegionImpl;
}  // namespace pml

// Matches any tag in irecv/probe.
inline constexpr std::uint32_t any_tag = 0xffffffffu;

// What a finished request reports.
struct RequestStatus {
    Rank source = any_rank;
    std::uint32_t tag = 0;
    std::size_t length = 0;           // bytes placed in the receive buffer
    std::size_t sent_length = 0;      // bytes the sender sent (> length when truncated)
    Status status = Status::success;  // truncated, cancelled, peer_failed, ...
};

// The transports the bml chose for a peer, by component name, in the order it
// uses them: first fragments (eager), the rest of large messages (send), and
// one-sided operations and rendezvous (rdma).  Empty when nothing reaches it.
struct PeerTransports {
    std::vector<std::string> eager;
    std::vector<std::string> send;
    std::vector<std::string> rdma;
};

// A request handle.  `user` is free for the caller (BMI's user pointer).
class Request {
  public:
    void* user = nullptr;
    bool done() const noexcept { return done_.load(std::memory_order_acquire); }
    const RequestStatus& status() const noexcept { return status_; }

  protected:
    Request() = default;
    ~Request() = default;
    Request(const Request&) = delete;
    Request& operator=(const Request&) = delete;

    std::atomic<bool> done_{false};
    RequestStatus status_;
};

// LAPI-style counter: incremented by the library when an event completes.
// lost() counts the events it waits for that will never come: an active
// message whose peer failed, or whose data did not all arrive.
class Counter {
  public:
    Counter() = default;
    Counter(const Counter&) = delete;
    Counter& operator=(const Counter&) = delete;
    std::uint64_t value() const noexcept { return value_.load(std::memory_order_acquire); }
    std::uint64_t lost() const noexcept { return lost_.load(std::memory_order_acquire); }
    void add(std::uint64_t n) noexcept { value_.fetch_add(n, std::memory_order_acq_rel); }
    void add_lost(std::uint64_t n) noexcept { lost_.fetch_add(n, std::memory_order_acq_rel); }
    void reset() noexcept {
        value_.store(0, std::memory_order_release);
        lost_.store(0, std::memory_order_release);
    }

  private:
    std::atomic<std::uint64_t> value_{0};
    std::atomic<std::uint64_t> lost_{0};
};

// Names a counter in another process (obtained there with Context::counter_ref
// and sent to the origin by any means).  0 means none.  A handle of the
// target's table of counters, not an address: an active message naming one
// the target never gave out is not delivered (its completion counts it lost).
using CounterRef = std::uint64_t;

// --- active messages -----------------------------------------------------
class Context;

struct AmInfo {
    Rank source;
    std::uint32_t handler;
    // The user header, valid during the header handler.  Bytes with no alignment
    // promised (a shared-memory transport may hand them over in place): copy a
    // struct out with memcpy rather than casting the pointer.
    std::span<const std::byte> header;
    std::size_t data_length;
};

// Runs at the target once all data is in place.
using AmCompletionFn = void (*)(Context& ctx, Rank source, void* buffer, std::size_t length,
                                void* user_data);

// What the header handler answers: where the data goes (nullptr: discard it),
// which completion handler runs (nullptr: the one registered), with which data.
struct AmDestination {
    void* buffer = nullptr;
    AmCompletionFn completion = nullptr;
    void* user_data = nullptr;
};

using AmHeaderFn = AmDestination (*)(Context& ctx, const AmInfo& info, void* handler_arg);

// Optional counters of one am_send: `origin` when the data buffer may be
// reused, `target` (at the destination) and `completion` (here) once the
// target's completion handler has run.
struct AmCounters {
    Counter* origin = nullptr;
    CounterRef target = 0;
    Counter* completion = nullptr;
};

// --- one-sided --------------------------------------------------------------
enum class AtomicOp : std::uint8_t { add, and_, or_, xor_, swap, min, max };
enum class AtomicWidth : std::uint8_t { bits32, bits64 };

// Local memory registered for remote access.
class MemoryRegion;
// Which peers may reach a registered region (Context::register_memory).  A
// peer outside the scope is refused (access_denied) even with the region's key.
struct RegionScope {
    enum class Kind : std::uint8_t {
        everyone,  // every peer holding the key (the default)
        job,       // the ranks of this context's job only
        peers,     // the listed peers only (ranks or ids of peers outside the job)
    };
    Kind kind = Kind::everyone;
    std::span<const Rank> peers{};  // Kind::peers; copied by register_memory

    static RegionScope everyone() noexcept { return {}; }
    static RegionScope job() noexcept { return {Kind::job, {}}; }
    static RegionScope only(std::span<const Rank> allowed) noexcept {
        return {Kind::peers, allowed};
    }
};
// A peer's memory region, unpacked from the bytes its owner sent.
class RemoteKey;

// --- threads ------------------------------------------------------------------
// How the program's threads may call the API, as MPI names the levels (lowest
// first).  Asked for at init; Context::thread_level() says what was granted.
//   single      one thread only
//   funneled    several threads, but only the one that called init calls the API
//   serialized  any thread, but never two at once (the program orders them)
//   multiple    any thread at any time: wait/test on a request another thread
//               posted, progress from several threads, active messages and
//               one-sided operations.  The pml then takes a lock per call
//               (released while a thread waits); the lower levels take none.
enum class ThreadLevel : std::uint8_t { single, funneled, serialized, multiple };

// A peer outside the job came or went (Context::on_peer_event).  joined: a
// client connected to this context (not a server this context connected
// to); departed: it disconnected (or we did); failed: its process died or its
// connection broke.  Every peer that joined later departs or fails once.
enum class PeerEventKind : std::uint8_t { joined, departed, failed };
struct PeerEvent {
    Rank peer = any_rank;
    PeerEventKind kind = PeerEventKind::joined;
};
using PeerEventFn = void (*)(Context& ctx, const PeerEvent& event, void* user);

// How Context::disconnect leaves a peer.  graceful: what was sent to it
// before arrives, or disconnect says it did not; abortive: at once, what is
// still on its way may be lost.
enum class Disconnect : std::uint8_t { graceful, abortive };

// --- the context ------------------------------------------------------------
class Context {
  public:
    explicit Context(std::unique_ptr<pml::Engine> engine);
    Context(Context&&) noexcept;
    Context& operator=(Context&&) noexcept;
    // Disconnects every peer outside the job gracefully (all at once, within
    // one pml_base_disconnect_linger; a peer that does not confirm is
    // logged), waits until no rank of the job still sends to us (a final
    // barrier), then closes everything.  A process that exits without
    // destroying its Context (std::exit skips it, _exit, a signal) promises
    // nothing about what it sent last.
    ~Context();

    Rank rank() const noexcept;
    std::uint32_t size() const noexcept;
    // The thread level granted (see ThreadLevel).
    ThreadLevel thread_level() const noexcept;
    // Runs every transport's progress once; returns the events completed.
    int progress() noexcept;
    // Drives progress until at least one event completes or `timeout` passes;
    // returns the events (0: the timeout).  Waiting, it spins for
    // pml_base_wait_spin_time, then passes the time as pml_base_wait_policy
    // says: by default (block) it sleeps in the kernel until a transport has
    // work, when every selected transport can wake it (self, vader and tcp
    // can; uct and ofi are polled, and waits then nap) and the program is
    // single-threaded without the progress thread.  An idle server that
    // waits this way uses well under 1 % of a core.
    int progress(std::chrono::milliseconds timeout) noexcept;

    // --- a user's event loop (as ucp_worker_get_efd / FI_WAIT_FD) -----------
    // A descriptor that turns readable (poll, epoll, select) when a transport
    // has work, once arm() said success; -1 when a selected transport cannot
    // wake a sleeper (poll instead).  The same for the context's life; do not
    // read or close it.  The loop:
    //   for (;;) {
    //       while (ctx.progress() > 0) {}            // do everything there is
    //       if (ctx.arm() != Status::success) continue;  // something came meanwhile
    //       poll({ctx.event_fd(), POLLIN} and the program's own descriptors);
    //   }                                             // the next progress() disarms
    // Ready means "call progress", not "a message for you": it may wake for
    // transport work (an acknowledgement, a returned fragment).
    int event_fd() const noexcept;
    // Tells the transports (and through them the peers) that this process is
    // about to sleep on event_fd().  success: sleep; not_available: work came
    // meanwhile, call progress() first; not_supported: event_fd() is -1, or a
    // transport cannot promise a wake-up now.  Any later API call that drives
    // progress disarms.
    Status arm() noexcept;

    // --- tagged messages ---------------------------------------------------
    Status isend(Rank dst, std::uint32_t tag, const void* buf, std::size_t len, Request*& req,
                 void* user = nullptr) noexcept;
    Status isendv(Rank dst, std::uint32_t tag, std::span<const iovec> iov, Request*& req,
                  void* user = nullptr) noexcept;
    // src may be any_rank, tag any_tag.
    Status irecv(Rank src, std::uint32_t tag, void* buf, std::size_t len, Request*& req,
                 void* user = nullptr) noexcept;
    Status irecvv(Rank src, std::uint32_t tag, std::span<const iovec> iov, Request*& req,
                  void* user = nullptr) noexcept;

    // Release a finished request and null the handle; `status` may be null.
    Status test(Request*& req, bool& done, RequestStatus* status = nullptr) noexcept;
    Status wait(Request*& req, RequestStatus* status = nullptr) noexcept;
    // As wait, for at most `timeout` (waiting as progress(timeout) does):
    // timeout when the request has not finished then (it stays valid: wait,
    // test or cancel it later).
    Status wait(Request*& req, std::chrono::milliseconds timeout,
                RequestStatus* status = nullptr) noexcept;
    // Waits for one; `index` is the finished one (its handle is nulled).
    // not_found when every handle is null.
    Status wait_any(std::span<Request*> reqs, std::size_t& index,
                    RequestStatus* status = nullptr) noexcept;
    // statuses may be empty or as long as reqs.  Returns the first error.
    Status wait_all(std::span<Request*> reqs, std::span<RequestStatus> statuses = {}) noexcept;
    // Cancels an unmatched receive: it completes with Status::cancelled and must
    // still be waited.  Returns not_available when it is already matched.
    Status cancel(Request* req) noexcept;

    Status probe(Rank src, std::uint32_t tag, RequestStatus& status) noexcept;
    Status iprobe(Rank src, std::uint32_t tag, bool& found, RequestStatus& status) noexcept;

    // Blocking conveniences.
    Status send(Rank dst, std::uint32_t tag, const void* buf, std::size_t len) noexcept;
    Status recv(Rank src, std::uint32_t tag, void* buf, std::size_t len,
                RequestStatus* status = nullptr) noexcept;

    // --- active messages ------------------------------------------------------
    // Active messages are not ordered with each other or with tagged messages.
    // id: any number below am_max_handlers.  exists when taken.
    static constexpr std::uint32_t am_max_handlers = 256;
    // Largest user header of one active message.
    static constexpr std::size_t am_max_header = 128;
    // Register right after init, before the first call that progresses: a
    // peer may send as soon as its own init returns.  Messages that arrive
    // during init wait (up to 4,096) and are delivered at the first progress
    // after it; one for a handler still not registered then is not delivered,
    // and its origin's completion counter and the target counter it names
    // count it lost.
    Status register_am_handler(std::uint32_t id, AmHeaderFn header_handler,
                               AmCompletionFn completion_handler, void* handler_arg);
    Status am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header, const void* data,
                   std::size_t len, const AmCounters& counters = {}) noexcept;
    // The same ref for every call with c (c must live as long as peers may
    // name it: until release_counter_ref, or the context's end).  0 when out
    // of memory.
    CounterRef counter_ref(Counter& c) const noexcept;
    // Peers can no longer name the counter, which may then be destroyed: an
    // active message naming `ref` that arrives from now on is not delivered
    // (its origin counts it lost), one whose data is still arriving is
    // delivered without counting.  A later counter_ref of the same counter
    // gives a new ref.  bad_param for a ref not given out or released already.
    Status release_counter_ref(CounterRef ref) noexcept;
    std::uint64_t counter_get(const Counter& c) const noexcept { return c.value(); }
    // Drives progress until the counter reaches `value`: success.  error when
    // it never will (value() + lost() reached `value` first; the log says why).
    Status counter_wait(const Counter& c, std::uint64_t value) noexcept;

    // --- one-sided --------------------------------------------------------------
    // Registers [base, base+size) with every transport that needs it.  A peer
    // reaches a region only through its key (pack_key), which holds 64 random
    // bits, and only inside it; a region registered for a scope refuses the
    // peers outside it.  After deregister_memory its keys grant nothing.
    // Refused operations are logged (rate-limited) and end the origin's next
    // flush with the refusal.  A region scoped to the job or to peers is not
    // reached by transports that cannot enforce the scope: the target's pml
    // serves (and checks) those operations instead.
    Status register_memory(void* base, std::size_t size, MemoryRegion*& region);
    Status register_memory(void* base, std::size_t size, MemoryRegion*& region,
                           const RegionScope& scope);
    Status deregister_memory(MemoryRegion*& region);
    // The bytes to send to peers so they can address the region.
    std::vector<std::byte> pack_key(const MemoryRegion* region) const;
    Status unpack_key(std::span<const std::byte> packed, RemoteKey*& key);
    void release_key(RemoteKey*& key);

    // Non-blocking; complete (and `fetched` valid) after flush(peer)/flush_all.
    // An error returned here (access_denied, bad_param: the key does not cover
    // the target memory) means nothing happened.
    Status put(Rank dst, const void* src, std::size_t len, const RemoteKey* key,
               std::uint64_t offset) noexcept;
    Status get(Rank dst, void* dst_buf, std::size_t len, const RemoteKey* key,
               std::uint64_t offset) noexcept;
    // fetched (nullable) receives the old value; it must stay valid until flush.
    // The atomics one process issues to one target are applied in the order it
    // issued them: a fetch sees every earlier one of its own, flushed or not.
    Status atomic(Rank dst, AtomicOp op, AtomicWidth width, const RemoteKey* key,
                  std::uint64_t offset, std::uint64_t operand,
                  std::uint64_t* fetched = nullptr) noexcept;
    Status cswap(Rank dst, AtomicWidth width, const RemoteKey* key, std::uint64_t offset,
                 std::uint64_t compare, std::uint64_t value, std::uint64_t* fetched) noexcept;
    // An operation the target refused (outside its live registrations: a forged
    // key, or a region deregistered since) is returned by the next flush that
    // covers it (access_denied, bad_param or not_found), once; it changed nothing:
    // a refused get leaves its buffer and a refused atomic its `fetched` as they were.
    Status flush(Rank dst) noexcept;
    Status flush_all() noexcept;
    // flush_all, then a barrier: every rank's earlier one-sided operations are
    // visible.  Returns flush_all's error, if any, once the barrier is passed.
    Status fence() noexcept;
    // No rank returns before every rank has entered.
    Status barrier() noexcept;

    // --- peers outside the job (clients and servers) -----------------------------
    // Makes this context reachable from processes outside its job and returns
    // its address: one printable line, the same for the process's life, with
    // the transports' addresses (tcp) and a random 128-bit access token.
    // Whoever has the address may connect; a connection without the token is
    // refused and logged.  A client needs no call here: its first message
    // matches irecv(any_rank, ...) and the status names its new peer id.
    // Throws std::runtime_error when no selected transport carries such peers.
    std::string listen();
    // A peer id (numbered after the job's ranks, never reused) for the
    // context at `address`, usable with every operation (tagged, active
    // messages, put/get/atomics with keys the server sends, flush).  Bounded
    // work: tcp opens its connection to the server here, waiting at most
    // btl_tcp_server_connect_timeout (1 s), and its handshake completes with
    // the first operations.  bad_param: not an address; unreachable: no
    // transport here reaches it, or no server answers at the address (a
    // server gone: the connection is refused; the log names the address).
    Status connect(std::string_view address, Rank& peer);
    // Releases a peer outside the job on both sides.  Graceful (the default):
    // first waits, driving progress, until what we sent the peer has arrived
    // there (our sends to it complete, one-sided operations and active
    // messages with counters complete, then the peer confirms it has every
    // tagged message sent before), at most pml_base_disconnect_linger (5 s).
    // success: the peer confirmed; timeout: it did not in time; peer_failed
    // or peer_departed: it went first.  On any error the sends still pending
    // end with peer_departed.  Abortive: at once; what is still on its way
    // may be lost.  Either way our pending operations with it then end with
    // peer_departed (receives too: never success), and so do the other
    // side's.  Active messages without counters are not waited for.  Ids of
    // peers that departed or failed are released by the context itself;
    // disconnecting them again is success.  Operations naming a released id
    // fail at once with peer_departed or peer_failed.  bad_param for a job rank.
    Status disconnect(Rank peer, Disconnect how = Disconnect::graceful) noexcept;

    // --- names (the launcher's PMIx publish/lookup, else the node's directory) -------
    // A name is 1..120 bytes without spaces or control characters, not
    // starting with "pmix.".  A singleton, or a rank whose launcher keeps no
    // names (srun), keeps them in this user's name directory on the node,
    // which transit_run's ranks share (README "Names").
    // Publishes this context's address (listening first if it does not yet)
    // under `name`, until unpublish or the end of this process.  Under
    // transit_run every process of the same user on the node (this job and
    // other transit_run jobs, and singletons) can look it up; under mpirun its
    // job.  exists: the name is taken; not_supported: no selected transport
    // carries peers outside the job (listen would throw); error: the name
    // directory is unsafe (the log says why).
    Status publish(std::string_view name);
    // The address published under `name`, for connect().  Waits up to `wait`
    // for the name to be published (0: answers at once), driving progress
    // meanwhile.  not_found: no such name (wait 0); timeout: none within `wait`.
    Status lookup(std::string_view name, std::string& address,
                  std::chrono::milliseconds wait = std::chrono::milliseconds(0));
    // not_found: this name is not published; access_denied: another process
    // published it.
    Status unpublish(std::string_view name);

    // Calls fn (nullptr: none) from progress, in the thread that progresses,
    // for each peer outside the job that joins, departs or fails from now on.
    // A joined event comes from the progress call that admitted the client,
    // perhaps after its first message was matched; a peer's departed or
    // failed event comes once its pending operations have ended.  fn may call
    // the Context (send, disconnect...).
    void on_peer_event(PeerEventFn fn, void* user) noexcept;

    // Which transports carry messages to `peer` (connecting to it if needed).
    PeerTransports transports(Rank peer);

    // --- memory -------------------------------------------------------------------
    // Page-aligned memory the transports handle best: from the most exclusive
    // transport that offers any (vader: shared with the local peers, so their
    // put/get/atomics on it are plain loads, stores and CPU atomics; uct over
    // posix/sysv: reachable by UCT's atomics), else the heap.  nullptr on
    // failure.  Valid until mem_free or the end of the context.
    void* mem_alloc(std::size_t size) noexcept;
    void mem_free(void* ptr) noexcept;

    pml::Engine& engine() noexcept { return *engine_; }

  private:
    std::unique_ptr<pml::Engine> engine_;
};

// Thrown by init when the job cannot run as started; status() is what
// transit_init returns to a C caller.  Status::unreachable: a rank of the job
// that no selected transport reaches (what() lists them; the log has said why
// for each transport).  Every rank that cannot reach a peer throws it, at
// init, rather than have its first message to that peer fail and a receive
// waiting for it hang.
class InitError : public std::runtime_error {
  public:
    InitError(Status status, const std::string& what) : std::runtime_error(what), status_(status) {}
    Status status() const noexcept { return status_; }

  private:
    Status status_;
};

// Why this thread's last failed call failed: the error line it logged (the
// log has it too), else the call, its peer and the status, e.g.
// "send (rank 1): peer failed".  Set by every Context method that returns an
// error Status (a wait whose request ended in error included); "" before
// any failed.  Valid until this thread's next failed call.  A successful call
// leaves it as it was.
std::string_view last_error() noexcept;

// Parses --mca options out of argv, joins the job, opens the transports.
// Throws InitError, params::Error or std::runtime_error with a clear message
// on failure.
// The thread level is the one asked for here, else the parameter
// pml_base_thread_level (default single).
Context init(int& argc, char**& argv);
Context init();
Context init(int& argc, char**& argv, ThreadLevel level);
Context init(ThreadLevel level);

}  // namespace transit
