// The uct module: one UCT interface (a transport on a device, e.g. posix on
// "memory" or tcp on "eth0") with its own worker, connected to each peer's
// interface.
//
// Active messages go out with uct_ep_am_short (when header + payload fit) or
// uct_ep_am_bcopy, both complete when they return.  Receptions are copied
// into a ring by the AM handler and delivered after UCT's progress returns.
// Put, get and atomics are performed by the target through active messages,
// which check the handle, or, only where the target's device checks the
// remote key (rc, dc on a cluster), by UCT's own put_zcopy/get_zcopy and
// atomics with a remote key carried in the registration handle
// (uct_native.cpp).
#pragma once

#include <uct/api/uct.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "transit/btl/am_table.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_links.hpp"
#include "transit/btl/util/refusal_log.hpp"
#include "transit/log.hpp"
#include "transit/progress.hpp"
#include "uct_config.hpp"
#include "uct_deleters.hpp"
#include "uct_endpoint.hpp"
#include "uct_frag.hpp"
#include "uct_gather.hpp"
#include "uct_rdma_policy.hpp"
#include "uct_regions.hpp"
#include "uct_resource.hpp"
#include "uct_send_queue.hpp"
#include "uct_target.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

// The default exclusivity of a shared-memory transport (below vader), the
// highest a module gets unless btl_uct_exclusivity says otherwise.
inline constexpr std::uint32_t shm_exclusivity = 32768;

// UCT tcp's send and receive segments (UCX_TCP_TX_SEG_SIZE, RX_SEG_SIZE):
// room for 64 KiB of payload, the pml's header and ours in one message.
inline constexpr std::size_t tcp_segment = 66 << 10;
// The longest active message UCT's shared-memory transports deliver intact
// (their FIFO element holds the length in 16 bits).
inline constexpr std::size_t shm_message_limit = 0xffff;
// Over tcp, btl_uct_eager_limit left at its default: 64 KiB of payload and
// the pml's 12-byte header, as with the tcp btl.
inline constexpr std::size_t tcp_eager_limit = 65600;
// The receive ring's slots hold messages up to this size: a shared-memory
// transport's largest (posix: 8256 bytes with its header) and UCT tcp's
// default segment; larger ones (over tcp's widened segments) are kept beside
// the slot.  The ring's memory is slots x this, touched at setup.
inline constexpr std::size_t ring_slot_max = (8 << 10) + 128;

