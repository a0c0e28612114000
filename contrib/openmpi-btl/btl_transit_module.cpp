// The Open MPI module operations, each a translation around one call into the
// Transit module.  Completion semantics are the same on both sides (1 = done
// inline, success = callback later, out of resource = retry), so the work is in
// the objects: descriptors get an Open MPI face, completions get routed back.
#include "btl_transit_module.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <new>

namespace transit::ompi {
namespace {

Adapter& self(mca_btl_base_module_t* m) noexcept {
    return Adapter::of(m);
}

auto* reg(mca_btl_base_registration_handle_t* h) noexcept {
    return reinterpret_cast<btl::RegistrationHandle*>(h);
}

// --- completions (Transit -> Open MPI) ----------------------------------------

void on_send_complete(btl::Module*, btl::Endpoint* ep, btl::Descriptor* d, Status s) noexcept {
    auto* f = static_cast<Frag*>(d->cbdata);
    Adapter* a = f->owner;
    // Read before the callback: without ownership it may free the descriptor.
    const bool owned = (f->des.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) != 0;
    if (f->des.des_cbfunc != nullptr) f->des.des_cbfunc(a->ompi(), outer(ep), &f->des, to_opal(s));
    if (owned) a->release(f);  // Transit frees the inner descriptor itself
}

void on_rdma_complete(btl::Module*, btl::Endpoint* ep, void* local_address,
                      btl::RegistrationHandle* local_handle, void* context, void*,
                      Status s) noexcept {
    RdmaOp* op = static_cast<RdmaOp*>(context);
    const RdmaOp copy = *op;
    copy.owner->release(op);
    copy.cbfunc(copy.owner->ompi(), outer(ep), local_address,
                reinterpret_cast<mca_btl_base_registration_handle_t*>(local_handle), copy.context,
                copy.cbdata, to_opal(s));
}

// Transit may finish an RDMA operation inline; Open MPI always wants its callback.
int finish_rdma(Adapter& a, RdmaOp* op, Status s, mca_btl_base_endpoint_t* ep, void* local,
                mca_btl_base_registration_handle_t* handle) noexcept {
    if (s == Status::success) return OPAL_SUCCESS;
    const RdmaOp copy = *op;
    a.release(op);
    if (s != Status::completed) return to_opal(s);
    copy.cbfunc(a.ompi(), ep, local, handle, copy.context, copy.cbdata, OPAL_SUCCESS);
    return OPAL_SUCCESS;
}

void on_error(btl::Module* m, std::uint32_t flags, Rank peer, const char* info,
              void* cbdata) noexcept {
    auto* a = static_cast<Adapter*>(cbdata);
    opal_proc_t* proc = peer == any_rank ? nullptr : a->proc_of(peer);
    if (a->error_cb == nullptr || !forward_error(m, peer, flags, proc, info)) return;
    a->error_cb(a->ompi(), static_cast<int>(flags), proc, const_cast<char*>(info));
}

// --- peers -------------------------------------------------------------------

int add_procs(mca_btl_base_module_t* m, size_t nprocs, opal_proc_t** procs,
              mca_btl_base_endpoint_t** endpoints, opal_bitmap_t* reachable) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    try {
        before_first_add_procs();
        const opal_jobid_t job = OPAL_PROC_MY_NAME.jobid;
        std::vector<Rank> ranks;
        std::vector<std::size_t> where;  // position in Open MPI's array
        for (std::size_t i = 0; i < nprocs; ++i) {
            // Transit's ranks are those of our own job; others are peers outside it.
            if (procs[i]->proc_name.jobid != job) {
                const Foreign& f = reach_foreign(procs[i]);
                if (f.via != &a) continue;
                endpoints[i] = outer(f.endpoint);
                if (reachable != nullptr) opal_bitmap_set_bit(reachable, static_cast<int>(i));
                continue;
            }
            ranks.push_back(procs[i]->proc_name.vpid);
            where.push_back(i);
        }
        std::vector<btl::Endpoint*> eps(ranks.size(), nullptr);
        btl::Reachability reach(ranks.size());
        if (Status s = a.inner().add_procs(ranks, eps, reach); !ok(s)) return to_opal(s);
        for (std::size_t j = 0; j < ranks.size(); ++j) {
            if (!reach.test(j)) continue;
            endpoints[where[j]] = outer(eps[j]);
            a.remember(ranks[j], procs[where[j]]);
            if (reachable != nullptr) opal_bitmap_set_bit(reachable, static_cast<int>(where[j]));
        }
        a.sync_attributes();
        note_reached(ranks, reach);
        return OPAL_SUCCESS;
    } catch (const std::bad_alloc&) {
        return OPAL_ERR_OUT_OF_RESOURCE;
    } catch (...) {
        return OPAL_ERROR;
    }
}

int del_procs(mca_btl_base_module_t* m, size_t nprocs, opal_proc_t** procs,
              mca_btl_base_endpoint_t** endpoints) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    try {
        std::vector<Rank> ranks;
        std::vector<btl::Endpoint*> eps;
        const opal_jobid_t job = OPAL_PROC_MY_NAME.jobid;
        for (std::size_t i = 0; i < nprocs; ++i) {
            if (endpoints[i] == nullptr) continue;
            if (procs[i]->proc_name.jobid != job) {
                forget_foreign(procs[i]);
                continue;
            }
            ranks.push_back(procs[i]->proc_name.vpid);
            eps.push_back(inner(endpoints[i]));
            a.remember(procs[i]->proc_name.vpid, nullptr);
        }
        return to_opal(a.inner().del_procs(ranks, eps));
    } catch (...) {
        return OPAL_ERROR;
    }
}

