// The BTL module: one transport instance (one NIC, one shared-memory domain...).
//
// The core interface (Module) is what every transport has: peers, the send
// path, finalize.  One-sided operations are capability interfaces a module
// offers or not (rdma(), atomics()); their operations take one request struct.
//
// Completion semantics of every data-moving operation:
//   Status::completed       done inline; no callback will come (for send():
//                           unless des_flags::send_always_callback is set)
//   Status::success         accepted; the callback comes later from progress
//   Status::out_of_resource nothing happened; the caller queues and retries
//   other errors            nothing happened; the operation failed
//
// Hot-path rules: alloc, free, prepare_src, send, sendi, put, get and the atomics
// must not throw, allocate from the heap, or take locks when single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "transit/btl/types.hpp"

namespace transit::btl {

class Component;

// Per-peer state of a module (a socket, a FIFO pointer, a queue pair).
class Endpoint {
  public:
    explicit Endpoint(Rank peer) : peer_(peer) {}
    virtual ~Endpoint() = default;
    Rank peer() const noexcept { return peer_; }

  private:
    Rank peer_;
};

struct Attributes {
    std::size_t eager_limit = 4096;       // largest first fragment sent eagerly
    std::size_t rndv_eager_limit = 4096;  // data carried by a rendezvous first fragment
    std::size_t max_send_size = 65536;    // largest fragment
    std::size_t rdma_pipeline_send_length = 1 << 20;
    std::size_t rdma_pipeline_frag_size = 1 << 20;
    std::size_t min_rdma_pipeline_size = 0;
    std::uint32_t exclusivity = exclusivity_low;
    std::uint32_t latency = 0;       // relative, lower is better
    std::uint32_t bandwidth = 0;     // MB/s per endpoint
    std::uint32_t flags = 0;         // btl::flags
    std::uint32_t atomic_flags = 0;  // btl::atomic_support
    // btl::reach: the peers it may reach.  0 (not said) makes the framework
    // start every component that could stand in for this module.
    std::uint32_t reach = 0;
    std::size_t registration_handle_size = 0;
    std::size_t get_limit = std::numeric_limits<std::size_t>::max();
    std::size_t get_alignment = 0;
    std::size_t put_limit = std::numeric_limits<std::size_t>::max();
    std::size_t put_alignment = 0;
    std::size_t get_local_registration_threshold = 0;
    std::size_t put_local_registration_threshold = 0;
};

// One put or get.  Passed by const reference; the module copies what it keeps.
struct RdmaRequest {
    Endpoint* endpoint = nullptr;
    void* local = nullptr;     // source of a put, destination of a get
    std::uint64_t remote = 0;  // address in the peer
    RegistrationHandle* local_handle = nullptr;
    const RegistrationHandle* remote_handle = nullptr;
    std::size_t size = 0;
    int flags = 0;
    int order = no_order;
    RdmaCompletionFn cb = nullptr;  // called from progress when the module answers success
    void* cbcontext = nullptr;
    void* cbdata = nullptr;
};

// One atomic on a peer's memory.  atomic_op ignores local/local_handle;
// atomic_fop and atomic_cswap store the old value at local; only atomic_cswap
// reads compare (operand is then the value to store).  flags: btl::atomic_flags.
struct AtomicRequest {
    Endpoint* endpoint = nullptr;
    void* local = nullptr;
    std::uint64_t remote = 0;
    RegistrationHandle* local_handle = nullptr;
    const RegistrationHandle* remote_handle = nullptr;
    AtomicOp op = AtomicOp::add;
    std::uint64_t operand = 0;
    std::uint64_t compare = 0;
    int flags = 0;
    int order = no_order;
    RdmaCompletionFn cb = nullptr;
    void* cbcontext = nullptr;
    void* cbdata = nullptr;
};

// The request as each atomic reads it, for a component whose three atomics
// share one path: atomic_op has no local result, only atomic_cswap a compare
// value, and atomic_cswap's op is swap.
inline AtomicRequest as_atomic_op(const AtomicRequest& request) noexcept {
    AtomicRequest r = request;
    r.local = nullptr;
    r.local_handle = nullptr;
    r.compare = 0;
    return r;
}
inline AtomicRequest as_atomic_fop(const AtomicRequest& request) noexcept {
    AtomicRequest r = request;
    r.compare = 0;
    return r;
}
inline AtomicRequest as_atomic_cswap(const AtomicRequest& request) noexcept {
    AtomicRequest r = request;
    r.op = AtomicOp::swap;
    return r;
}

// Capability: one-sided data movement (flags::put / flags::get) and the memory
// registration and flush it needs.  A module offers it through Module::rdma().
class Rdma {
  public:
    virtual Status put(const RdmaRequest& request) noexcept = 0;
    virtual Status get(const RdmaRequest& request) noexcept = 0;