class UctModule final : public btl::Module,
                        public btl::Rdma,
                        public btl::Atomics,
                        public btl::Listener,
                        public btl::DynamicPeerRecords {
  public:
    // Opens the memory domain, worker and interface; throws std::runtime_error
    // with the reason when the transport cannot be used.
    UctModule(btl::Component& component, const Resource& resource, const UctConfig& config,
              rt::Runtime& runtime, ProgressEngine& progress, btl::AmTable& am_table,
              std::shared_ptr<Regions> regions, const log::Stream& out);
    ~UctModule() override;

    std::string name() const override { return "uct:" + resource_.name(); }
    const std::vector<std::byte>& address() const noexcept { return address_; }
    std::string modex_key() const { return "btl.uct." + resource_.tl_name; }

    btl::Rdma* rdma() noexcept override { return this; }
    btl::Atomics* atomics() noexcept override { return this; }
    void* extension(std::uint32_t id) noexcept override {
        if (id == btl::DynamicPeerRecords::id) return static_cast<btl::DynamicPeerRecords*>(this);
        if (id == btl::Listener::id) return static_cast<btl::Listener*>(this);
        return nullptr;
    }
    // Peers outside the job (uct_dynamic.cpp).  The address is published at
    // init; listening admits clients and keeps the module in progress.
    Status listen() override;
    std::size_t dynamic_endpoints() const noexcept override {
        return dynamic_ids_.size() + joining_.size();
    }

    Status add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                     btl::Reachability& reachable) override;
    Status del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) override;

    btl::Descriptor* alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                           std::uint32_t flags) noexcept override;
    Status free(btl::Descriptor* descriptor) noexcept override;
    btl::Descriptor* prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                 std::uint8_t order, std::size_t reserve, std::size_t& size,
                                 std::uint32_t flags) noexcept override;
    Status send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                btl::Tag tag) noexcept override;
    Status sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                 std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                 std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept override;

    Status put(const btl::RdmaRequest& request) noexcept override;
    Status get(const btl::RdmaRequest& request) noexcept override;
    Status atomic_op(const btl::AtomicRequest& request) noexcept override;
    Status atomic_fop(const btl::AtomicRequest& request) noexcept override;
    Status atomic_cswap(const btl::AtomicRequest& request) noexcept override;

    void* mem_alloc(std::size_t size) noexcept override;
    bool mem_free(void* p) noexcept override;
    btl::RegistrationHandle* register_mem(btl::Endpoint* endpoint, void* base, std::size_t size,
                                          std::uint32_t flags) override;
    Status deregister_mem(btl::RegistrationHandle* handle) override;
    Status flush(btl::Endpoint* endpoint) override;
    void dump(btl::Endpoint* endpoint, int verbosity) override;
    Status finalize() override;

    // --- for the objects it owns (UctSendQueue, UctTarget) -----------------------------------
    // One message, completed when this returns (UCT copies it): completed, or
    // nothing happened (out_of_resource, errors).
    Status transmit(UctEndpoint* ep, Gather& g) noexcept;
    WireHeader wire(Kind kind, btl::Tag tag = 0) const noexcept {
        return WireHeader{static_cast<std::uint8_t>(kind), tag, wire_version, 0, self_};
    }
    // Work for attend() appeared: the next poll looks.
    void attend_soon() noexcept { attention_ = true; }
    // Joins or leaves the progress engine as the module's work says.
    void update_progress() noexcept;
    // The endpoint of a job peer or a peer outside the job: for a job peer
    // not added yet (it added us first), connected now; nullptr when it cannot be.
    UctEndpoint* peer_endpoint(Rank peer) noexcept;
    // A peer's error, to whoever registered for them.
    void report(std::uint32_t flags, Rank peer, const char* info) noexcept {
        report_error(flags, peer, info);
    }

  private:
    void open_objects();
    void build_address();
    void widen_tcp_segments(uct_iface_config_t* config);
    static std::size_t largest_accepted(std::size_t max_bcopy, std::size_t tx_segment,
                                        std::size_t rx_segment) noexcept;
    std::string mismatched_messages(std::uint32_t accepted, std::uint32_t sent) const;
    static std::uint32_t on_wire(std::size_t size) noexcept {
        return static_cast<std::uint32_t>(
            std::min<std::size_t>(size, std::numeric_limits<std::uint32_t>::max()));
    }
    void choose_attributes();
    void setup_pools();

    // Sending.
    static std::size_t pack_cb(void* dest, void* arg) noexcept;
    Status from_ucs(ucs_status_t s, UctEndpoint* ep) noexcept;
    Status native_error(ucs_status_t s, UctEndpoint* ep) noexcept;
    static WireHeader wire(Kind kind, btl::Tag tag, const UctEndpoint* ep) noexcept {
        return WireHeader{static_cast<std::uint8_t>(kind), tag, wire_version, 0, ep->wire_source};
    }
    bool valid(const btl::Endpoint* e) const noexcept;
    [[gnu::noinline]] bool valid_dynamic(const btl::Endpoint* e) const noexcept;
    const void* short_source(btl::Endpoint* endpoint, btl::Convertor* convertor, std::size_t total,
                             std::size_t payload) noexcept;
    Status short_sent(btl::Convertor* convertor, std::size_t payload,
                      btl::Descriptor** descriptor) noexcept;
    [[gnu::noinline]] Status sendi_raw(btl::Endpoint* endpoint, btl::Convertor* convertor,
                                       std::size_t payload_size, btl::Tag tag,
                                       btl::Descriptor** descriptor, std::uint8_t order,
                                       std::uint32_t flags) noexcept;
    [[gnu::noinline]] Status sendi_iov(btl::Endpoint* endpoint, btl::Convertor* convertor,
                                       const void* header, std::size_t header_size,
                                       std::size_t payload_size, std::uint8_t order,
                                       std::uint32_t flags, btl::Tag tag,
                                       btl::Descriptor** descriptor) noexcept;
    Status sendi_gather(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                        std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                        std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept;
    // sendi when UCT has no room or messages wait: copied into the queue.
    [[gnu::noinline]] Status take_in(btl::Endpoint* endpoint, btl::Convertor* convertor,
                                     const void* header, std::size_t header_size,
                                     std::size_t payload_size, std::uint8_t order, btl::Tag tag,
                                     btl::Descriptor** descriptor) noexcept;
    UctFrag* take() noexcept { return frags_.get(); }
    void finish_send(UctFrag* f, UctEndpoint* ep) noexcept;

    // Receiving and progress.
    static ucs_status_t am_cb(void* arg, void* data, std::size_t length, unsigned flags) noexcept;
    [[gnu::noinline]] void queue_reception(const void* data, std::size_t length) noexcept;
    static ucs_status_t error_cb(void* arg, uct_ep_h ep, ucs_status_t status) noexcept;
    static int progress_cb(void* self) noexcept;
    int poll() noexcept;
    int attend() noexcept;
    bool needs_attention() const noexcept;
    // Peers outside the job on shared memory, watched by pid: looked at every
    // 16 polls (a waiting process yields between polls, so under load 1024
    // polls can take seconds), which keeps attend() in every poll while any
    // is there.  Job peers keep the 1024-poll tick.
    bool watches_dynamic() const noexcept {
        return resource_.dev_type != UCT_DEVICE_TYPE_NET &&
               (!dynamic_ids_.empty() || !joining_.empty());
    }

    // Native atomics (uct_native.cpp): on memory this module's memory domain
    // allocated (mem_alloc), through the interface's own UCT atomics.
    void open_native_atomics();
    // `key`: the remote registration's, from its handle.
    Status native_atomic(const btl::AtomicRequest& req, std::uint64_t key,
                         AtomicMode mode) noexcept;
    bool amo_rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle, std::uint64_t key,
                      uct_rkey_t& rkey) noexcept;
    const uct_allocated_memory_t* allocation_of(const void* base, std::size_t size) const noexcept;
    void free_allocations() noexcept;
    bool deliver_now(const std::byte* data, std::size_t length) noexcept;
    void dispatch(const WireHeader& h, const std::byte* body, std::size_t len) noexcept;
    void drop_unregistered(Rank source) noexcept;
    int deliver() noexcept;
    bool handle(const std::byte* data, std::size_t length) noexcept;
    void handle_failures() noexcept;
    void end_ops(Rank peer, Status status) noexcept;
    bool left_quietly(const UctEndpoint& e) const noexcept;
    void say_goodbye(UctEndpoint& e) noexcept;
    void say_hello(UctEndpoint& e) noexcept;
    ucs_status_t send_header(UctEndpoint& e, const WireHeader& h,
                             std::chrono::steady_clock::time_point deadline) noexcept;
    void check_local_peers() noexcept;
    UctEndpoint* connect(Rank peer, std::string* why);
    uct_ep_h create_ep(std::span<const std::byte> device, std::span<const std::byte> iface,
                       std::string* why);

    // Peers outside the job (uct_dynamic.cpp).
    bool is_dynamic(Rank peer) const noexcept;
    UctEndpoint* dynamic_endpoint(Rank peer) const noexcept;
    UctEndpoint* connect_server(Rank peer, std::string* why);
    bool send_join(UctEndpoint& e, const rt::Secret& token) noexcept;
    std::uint32_t new_channel() const;
    // Takes `ep` (destroyed when it fails: nullptr).
    UctEndpoint* add_dynamic(Rank id, uct_ep_h ep, std::uint32_t channel, std::uint32_t wire_source,
                             std::uint32_t pid) noexcept;
    // From handle(): the source of a message a peer outside the job sent,
    // renamed to its id; false when it names no peer (dropped).
    bool rename_source(WireHeader& h) noexcept;
    UctEndpoint* admit(std::uint32_t channel) noexcept;
    void forget_joining(std::uint32_t channel, const char* why) noexcept;
    void check_joining() noexcept;
    void handle_join(std::span<const std::byte> body) noexcept;
    ssize_t send_welcome(uct_ep_h ep, std::uint32_t channel, Status status,
                         std::chrono::steady_clock::time_point deadline) noexcept;
    void answer_join(const JoinRequest& j, std::span<const std::byte> addresses,
                     Status status) noexcept;
    void handle_welcome(const WireHeader& h, std::span<const std::byte> body) noexcept;
    void check_welcomes() noexcept;
    void dynamic_goodbye(Rank peer) noexcept;
    void delete_dynamic(UctEndpoint& e) noexcept;
    void reap_dynamic() noexcept;
    void refused(const std::string& who, const std::string& why) noexcept;

    // One-sided, initiator side.
    Status check_remote(const btl::RegistrationHandle* handle, std::uint64_t address,
                        std::size_t size, std::uint32_t access, PackedHandle& p) const noexcept;
    // An operation of `kind` for the request (btl::RdmaRequest or
    // btl::AtomicRequest): its endpoint, local side and completion; nullptr
    // when none is free.
    template <typename Request>
    RdmaOp* start_op(OpKind kind, const Request& req) noexcept;
    Status launch(RdmaOp* op) noexcept;
    Status advance(RdmaOp* op) noexcept;
    int retry_ops() noexcept;
    void answered(RdmaOp* op, Status s) noexcept;
    void complete_op(RdmaOp* op) noexcept;
    RdmaOp* find_op(std::uint32_t index, std::uint32_t generation, Rank peer) noexcept;
    // put and get: kind is OpKind::put or OpKind::get.
    Status transfer(OpKind kind, const btl::RdmaRequest& req) noexcept;
    Status atomic_common(const btl::AtomicRequest& req, AtomicMode mode) noexcept;
    void on_rdma_reply(Kind kind, Rank source, std::span<const std::byte> body) noexcept;
    void on_atomic_reply(Rank source, std::span<const std::byte> body) noexcept;

    // Native RDMA (uct_native.cpp): UCT's put/get on a memory domain that
    // registers memory.  Declined (with the reason at verbose level) when
    // there is none; the active-message path then serves everything.
    void open_native();
    void connect_native(UctEndpoint* e, const AddressHeader& h, const std::byte* addresses);
    void register_native(Registration& r, void* base, std::size_t size) noexcept;
    void release_native_registrations() noexcept;
    bool rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle, std::uint64_t key,
                  uct_rkey_t& rkey) noexcept;
    bool local_memh(const btl::RegistrationHandle* handle, uct_mem_h& memh) const noexcept;
    // not_available: this one goes by active messages.
    Status native_transfer(OpKind kind, const btl::RdmaRequest& req, std::uint64_t key) noexcept;
    Status native_flush(RdmaOp* op) noexcept;
    template <typename Request>
    RdmaOp* start_native(OpKind kind, const Request& req) noexcept;
    void release_op(RdmaOp* op) noexcept;
    void set_cma_progress(bool on) noexcept;
    Status in_flight() noexcept;
    Status complete_after_flush(RdmaOp* op) noexcept;
    static uct_ep_h native_ep(const RdmaOp* op) noexcept;
    static void native_done_cb(uct_completion_t* comp) noexcept;
    void mark_done(RdmaOp* op) noexcept;
    int finish_native() noexcept;
    int retry_flushes() noexcept;

    Resource resource_;
    UctConfig config_;
    rt::Runtime& runtime_;
    ProgressEngine& progress_;
    btl::AmTable& am_table_;
    log::Stream out_;
    Rank self_;

    std::unique_ptr<ucs_async_context_t, AsyncDeleter> async_;
    std::unique_ptr<uct_worker, WorkerDeleter> worker_;
    std::unique_ptr<uct_md, MdDeleter> md_;
    std::unique_ptr<uct_iface, IfaceDeleter> iface_;
    uct_iface_attr_t iface_attr_{};
    // The RDMA interface: a second one (cma) opened on the same worker, owned
    // here, or the module's own; rdma_md_/rdma_iface_ point at whichever.
    std::unique_ptr<uct_md, MdDeleter> cma_md_;
    std::unique_ptr<uct_iface, IfaceDeleter> cma_iface_;
    bool cma_progress_ = false;  // cma's progress is on the worker (operations in flight)
    uct_md_h rdma_md_ = nullptr;
    uct_iface_h rdma_iface_ = nullptr;
    uct_component_h rdma_component_ = nullptr;
    uct_iface_attr_t rdma_attr_{};
    std::string rdma_name_;          // "cma/memory"
    bool native_put_ = false;        // put by UCT's put_zcopy
    bool native_get_ = false;        // get by UCT's get_zcopy
    bool rdma_need_memh_ = false;    // the local buffer needs its own registration
    std::size_t rkey_len_ = 0;       // the memory domain's packed remote key
    std::uint32_t rdma_md_tag_ = 0;  // md_tag() of the RDMA memory domain's name
    std::size_t native_min_ = 0;     // smaller transfers go by active messages
    RdmaOp* done_head_ = nullptr;    // completed by UCT, reported after its progress
    FifoQueue<RdmaOp> flushes_;      // puts whose flush found no resources
    bool native_amo_ = false;        // UCT atomics on mem_alloc memory
    std::uint32_t amo_md_tag_ = 0;   // md_tag() of the interface's memory domain
    std::size_t amo_rkey_len_ = 0;   // its packed remote key
    std::vector<uct_allocated_memory_t> allocations_;  // mem_alloc's, from md_
    std::uint64_t native_amos_ = 0;
    std::uint64_t native_ops_ = 0;
    std::uint64_t native_fallbacks_ = 0;

    std::vector<std::byte> address_;  // AddressHeader + device + interface address
    std::vector<std::unique_ptr<UctEndpoint>> by_rank_;
    // Peers outside the job: every endpoint (deleted ones until reap_dynamic),
    // and the live ones by id and by the channel their messages carry.
    std::vector<std::unique_ptr<UctEndpoint>> dynamic_;
    std::unordered_map<Rank, UctEndpoint*> dynamic_ids_;
    std::unordered_map<std::uint32_t, UctEndpoint*> channels_;
    // Clients whose join was accepted, by channel, admitted (given an id) by
    // their first other message: a client whose bml drops this module for
    // another right after connecting leaves without ever being a peer here.
    struct Joining {
        uct_ep_h ep = nullptr;
        std::uint32_t client_channel = 0;
        std::uint32_t pid = 0;
        std::uint32_t rank = 0;
        btl::util::ProcessWatch process;
        bool failed = false;  // UCT reported its endpoint lost
    };
    std::unordered_map<std::uint32_t, Joining> joining_;
    bool listening_ = false;
    // Counts the servers whose answer to our join is due, each given up at
    // its deadline (check_welcomes).
    btl::util::OutsideLinks links_;
    int attend_depth_ = 0;  // attend() nested in a callback: no endpoint is freed
    btl::util::RefusalLog refusals_{"clients"};
    // Per rank, what outlives its endpoint: the goodbyes said to it (a peer
    // added again is told hello) and the last hello heard from it.
    struct Farewells {
        std::uint8_t said = 0;    // goodbyes said to it (the count they carry)
        bool owe_hello = false;   // said goodbye, not yet taken back
        std::int16_t heard = -1;  // count of its last hello, -1: none
    };
    std::vector<Farewells> farewells_;
    std::size_t peer_count_ = 0;
    bool failures_ = false;  // an endpoint failed inside UCT's progress
    // The poll's hot state, together: whether anything besides UCT's own
    // progress needs a look (set wherever such work appears, cleared only by
    // attend() from the real state), the re-entry guard and the poll count.
    bool attention_ = false;
    bool in_uct_callback_ = false;  // a handler runs inside uct_worker_progress: no re-entry
    std::uint32_t polls_ = 0;       // local peers' liveness is checked every few polls
    // Called every 1024th poll.
    btl::util::WatchPace check_pace_{std::chrono::milliseconds(100), 1};

    FragPool frags_;
    Pool<RdmaOp> ops_;
    RecvRing ring_;
    FifoQueue<RdmaOp> waiting_ops_;  // operations with pieces left to send
    // The full FIFO (uct_send_queue.cpp), after the pool it returns fragments to.
    UctSendQueue send_queue_{*this, frags_};
    std::uint64_t sendi_refused_ = 0;  // no fragment free for the queue (or too large)
    std::size_t ops_pending_ = 0;
    std::size_t dropped_ = 0;           // receptions larger than a slot (protocol errors)
    std::vector<std::byte> scratch_;    // am_short payload gathered from pieces
    std::size_t max_short_ = 0;         // am_short payload (after the 64-bit header)
    bool short_iov_ = true;             // am_short_iov works here (else sendi gathers)
    std::size_t max_message_ = 0;       // am_bcopy total, header included
    bool warned_mismatch_ = false;      // a peer's message sizes did not fit ours
    std::size_t largest_accepted_ = 0;  // the longest active message received (AddressHeader)
    std::size_t chunk_ = 0;             // data bytes per put/get piece
    ProgressEngine::Handle progress_handle_;

    std::shared_ptr<Regions> regions_;
    // The one-sided capabilities, after what they refer to (regions_).
    UctTarget target_{*this, *regions_, out_};
};

}  // namespace transit::uct