int register_tag(mca_btl_base_module_t*, mca_btl_base_tag_t tag, mca_btl_base_module_recv_cb_fn_t,
                 void*) {
    const auto held = calls().hold();
    // The trigger table already holds (cbfunc, cbdata); the forwarder reads it.
    return forward_tag(tag);
}

int register_error(mca_btl_base_module_t* m, mca_btl_base_module_error_cb_fn_t cb) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    a.error_cb = cb;
    return to_opal(a.inner().register_error(&on_error, &a));
}

int finalize(mca_btl_base_module_t* m) {
    const auto held = calls().hold();
    // The Transit module lives until the component closes (its framework owns
    // it); here Open MPI only stops hearing about errors.
    self(m).error_cb = nullptr;
    return OPAL_SUCCESS;
}

// --- sends -------------------------------------------------------------------

mca_btl_base_descriptor_t* alloc(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep,
                                 uint8_t order, size_t size, uint32_t flags) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    btl::Descriptor* d = a.inner().alloc(inner(ep), order, size, flags);
    return d != nullptr ? a.wrap(d, flags) : nullptr;
}

int free_des(mca_btl_base_module_t* m, mca_btl_base_descriptor_t* des) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    auto* f = reinterpret_cast<Frag*>(des);
    const Status s = a.inner().free(f->inner);
    if (ok(s)) a.release(f);
    return to_opal(s);
}

// A contiguous source goes to Transit as a pointer (it may send in place); any
// other layout is packed by Open MPI's convertor into a Transit fragment.
btl::Descriptor* prepare_packed(Adapter& a, btl::Endpoint* ep, opal_convertor_t* conv,
                                uint8_t order, size_t reserve, size_t* size,
                                uint32_t flags) noexcept {
    btl::Descriptor* d = a.inner().alloc(ep, order, reserve + *size, flags);
    if (d == nullptr || d->segments[0].len < reserve) {
        if (d != nullptr) a.inner().free(d);
        return nullptr;
    }
    iovec iov{static_cast<char*>(d->segments[0].addr) + reserve, d->segments[0].len - reserve};
    uint32_t count = 1;
    size_t packed = std::min(iov.iov_len, *size);
    iov.iov_len = packed;
    if (opal_convertor_pack(conv, &iov, &count, &packed) < 0) {
        a.inner().free(d);
        return nullptr;
    }
    *size = packed;
    d->segments[0].len = reserve + packed;
    return d;
}

