// The openib module: one active port of one InfiniBand or RoCE device.
//
// Data path (see openib_credits.hpp and openib_endpoint.hpp for the protocols):
//   send      RC SEND of [FragHeader][payload] from a pre-registered fragment,
//             received into a buffer of the module's shared receive queue
//   put/get   RDMA WRITE / RDMA READ with the caller's registrations
//   atomics   verbs fetch-add and compare-swap when the device's atomics are
//             coherent with the CPU's (IBV_ATOMIC_GLOB); every other op, every
//             32-bit op, and all ops on other devices travel as an atomic_request
//             fragment that the target performs with CPU atomics, so the two
//             kinds never mix on one location incoherently
//   progress  the RC completion queues, polled only while an endpoint is
//             connecting or connected; the UD connection queue and the device's
//             async events at low priority while the module has peers
//
// Single threaded: the module takes no locks (the btl framework serialises).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "openib_completions.hpp"
#include "openib_connection_manager.hpp"
#include "openib_credits.hpp"
#include "openib_endpoint.hpp"
#include "openib_endpoint_table.hpp"
#include "openib_frag.hpp"
#include "openib_frag_pools.hpp"
#include "openib_one_sided.hpp"
#include "openib_port.hpp"
#include "openib_rcache.hpp"
#include "openib_receive_queue.hpp"
#include "openib_registered_blocks.hpp"
#include "openib_remote_atomics.hpp"
#include "openib_send_queue.hpp"
#include "openib_verbs.hpp"
#include "openib_wire.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/free_list.hpp"
#include "transit/btl/util/registration_table.hpp"
#include "transit/log.hpp"
#include "transit/progress.hpp"

namespace transit::openib {

class Module;
class Endpoint;

// Settings read from the btl_openib_* parameters.
// The base parameters' free_list_max: send fragments and RDMA operations,
// each; bandwidth 0: from the port's speed and width.
struct Config : btl::BaseConfig {
    std::uint32_t srq_size = 1024;    // most receive buffers the SRQ may hold
    std::uint32_t srq_initial = 256;  // posted at init
    std::uint32_t credits_per_peer = 32;
    std::uint32_t sq_depth = 128;  // send work requests per QP
    std::uint32_t send_cq_size = 4096;
    std::uint32_t max_inline = 64;
    std::size_t rcache_max_unused = 0;
    bool rcache_monitor = true;  // follow released memory (or keep nothing unused)
    std::uint32_t connect_retry_ms = 100;
    std::uint32_t connect_retries = 50;
    std::uint8_t qp_timeout = 20;  // 4.096 us * 2^timeout per retry
    std::uint8_t qp_retry_count = 7;
    std::uint8_t rnr_retry = 7;  // 7: retry forever (flow control should make RNR rare)
    std::uint8_t service_level = 0;
    std::uint8_t traffic_class = 0;
    std::uint16_t pkey_index = 0;
    int gid_index = -1;  // -1: choose (RoCE v2 first)
    // auto: the device's fetch-add and compare-swap when they are coherent with
    // CPU atomics (IBV_ATOMIC_GLOB), the target does the rest; hardware: only
    // fetch-add and compare-swap, always by the device; emulated: the target
    // does every atomic.
    enum class Atomics : std::uint8_t {
        automatic,
        hardware,
        emulated
    } atomics = Atomics::automatic;
};

// One opened device, shared by the modules of its ports.  It drains the async
// event queue for all of them.
class Device {
  public:
    Device(verbs::Context context, verbs::ProtectionDomain pd, const ibv_device_attr& attr,
           std::string name);
    ~Device();

    ibv_context* context() const noexcept { return context_.get(); }
    ibv_pd* pd() const noexcept { return pd_.get(); }
    const ibv_device_attr& attr() const noexcept { return attr_; }
    const std::string& name() const noexcept { return name_; }