    // nullptr endpoint = usable with every peer.  Returns nullptr on failure.
    // Modules with registration_handle_size 0 may return nullptr: no handle needed.
    virtual RegistrationHandle* register_mem(Endpoint* endpoint, void* base, std::size_t size,
                                             std::uint32_t flags) = 0;
    virtual Status deregister_mem(RegistrationHandle* handle) = 0;

    // Returns once every put/get/atomic started before the call has completed
    // (to endpoint, or to all when null).  Drives progress while it waits.
    // A lost peer's operations have already ended (with peer_failed): flush
    // does not wait for them, and flush(endpoint) of a lost peer is peer_failed.
    virtual Status flush(Endpoint* endpoint) = 0;

    // Memory the module's peers reach more directly than the heap (vader: inside
    // its shared segment, so put/get are memcpy and atomics CPU atomics).
    // nullptr when the module offers none or has no room left: use the heap.
    virtual void* mem_alloc(std::size_t) noexcept { return nullptr; }
    // True when p came from this module's mem_alloc (it is released now).
    virtual bool mem_free(void*) noexcept { return false; }

  protected:
    ~Rdma() = default;  // owned through the Module
};

// Capability: atomics on registered remote memory (flags::atomic_ops /
// atomic_fops, attr_.atomic_flags).  A module offering it offers rdma() too:
// the handles come from its register_mem and its flush covers the atomics.
class Atomics {
  public:
    virtual Status atomic_op(const AtomicRequest& request) noexcept = 0;
    virtual Status atomic_fop(const AtomicRequest& request) noexcept = 0;
    virtual Status atomic_cswap(const AtomicRequest& request) noexcept = 0;

  protected:
    ~Atomics() = default;
};

// A capability (Module::extension): how many peers outside the job
// (rt::DynamicPeers) the module holds state for.  Tests and tools read it to
// see that a departed client leaves nothing behind.
class DynamicPeerRecords {
  public:
    static constexpr std::uint32_t id = 1;
    virtual std::size_t dynamic_endpoints() const noexcept = 0;
    // Fast paths handed to them that are not free again yet (vader's spare
    // fast boxes); 0 for a module that has none.
    virtual std::size_t dynamic_fast_paths() const noexcept { return 0; }

  protected:
    ~DynamicPeerRecords() = default;
};

// A capability (Module::extension): a module that carries peers outside the
// job but publishes its part of a listening address only when the context
// listens (vader makes its shared segment then, not in every process).
// listen() publishes through the runtime's modex_send; the context's address
// holds what it published.  An error leaves the module out of the address.
class Listener {
  public:
    static constexpr std::uint32_t id = 2;
    virtual Status listen() = 0;

  protected:
    ~Listener() = default;
};

// A capability (Module::extension): why the module's add_procs left a peer
// unreached, when it knows more than "not reached" (a server outside the job
// that did not answer, a part of its address this module cannot read).  Such
// a module logs the reason at verbose level only, since another module may
// reach the peer and an error line must mean that something failed; the bml
// puts the reasons in its "no transport reaches" error when none does.
class UnreachedReason {
  public:
    static constexpr std::uint32_t id = 4;
    // The reason add_procs last left `peer` unreached, or empty.
    virtual std::string unreached_reason(Rank peer) const = 0;

  protected:
    ~UnreachedReason() = default;
};

// A capability (Module::extension): the module can wake a process that sleeps
// in the kernel instead of polling (Context::wait with the block policy,
// Context::event_fd).  The pml puts every module's wait_fd() in one epoll set;
// before it sleeps it arms every module, and disarms them all when it is back.
// Race-freedom is the module's: once arm() answered armed, anything that
// arrives for it (a peer's message, a returned fragment, an accepted
// connection) makes wait_fd() readable.  A module that cannot keep that
// promise does not offer the capability, and the pml keeps polling.
// Not on the send or receive path: called only after a wait found nothing to
// do for a while (pml_base_wait_spin_time).
class WaitObject {
  public:
    static constexpr std::uint32_t id = 3;
    enum class Armed : std::uint8_t {
        armed,   // sleep: wait_fd() turns readable when work comes
        busy,    // work is already here: poll, do not sleep (nothing stays armed)
        cannot,  // the module cannot promise a wake-up now: poll (or nap) instead
    };
    // The descriptor to sleep on (readable, as poll/epoll see it), or -1 for a
    // module whose work only ever comes from this process's own calls (self).
    // The same for the module's life.
    virtual int wait_fd() const noexcept = 0;
    virtual Armed arm() noexcept = 0;
    // Back from the sleep (woken or not): peers stop ringing, readiness that was
    // only a wake-up is consumed.  Called once after each arm() that answered armed.
    virtual void disarm() noexcept = 0;