mca_btl_base_descriptor_t* prepare_src(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep,
                                       opal_convertor_t* conv, uint8_t order, size_t reserve,
                                       size_t* size, uint32_t flags) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    btl::Descriptor* d = nullptr;
    if (*size == 0) {
        // A zero-byte message comes with a convertor nobody prepared: leave it alone.
        d = a.inner().alloc(inner(ep), order, reserve, flags);
        if (d != nullptr) d->segments[0].len = std::min<std::uint64_t>(d->segments[0].len, reserve);
    } else if (opal_convertor_need_buffers(conv) == 0) {
        void* data = nullptr;
        opal_convertor_get_current_pointer(conv, &data);
        btl::Convertor source(data, *size);
        d = a.inner().prepare_src(inner(ep), source, order, reserve, *size, flags);
        if (d != nullptr) {
            size_t position = conv->bConverted + *size;
            opal_convertor_set_position(conv, &position);
        }
    } else {
        d = prepare_packed(a, inner(ep), conv, order, reserve, size, flags);
    }
    return d != nullptr ? a.wrap(d, flags) : nullptr;
}

int send(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, mca_btl_base_descriptor_t* des,
         mca_btl_base_tag_t tag) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    auto* f = reinterpret_cast<Frag*>(des);
    btl::Descriptor* d = f->inner;
    const std::uint32_t flags = des->des_flags;
    d->flags = flags;
    d->segment_count = static_cast<std::uint32_t>(des->des_segment_count);
    d->cbfunc = &on_send_complete;
    d->cbdata = f;
    const Status s = a.inner().send(inner(ep), d, tag);
    // Done inline, owned by the transport, no callback asked: Transit has
    // already taken its descriptor back, and nobody will return ours.
    if (s == Status::completed && (flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) &&
        !(flags & MCA_BTL_DES_SEND_ALWAYS_CALLBACK))
        a.release(f);
    return to_opal(s);
}

int sendi(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, opal_convertor_t* conv,
          void* header, size_t header_size, size_t payload_size, uint8_t order, uint32_t flags,
          mca_btl_base_tag_t tag, mca_btl_base_descriptor_t** des) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    if (payload_size != 0 && opal_convertor_need_buffers(conv) != 0) {
        // Transit's sendi takes contiguous data; hand back a fragment to pack.
        if (des != nullptr) *des = alloc(m, ep, order, header_size + payload_size, flags);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    void* data = nullptr;
    if (payload_size != 0) opal_convertor_get_current_pointer(conv, &data);
    btl::Convertor source(data, payload_size);
    btl::Descriptor* left = nullptr;
    const Status s = a.inner().sendi(inner(ep), &source, header, header_size, payload_size, order,
                                     flags, tag, des != nullptr ? &left : nullptr);
    if (s == Status::completed) {
        if (payload_size != 0) {
            size_t position = conv->bConverted + payload_size;
            opal_convertor_set_position(conv, &position);
        }
        return OPAL_SUCCESS;
    }
    if (des != nullptr) *des = left != nullptr ? a.wrap(left, flags) : nullptr;
    return s == Status::success ? OPAL_ERR_OUT_OF_RESOURCE : to_opal(s);
}

// --- one-sided -----------------------------------------------------------------

// The arguments Open MPI's put, get and atomics share, as Transit's request;
// the completion comes to on_rdma_complete with the adapter's record.
template <typename Request>
Request request_of(mca_btl_base_endpoint_t* ep, void* local, uint64_t remote,
                   mca_btl_base_registration_handle_t* lh, mca_btl_base_registration_handle_t* rh,
                   int flags, int order, RdmaOp* record) noexcept {
    Request r{};
    r.endpoint = inner(ep);
    r.local = local;
    r.remote = remote;
    r.local_handle = reg(lh);
    r.remote_handle = reg(rh);
    r.flags = flags;
    r.order = order;
    r.cb = &on_rdma_complete;
    r.cbcontext = record;
    return r;
}

int put(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, void* local, uint64_t remote,
        mca_btl_base_registration_handle_t* lh, mca_btl_base_registration_handle_t* rh, size_t size,
        int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void* context, void* cbdata) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    RdmaOp* op = a.take_op(cb, context, cbdata);
    if (op == nullptr) return OPAL_ERR_OUT_OF_RESOURCE;
    auto r = request_of<btl::RdmaRequest>(ep, local, remote, lh, rh, flags, order, op);
    r.size = size;
    const Status s = a.rdma().put(r);
    return finish_rdma(a, op, s, ep, local, lh);
}

int get(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, void* local, uint64_t remote,
        mca_btl_base_registration_handle_t* lh, mca_btl_base_registration_handle_t* rh, size_t size,
        int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void* context, void* cbdata) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    RdmaOp* op = a.take_op(cb, context, cbdata);
    if (op == nullptr) return OPAL_ERR_OUT_OF_RESOURCE;
    auto r = request_of<btl::RdmaRequest>(ep, local, remote, lh, rh, flags, order, op);
    r.size = size;
    const Status s = a.rdma().get(r);
    return finish_rdma(a, op, s, ep, local, lh);
}