    void attach(Module* m) { modules_.push_back(m); }
    void detach(Module* m) noexcept;
    // Reads every pending async event and hands each to its module; returns
    // how many it handled.
    int poll_events() noexcept;

  private:
    verbs::Context context_;
    verbs::ProtectionDomain pd_;
    ibv_device_attr attr_;
    std::string name_;
    std::vector<Module*> modules_;
};

class Endpoint final : public btl::Endpoint, public ConnectionActions {
  public:
    Endpoint(Module& module, Rank peer, const wire::PortAddress& remote, Connection::Config cfg);
    ~Endpoint() override;

    Module& module() const noexcept { return module_; }
    Connection& connection() noexcept { return conn_; }
    const wire::PortAddress& remote_port() const noexcept { return remote_port_; }
    bool usable() const noexcept { return conn_.state() == ConnState::connected; }
    bool failed() const noexcept { return conn_.state() == ConnState::failed; }
    ibv_qp* qp() const noexcept { return qp_.get(); }

    // ConnectionActions
    bool create_qp(wire::QpAddress& local) override;
    bool connect_qp(const wire::QpAddress& remote) override;
    std::uint16_t reserve_credits() override;
    void release_credits(std::uint16_t granted) override;
    void send_cm(const wire::CmMessage& m) override;
    void connected(std::uint16_t granted_to_us, std::uint16_t granted_to_peer) override;
    void failed(const char* reason) override;

    // Queued work, in order.  Nothing jumps the queue: RC order is the order
    // the upper layer asked for.
    void enqueue(Frag* f) noexcept;
    Frag* pending_front() const noexcept { return pending_head_; }
    void pop_pending() noexcept;
    bool has_pending() const noexcept { return pending_head_ != nullptr; }

    CreditAccount credits;
    SendSlots send_slots;
    std::uint32_t rdma_in_flight = 0;  // put/get/atomics posted or awaiting a reply
    std::uint32_t posted = 0;          // work requests on the QP, for teardown
    std::uint32_t max_inline = 0;      // what the QP really allows
    bool on_attention = false;
    // Atomic requests from the peer waiting for a fragment to answer with; their
    // buffers stay out of the SRQ meanwhile (the peer's credits cover them).
    RecvFrag* deferred_head = nullptr;
    RecvFrag* deferred_tail = nullptr;
    bool error_reported = false;
    Endpoint* attention_next = nullptr;
    // Buffer of the credit-only message (sent inline; at most one in flight).
    alignas(8) std::byte control_header[wire::FragHeader::size];
    Frag control_frag;

  private:
    bool make_ud_ah();

    Module& module_;
    wire::PortAddress remote_port_;
    verbs::QueuePair qp_;
    verbs::AddressHandle ud_ah_;
    Connection conn_;
    Frag* pending_head_ = nullptr;
    Frag* pending_tail_ = nullptr;
};

class Module final : public btl::Module {
  public:
    Module(btl::Component& component, std::shared_ptr<Device> device, std::uint8_t port,
           const ibv_port_attr& port_attr, const Config& config, btl::InitContext& ctx,
           log::Stream out);
    ~Module() override;

    // Creates the queues, buffers and UD QP; throws std::runtime_error with
    // the reason when the port cannot be used.
    void setup();
    std::string name() const override;

    // --- btl::Module -----------------------------------------------------------
    btl::Rdma* rdma() noexcept override { return &one_sided_; }
    btl::Atomics* atomics() noexcept override { return &atomics_; }

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
    void dump(btl::Endpoint* endpoint, int verbosity) override;
    Status finalize() override;

    // --- used by Endpoint and Device -----------------------------------------------
    const log::Stream& out() const noexcept { return out_; }
    Port& port() noexcept { return port_; }

