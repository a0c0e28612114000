// One Open MPI BTL module per Transit module.  Open MPI calls the module's
// function table; each entry translates its arguments and makes the one virtual
// call into the Transit module.  Nothing is translated that can be passed as it
// is: endpoints, registration handles and segments are Transit's own objects
// under Open MPI's names.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ompi_headers.hpp"
#include "transit/btl/module.hpp"
#include "transit/call_lock.hpp"

namespace transit::ompi {

class Adapter;

// An Open MPI descriptor wrapping a Transit descriptor.  des_segments points at
// the Transit descriptor's segments, so what the PML writes there (headers,
// lengths) is what Transit sends.
struct Frag {
    mca_btl_base_descriptor_t des;
    btl::Descriptor* inner;
    Adapter* owner;
    Frag* next;
};

// The Open MPI completion of a put/get/atomic in flight through Transit.
struct RdmaOp {
    mca_btl_base_rdma_completion_fn_t cbfunc;
    void* context;
    void* cbdata;
    Adapter* owner;
    RdmaOp* next;
};

// A fixed set of records and a free stack: taking and returning one is a few
// loads and stores, never an allocation.  Empty means out of resource, which
// the PML handles by queuing and retrying.
template <typename T>
class Pool {
  public:
    explicit Pool(std::size_t n) : items_(std::make_unique<T[]>(n)) {
        for (std::size_t i = 0; i < n; ++i) put(&items_[i]);
    }
    T* take() noexcept {
        T* t = head_;
        if (t != nullptr) [[likely]]
            head_ = t->next;
        return t;
    }
    void put(T* t) noexcept {
        t->next = head_;
        head_ = t;
    }

  private:
    std::unique_ptr<T[]> items_;
    T* head_ = nullptr;
};

// What Open MPI holds: its module struct first (it casts our pointer to it),
// then the way back to the adapter.
struct OmpiModule {
    mca_btl_base_module_t super;
    Adapter* adapter;
};

class Adapter {
  public:
    Adapter(btl::Module& inner, mca_btl_base_component_t& component, std::size_t records);
    Adapter(const Adapter&) = delete;
    Adapter& operator=(const Adapter&) = delete;

    static Adapter& of(mca_btl_base_module_t* m) noexcept {
        return *reinterpret_cast<OmpiModule*>(m)->adapter;
    }
    mca_btl_base_module_t* ompi() noexcept { return &module_.super; }
    btl::Module& inner() noexcept { return inner_; }
    // The transport's capabilities, asked once; Open MPI's put/get/atomic
    // entries are set only when they exist.
    btl::Rdma& rdma() noexcept { return *rdma_; }
    btl::Atomics& atomics() noexcept { return *atomics_; }

    // Copies Transit's attributes into Open MPI's module (again after add_procs:
    // a transport may drop a capability once it has met its peers).
    void sync_attributes() noexcept;

    // Wraps a Transit descriptor; nullptr (and the descriptor returned to
    // Transit) when no record is left.
    mca_btl_base_descriptor_t* wrap(btl::Descriptor* d, std::uint32_t flags) noexcept;
    void release(Frag* f) noexcept { frags_.put(f); }
    RdmaOp* take_op(mca_btl_base_rdma_completion_fn_t fn, void* context, void* cbdata) noexcept;
    void release(RdmaOp* op) noexcept { ops_.put(op); }

    // Peers as Open MPI knows them, for error reports (index: Transit rank).
    void remember(Rank r, opal_proc_t* proc);
    opal_proc_t* proc_of(Rank r) const noexcept { return r < procs_.size() ? procs_[r] : nullptr; }
    mca_btl_base_module_error_cb_fn_t error_cb = nullptr;

  private:
    void fill_function_table() noexcept;

    OmpiModule module_{};
    btl::Module& inner_;
    btl::Rdma* rdma_;
    btl::Atomics* atomics_;
    Pool<Frag> frags_;
    Pool<RdmaOp> ops_;
    std::vector<opal_proc_t*> procs_;
};

// The Transit rank behind an Open MPI endpoint and back: the same pointer.
inline btl::Endpoint* inner(mca_btl_base_endpoint_t* ep) noexcept {
    return reinterpret_cast<btl::Endpoint*>(ep);
}
inline mca_btl_base_endpoint_t* outer(btl::Endpoint* ep) noexcept {
    return reinterpret_cast<mca_btl_base_endpoint_t*>(ep);
}

// Held around every call from Open MPI into Transit (module operations and
// progress), switched on under MPI_THREAD_MULTIPLE: Transit's modules are not
// safe for concurrent calls, nor are the adapter's pools.  Recursive: Open MPI's
// callbacks, run under it, send again.
CallLock& calls() noexcept;

// Implemented by the component: registers the Transit active-message forwarder
// for an Open MPI tag, and refreshes the runtime's view of the peers once.
int forward_tag(mca_btl_base_tag_t tag) noexcept;
void before_first_add_procs();
// Called by each module's add_procs with the ranks it was given and those it
// reaches.  Open MPI asks every module with the same peers; once the last has
// answered, a peer none of them reaches is reported once, at the default
// verbosity, with what each offered transport reaches (Open MPI itself only
// says that no btl reaches it).
void note_reached(std::span<const Rank> ranks, const btl::Reachability& reached);

// A process of another job (MPI_Comm_spawn, MPI_Comm_connect/accept): Transit
// reaches it as a peer outside the job, by the address it published in Open
// MPI's modex, through one module, the most exclusive that reaches it (chosen
// at the first add_procs that names it, for every module).  `via` is null when
// none reaches it: said once, with why.
struct Foreign {
    Rank id = any_rank;  // the dynamic peer id of our connection to it
    Adapter* via = nullptr;
    btl::Endpoint* endpoint = nullptr;
};
const Foreign& reach_foreign(opal_proc_t* proc);
// Its connection closes (the other side sees a departure) and its id goes.
void forget_foreign(opal_proc_t* proc) noexcept;
// Whether the endpoint is that of another job's process.
bool outside_job(const btl::Endpoint& ep) noexcept;
// Whether `m`'s error report for `peer` goes on to Open MPI: not the
// departure of another job's process (it disconnected or ended), nor a report
// naming the connection such a process opened to us (Open MPI knows it by
// ours to it; that connection is released at the end of the progress call).
bool forward_error(btl::Module* m, Rank peer, std::uint32_t flags, const opal_proc_t* proc,
                   const char* info);

}  // namespace transit::ompi