int atomic_op(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, uint64_t remote,
              mca_btl_base_registration_handle_t* rh, mca_btl_base_atomic_op_t op, uint64_t operand,
              int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void* context,
              void* cbdata) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    RdmaOp* rec = a.take_op(cb, context, cbdata);
    if (rec == nullptr) return OPAL_ERR_OUT_OF_RESOURCE;
    auto r = request_of<btl::AtomicRequest>(ep, nullptr, remote, nullptr, rh, flags, order, rec);
    r.op = static_cast<btl::AtomicOp>(op);
    r.operand = operand;
    const Status s = a.atomics().atomic_op(r);
    return finish_rdma(a, rec, s, ep, nullptr, nullptr);
}

int atomic_fop(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, void* local, uint64_t remote,
               mca_btl_base_registration_handle_t* lh, mca_btl_base_registration_handle_t* rh,
               mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
               mca_btl_base_rdma_completion_fn_t cb, void* context, void* cbdata) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    RdmaOp* rec = a.take_op(cb, context, cbdata);
    if (rec == nullptr) return OPAL_ERR_OUT_OF_RESOURCE;
    auto r = request_of<btl::AtomicRequest>(ep, local, remote, lh, rh, flags, order, rec);
    r.op = static_cast<btl::AtomicOp>(op);
    r.operand = operand;
    const Status s = a.atomics().atomic_fop(r);
    return finish_rdma(a, rec, s, ep, local, lh);
}

int atomic_cswap(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, void* local,
                 uint64_t remote, mca_btl_base_registration_handle_t* lh,
                 mca_btl_base_registration_handle_t* rh, uint64_t compare, uint64_t value,
                 int flags, int order, mca_btl_base_rdma_completion_fn_t cb, void* context,
                 void* cbdata) {
    const auto held = calls().hold();
    Adapter& a = self(m);
    RdmaOp* rec = a.take_op(cb, context, cbdata);
    if (rec == nullptr) return OPAL_ERR_OUT_OF_RESOURCE;
    auto r = request_of<btl::AtomicRequest>(ep, local, remote, lh, rh, flags, order, rec);
    r.operand = value;
    r.compare = compare;
    const Status s = a.atomics().atomic_cswap(r);
    return finish_rdma(a, rec, s, ep, local, lh);
}

mca_btl_base_registration_handle_t* register_mem(mca_btl_base_module_t* m,
                                                 mca_btl_base_endpoint_t* ep, void* base,
                                                 size_t size, uint32_t flags) {
    const auto held = calls().hold();
    btl::Endpoint* target = ep == MCA_BTL_ENDPOINT_ANY ? nullptr : inner(ep);
    // Another job's process reads and writes our memory over the connection
    // it opened to us, which Transit knows by another peer id than ours to
    // it: such a region is open to whoever holds its key.
    if (target != nullptr && outside_job(*target)) target = nullptr;
    try {
        // The handle's first registration_handle_size bytes are its packed
        // form, which is exactly what Open MPI copies to peers.
        return reinterpret_cast<mca_btl_base_registration_handle_t*>(
            self(m).rdma().register_mem(target, base, size, flags & MCA_BTL_REG_FLAG_ACCESS_ANY));
    } catch (...) {
        return nullptr;
    }
}

int deregister_mem(mca_btl_base_module_t* m, mca_btl_base_registration_handle_t* h) {
    const auto held = calls().hold();
    try {
        return to_opal(self(m).rdma().deregister_mem(reg(h)));
    } catch (...) {
        return OPAL_ERROR;
    }
}

int flush(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep) {
    const auto held = calls().hold();
    try {
        return to_opal(self(m).rdma().flush(ep == nullptr ? nullptr : inner(ep)));
    } catch (...) {
        return OPAL_ERROR;
    }
}

void dump(mca_btl_base_module_t* m, mca_btl_base_endpoint_t* ep, int verbose) {
    const auto held = calls().hold();
    try {
        self(m).inner().dump(ep == nullptr ? nullptr : inner(ep), verbose);
    } catch (...) {
    }
}

}  // namespace