  protected:
    ~WaitObject() = default;
};

class Module {
  public:
    explicit Module(Component& component) : component_(&component) {}
    virtual ~Module() = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    Component& component() const noexcept { return *component_; }
    const Attributes& attributes() const noexcept { return attr_; }
    // A human-readable name ("tcp:eth0", "vader"), for verbose output.
    virtual std::string name() const;

    // --- capabilities ----------------------------------------------------------
    // The optional interfaces this module offers, or nullptr.  Asked once at
    // setup (the bml keeps the answers beside each endpoint); the pointers live
    // as long as the module.
    virtual Rdma* rdma() noexcept { return nullptr; }
    virtual Atomics* atomics() noexcept { return nullptr; }
    // Capabilities added after ABI 3.0 come through here, so that adding one
    // changes no vtable: each interface has an id (Interface::id), and a module
    // built before it existed answers nullptr.  Ask with btl::capability<I>(m).
    virtual void* extension(std::uint32_t id) noexcept {
        (void)id;
        return nullptr;
    }

    // --- peers ---------------------------------------------------------------
    // For each peer it can reach, sets endpoints[i] and reachable.set(i).  Peer
    // addresses come from the runtime's modex.  Peers it cannot reach are left null.
    virtual Status add_procs(std::span<const Rank> peers, std::span<Endpoint*> endpoints,
                             Reachability& reachable) = 0;
    // Releases the endpoints (the pointers are invalid afterwards).
    virtual Status del_procs(std::span<const Rank> peers, std::span<Endpoint*> endpoints) = 0;

    // Errors about peers (connection lost, process died) are reported here.
    Status register_error(ErrorFn fn, void* cbdata) noexcept {
        error_fn_ = fn;
        error_cbdata_ = cbdata;
        return Status::success;
    }

    // --- sends ---------------------------------------------------------------
    // A descriptor whose single segment has room for `size` bytes (may be less
    // than asked, never more than max_send_size); nullptr when out of resources.
    virtual Descriptor* alloc(Endpoint* endpoint, std::uint8_t order, std::size_t size,
                              std::uint32_t flags) noexcept = 0;
    virtual Status free(Descriptor* descriptor) noexcept = 0;

    // A descriptor with `reserve` bytes of header space in front of up to `size`
    // bytes taken from the convertor (size is updated to what was taken).
    virtual Descriptor* prepare_src(Endpoint* endpoint, Convertor& convertor, std::uint8_t order,
                                    std::size_t reserve, std::size_t& size,
                                    std::uint32_t flags) noexcept = 0;

    virtual Status send(Endpoint* endpoint, Descriptor* descriptor, Tag tag) noexcept = 0;

    // Immediate send of header + payload_size bytes from the convertor.  Returns
    // completed when sent (never a callback); otherwise out_of_resource and, if
    // it can, a descriptor of header_size + payload_size bytes in *descriptor
    // for the caller to fill and send later.  A caller that would rather
    // allocate one itself passes a null `descriptor`.
    virtual Status sendi(Endpoint* endpoint, Convertor* convertor, const void* header,
                         std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                         std::uint32_t flags, Tag tag, Descriptor** descriptor) noexcept = 0;

    // Prints the attributes (and the endpoint's state, when a module says more).
    virtual void dump(Endpoint* endpoint, int verbosity);

    // Releases everything; the module is destroyed afterwards.
    virtual Status finalize() { return Status::success; }

  protected:
    // Modules set their attributes in the constructor and from parameters.
    Attributes attr_;

    // Reports a peer error to whoever registered (no-op if nobody did).
    void report_error(std::uint32_t error_flags, Rank peer, const char* info) noexcept {
        if (error_fn_) error_fn_(this, error_flags, peer, info, error_cbdata_);
    }

  private:
    Component* component_;
    ErrorFn error_fn_ = nullptr;
    void* error_cbdata_ = nullptr;
};

// The module's interface I (one with a static constexpr std::uint32_t id), or
// nullptr when it offers none.
template <typename I>
I* capability(Module& module) noexcept {
    return static_cast<I*>(module.extension(I::id));
}

// sendi's arguments as its contract allows them: a header pointer when there is
// a header, a convertor with payload_size bytes left when there is a payload.
// A module answers bad_param otherwise.
inline bool sendi_arguments_valid(const Convertor* convertor, const void* header,
                                  std::size_t header_size, std::size_t payload_size) noexcept {
    return (header_size == 0 || header != nullptr) &&
           (payload_size == 0 || (convertor != nullptr && payload_size <= convertor->remaining()));
}

}  // namespace transit::btl