    ReceiveQueue& receive_queue() noexcept { return receive_queue_; }
    ConnectionManager& connections() noexcept { return cm_; }
    EndpointTable& endpoints() noexcept { return endpoints_; }
    // The endpoint of a peer, created from its modex address when needed (by
    // add_procs, or when the peer asks to connect first); nullptr if unreachable.
    Endpoint* endpoint_for(Rank peer);
    void endpoint_connected(Endpoint& ep) noexcept;
    void endpoint_failed(Endpoint& ep, const char* reason) noexcept;

    // Async events routed by the Device.
    void on_async_event(const ibv_async_event& e) noexcept;

    // --- used by OneSided, RemoteAtomics and SendQueue ---------------------------------
    FragPools& fragments() noexcept { return frags_; }
    // Posts f (or queues it behind the endpoint's pending work); on failure f
    // goes back to the pool.
    Status start_rdma(btl::Endpoint* endpoint, RdmaFrag* f) noexcept;
    // Returns f to the pool, then calls its callback with s.
    void complete_rdma(RdmaFrag* f, Status s) noexcept;
    ProgressEngine& progress_engine() const noexcept { return progress_; }

    // --- used by Completions ---------------------------------------------------------
    // Hands a fragment's payload to the active-message table; false (an error
    // reported) when nobody registered its tag.
    bool dispatch(Endpoint& ep, btl::Tag tag, std::span<const std::byte> payload) noexcept;
    // Posts f to ep, or queues it behind ep's pending work (connecting first
    // when ep is idle); unreachable when ep failed.
    Status submit(Endpoint& ep, Frag* f) noexcept;
    SendQueue& send_queue() noexcept { return send_queue_; }
    RemoteAtomics& remote_atomics() noexcept { return atomics_; }

    // --- used by ConnectionManager ----------------------------------------------------
    // The endpoint of `peer` a connection message is for: an existing one, or
    // for a request a new one (the upper layer adds peers at their first
    // send); nullptr when there is none.
    Endpoint* cm_endpoint(Rank peer, bool request) noexcept;
    // Polls the RC queues only while some endpoint connects, is connected or
    // has work; listens for connection requests while the job has others.
    void update_progress() noexcept;

  private:
    // Fragment pools.

    // Posting: false when a resource (credit, send slot, CQ room) is short and
    // the fragment must wait; an error from verbs fails the endpoint.

    // Completions.
    static int progress_rc(void* self) noexcept;
    static int progress_cm(void* self) noexcept;
    void service_attention() noexcept;
    void fail_pending(Endpoint& ep) noexcept;
    void destroy_endpoint(Endpoint* ep) noexcept;

    std::shared_ptr<Device> device_;
    Config config_;
    rt::Runtime& runtime_;
    ProgressEngine& progress_;
    btl::AmTable& am_table_;
    log::Stream out_;
    std::uint64_t job_key_ = 0;
    bool port_down_ = false;

    // Declared before the queues that use their registrations, so destroyed
    // after them.
    OneSided one_sided_{*this};
    RemoteAtomics atomics_{*this, one_sided_};

    // Registered memory, declared before the queues that use it, so freed
    // after them: send fragments and the scratch word of non-fetching device
    // atomics, the connection manager's slots (and the receive buffers, in
    // receive_queue_).
    RegisteredBlocks blocks_;
    FragPools frags_;
    ReceiveQueue receive_queue_{*this};

    // Its completion queues and shared receive queue go before the chunks
    // of receive buffers, after every endpoint's queue pair.
    Port port_;
    // Connection manager: UD QP, its CQ and buffers.
    ConnectionManager cm_{*this};
    SendQueue send_queue_{*this};
    Completions completions_{*this};

    // Peers.
    EndpointTable endpoints_;
    std::uint32_t active_endpoints_ = 0;   // connecting, connected or with work
    std::uint32_t waiting_endpoints_ = 0;  // in the handshake: the timer runs
    ProgressEngine::Handle rc_handle_;
    ProgressEngine::Handle cm_handle_;
};

}  // namespace transit::openib