Adapter::Adapter(btl::Module& inner, mca_btl_base_component_t& component, std::size_t records)
    : inner_(inner),
      rdma_(inner.rdma()),
      atomics_(inner.atomics()),
      frags_(records),
      ops_(records) {
    module_.adapter = this;
    module_.super.btl_component = &component;
    sync_attributes();
    fill_function_table();
}

void Adapter::sync_attributes() noexcept {
    const btl::Attributes& t = inner_.attributes();
    mca_btl_base_module_t& o = module_.super;
    o.btl_eager_limit = t.eager_limit;
    o.btl_rndv_eager_limit = t.rndv_eager_limit;
    o.btl_max_send_size = t.max_send_size;
    o.btl_rdma_pipeline_send_length = t.rdma_pipeline_send_length;
    o.btl_rdma_pipeline_frag_size = t.rdma_pipeline_frag_size;
    o.btl_min_rdma_pipeline_size = t.min_rdma_pipeline_size;
    o.btl_exclusivity = t.exclusivity;
    o.btl_latency = t.latency;
    o.btl_bandwidth = t.bandwidth;
    // A progress thread inside Transit would be news to Open MPI: not claimed.
    o.btl_flags = t.flags & ~btl::flags::progress_thread_enabled;
    o.btl_atomic_flags = t.atomic_flags;
    o.btl_registration_handle_size = t.registration_handle_size;
    o.btl_get_limit = t.get_limit;
    o.btl_get_alignment = t.get_alignment;
    o.btl_put_limit = t.put_limit;
    o.btl_put_alignment = t.put_alignment;
    o.btl_get_local_registration_threshold = t.get_local_registration_threshold;
    o.btl_put_local_registration_threshold = t.put_local_registration_threshold;
    // Open MPI registers memory whenever the function exists; a transport
    // without handles must not be asked (a null handle would read as failure).
    const bool handles = t.registration_handle_size != 0 && rdma_ != nullptr;
    o.btl_register_mem = handles ? &register_mem : nullptr;
    o.btl_deregister_mem = handles ? &deregister_mem : nullptr;
}

void Adapter::fill_function_table() noexcept {
    mca_btl_base_module_t& o = module_.super;
    o.btl_add_procs = &add_procs;
    o.btl_del_procs = &del_procs;
    o.btl_register = &register_tag;
    o.btl_finalize = &finalize;
    o.btl_alloc = &alloc;
    o.btl_free = &free_des;
    o.btl_prepare_src = &prepare_src;
    o.btl_send = &send;
    o.btl_sendi = &sendi;
    o.btl_dump = &dump;
    o.btl_register_error = &register_error;
    if (rdma_ != nullptr) {
        o.btl_put = &put;
        o.btl_get = &get;
        o.btl_flush = &flush;
    }
    if (atomics_ != nullptr) {
        o.btl_atomic_op = &atomic_op;
        o.btl_atomic_fop = &atomic_fop;
        o.btl_atomic_cswap = &atomic_cswap;
    }
}

mca_btl_base_descriptor_t* Adapter::wrap(btl::Descriptor* d, std::uint32_t flags) noexcept {
    Frag* f = frags_.take();
    if (f == nullptr) [[unlikely]] {
        inner_.free(d);
        return nullptr;
    }
    f->inner = d;
    f->owner = this;
    mca_btl_base_descriptor_t& des = f->des;
    des.des_segments = reinterpret_cast<mca_btl_base_segment_t*>(d->segments);
    des.des_segment_count = d->segment_count;
    des.des_cbfunc = nullptr;
    des.des_cbdata = nullptr;
    des.des_context = nullptr;
    des.des_flags = flags;
    des.order = d->order;
    return &des;
}

RdmaOp* Adapter::take_op(mca_btl_base_rdma_completion_fn_t fn, void* context,
                         void* cbdata) noexcept {
    RdmaOp* op = ops_.take();
    if (op == nullptr) [[unlikely]]
        return nullptr;
    op->cbfunc = fn;
    op->context = context;
    op->cbdata = cbdata;
    op->owner = this;
    return op;
}

void Adapter::remember(Rank r, opal_proc_t* proc) {
    if (r >= procs_.size()) procs_.resize(std::size_t{r} + 1, nullptr);
    procs_[r] = proc;
}

}  // namespace transit::ompi
