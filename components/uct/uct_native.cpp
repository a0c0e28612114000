// Native RDMA of the uct module: put and get by UCT's put_zcopy/get_zcopy, and
// atomics, only on a transport whose device checks the remote key on every
// access (rc, dc: native_refusal in uct_rdma_policy.hpp), with the remote key
// packed into the registration handle.  Shared memory, cma and tcp cannot
// refuse a stale or forged key, so they never carry them.  Anything native
// cannot serve (a handle without a key, a small transfer, a failure of the
// transport) goes by active messages (uct_rdma.cpp), where the target checks
// the handle.
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <thread>

#include "uct_module.hpp"

namespace transit::uct {

// --- setup -----------------------------------------------------------------------

void UctModule::open_native() {
    if (config_.rdma == RdmaMode::am) {
        out_.verbose(10, "{}: put/get by active messages (btl_uct_rdma=am)", name());
        return;
    }
    // Asked for explicitly, a missing native path is said at level 1.
    const int level = config_.rdma == RdmaMode::transport ? 1 : 10;
    uct_md_attr_t md_attr{};
    if (ucs_status_t s = uct_md_query(md_.get(), &md_attr); s != UCS_OK) {
        out_.verbose(level, "{}: native put/get not used: uct_md_query failed: {}", name(),
                     ucs_status_string(s));
        return;
    }
    if (const auto why =
            native_refusal(resource_.tl_name, (md_attr.cap.flags & UCT_MD_FLAG_REG) != 0,
                           md_attr.rkey_packed_size)) {
        out_.verbose(level, "{}: native put/get/atomics not used, active messages instead: {}",
                     name(), *why);
        return;
    }
    if (!(iface_attr_.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY)) {
        out_.verbose(level, "{}: native put/get not used: the transport has no zcopy put", name());
        return;
    }
    if (md_attr.rkey_packed_size > max_rkey_len) {
        out_.verbose(level, "{}: native put/get not used: {}'s remote keys ({} bytes) do not fit",
                     name(), resource_.name(), md_attr.rkey_packed_size);
        return;
    }
    // The transport's own memory domain registers memory and its device
    // checks the key (rc, dc): the target refuses a stale or forged key.
    rdma_md_ = md_.get();
    rdma_iface_ = iface_.get();
    rdma_component_ = resource_.component;
    rdma_attr_ = iface_attr_;
    rdma_name_ = resource_.name();
    rkey_len_ = md_attr.rkey_packed_size;
    rdma_need_memh_ = (md_attr.cap.flags & UCT_MD_FLAG_NEED_MEMH) != 0;
    rdma_md_tag_ = md_tag(resource_.md_name);
    native_put_ = true;
    native_get_ = (rdma_attr_.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) != 0;
    native_min_ = config_.rdma_min_size;
    out_.verbose(10, "{}: {} of {} bytes and more by {} (zcopy, remote key {} bytes)", name(),
                 native_get_ ? "put/get" : "put (get by active messages)", native_min_, rdma_name_,
                 rkey_len_);
}

// The peer's RDMA endpoint: the module's own endpoint, or one on cma to the
// cma interface in the peer's address.  A peer without one is served by
// active messages.
void UctModule::connect_native(UctEndpoint* e, const AddressHeader& h, const std::byte* addresses) {
    if (rdma_iface_ == iface_.get()) {
        e->rdma_ep = e->ep;
        e->rkey_component = rdma_component_;
        return;
    }
    if (h.rdma_iface_len == 0) {
        out_.verbose(10, "{}: rank {} has no {}: its put/get go by active messages", name(),
                     e->peer(), rdma_name_);
        return;
    }
    if (h.rdma_iface_len != rdma_attr_.iface_addr_len ||
        h.rdma_device_len != rdma_attr_.device_addr_len) {
        out_.verbose(10, "{}: rank {}'s {} address is malformed: active messages for put/get",
                     name(), e->peer(), rdma_name_);
        return;
    }
    // UCT reads the addresses with their natural alignment.
    std::uint64_t aligned[64] = {};
    const std::size_t len = std::size_t{h.rdma_device_len} + h.rdma_iface_len;
    if (len > sizeof aligned) return;
    std::memcpy(aligned, addresses + h.device_len + h.iface_len, len);
    const auto* base = reinterpret_cast<const std::byte*>(aligned);
    const auto* dev = reinterpret_cast<const uct_device_addr_t*>(base);
    const auto* ifa = reinterpret_cast<const uct_iface_addr_t*>(base + h.rdma_device_len);
    if (!uct_iface_is_reachable(rdma_iface_, dev, ifa)) {
        out_.verbose(10, "{}: rank {} not reachable by {}: active messages for put/get", name(),
                     e->peer(), rdma_name_);
        return;
    }
    uct_ep_params_t params{};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR | UCT_EP_PARAM_FIELD_USER_DATA;
    params.iface = rdma_iface_;
    params.dev_addr = dev;
    params.iface_addr = ifa;
    params.user_data = this;
    uct_ep_h ep = nullptr;
    if (ucs_status_t s = uct_ep_create(&params, &ep); s != UCS_OK) {
        out_.verbose(10, "{}: rank {}: {} uct_ep_create failed ({}): active messages for put/get",
                     name(), e->peer(), rdma_name_, ucs_status_string(s));
        return;
    }
    e->rdma_ep = ep;
    e->rkey_component = rdma_component_;
}

// --- registration ----------------------------------------------------------------

// Fills r.packed: with a remote key when the RDMA memory domain registers the
// memory, else the plain handle (the active-message path needs no more).
void UctModule::register_native(Registration& r, void* base, std::size_t size) noexcept {
    const PackedHandle h = r.header();
    std::array<std::byte, max_rkey_len> rkey{};
    bool with_rkey = false;
    if (rdma_md_ != nullptr && size > 0) {
        uct_mem_h memh = nullptr;
        ucs_status_t s = uct_md_mem_reg(rdma_md_, base, size, UCT_MD_MEM_ACCESS_ALL, &memh);
        if (s == UCS_OK) {
            r.md = rdma_md_;
            r.memh = memh;
            s = uct_md_mkey_pack(rdma_md_, memh, rkey.data());
            if (s == UCS_OK)
                with_rkey = true;
            else
                r.release();
        }
        if (s != UCS_OK)
            out_.verbose(10, "{}: {} cannot register {} bytes ({}): active messages for them",
                         name(), rdma_name_, size, ucs_status_string(s));
    }
    pack_handle(r.packed, h, rdma_md_tag_, std::span(rkey).first(with_rkey ? rkey_len_ : 0),
                with_rkey);
    // mem_alloc memory: the interface's own key too, for native atomics.
    if (const uct_allocated_memory_t* m = native_amo_ ? allocation_of(base, size) : nullptr) {
        std::array<std::byte, max_rkey_len> amo_key{};
        if (uct_md_mkey_pack(md_.get(), m->memh, amo_key.data()) != UCS_OK ||
            !append_rkey(r.packed, amo_md_tag_, std::span(amo_key).first(amo_rkey_len_)))
            out_.verbose(10, "{}: no native atomics on {} bytes at {}: the key was not packed",
                         name(), size, base);
    }
}

// Before the memory domain closes: the handles stay (the active-message path
// does not need the memory domain's registration).
void UctModule::release_native_registrations() noexcept {
    if (rdma_md_ == nullptr) return;
    regions_->for_each_live([this](Registration& r) {
        if (r.md == rdma_md_) r.release();
    });
}

// --- operations ------------------------------------------------------------------

namespace {

using RkeyBundles = RkeyCache<uct_rkey_bundle_t, UctEndpoint::rkey_cache_size>;

// The peer's remote key for registration `key`: from the endpoint's cache, or
// unpacked from the handle's key for one memory domain (`md_tag`) and kept.
bool cached_rkey(RkeyBundles& cache, uct_component_h component,
                 const btl::RegistrationHandle* handle, std::uint32_t md_tag, std::size_t len,
                 std::uint64_t key, uct_rkey_t& rkey) noexcept {
    if (const uct_rkey_bundle_t* b = cache.find(key)) {
        rkey = b->rkey;
        return true;
    }
    const std::byte* packed = handle_rkey(reinterpret_cast<const std::byte*>(handle), md_tag, len);
    if (packed == nullptr) return false;
    uct_rkey_bundle_t b{};
    if (uct_rkey_unpack(component, packed, &b) != UCS_OK) return false;
    cache.insert(key, b,
                 [component](uct_rkey_bundle_t& old) { uct_rkey_release(component, &old); });
    rkey = b.rkey;
    return true;
}

}  // namespace

bool UctModule::rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle, std::uint64_t key,
                         uct_rkey_t& rkey) noexcept {
    return cached_rkey(ep->rkeys, rdma_component_, handle, rdma_md_tag_, rkey_len_, key, rkey);
}

bool UctModule::local_memh(const btl::RegistrationHandle* handle, uct_mem_h& memh) const noexcept {
    memh = UCT_MEM_HANDLE_NULL;
    if (!rdma_need_memh_) return true;
    if (handle == nullptr) return false;
    // The handle is the first member of a Registration (see register_mem).
    const auto* r = reinterpret_cast<const Registration*>(handle);
    if (r->md != rdma_md_ || r->memh == nullptr) return false;
    memh = r->memh;
    return true;
}

Status UctModule::native_transfer(OpKind kind, const btl::RdmaRequest& req,
                                  std::uint64_t key) noexcept {
    auto* ep = static_cast<UctEndpoint*>(req.endpoint);
    const std::size_t size = req.size;
    if (ep->rdma_ep == nullptr || ep->rdma_broken) return Status::not_available;
    const bool put = kind == OpKind::put;
    const std::size_t max = put ? rdma_attr_.cap.put.max_zcopy : rdma_attr_.cap.get.max_zcopy;
    if (size > max) return Status::not_available;
    uct_mem_h memh = UCT_MEM_HANDLE_NULL;
    uct_rkey_t rkey = UCT_INVALID_RKEY;
    if (!local_memh(req.local_handle, memh) || !rkey_for(ep, req.remote_handle, key, rkey))
        return Status::not_available;
    if (ep->failed) [[unlikely]]
        return Status::peer_failed;
    RdmaOp* op = start_native(kind, req);
    if (op == nullptr) return Status::out_of_resource;
    op->remote_address = req.remote;
    op->size = size;
    uct_iov_t iov{req.local, size, memh, 0, 1};
    set_cma_progress(true);  // UCT copies from its progress (scopy), and flushes there
    // A put is complete for the upper layer when the data is at the target:
    // the flush after it says so (at once for cma, whose put is a system call).
    ucs_status_t s = put ? uct_ep_put_zcopy(ep->rdma_ep, &iov, 1, req.remote, rkey, nullptr)
                         : uct_ep_get_zcopy(ep->rdma_ep, &iov, 1, req.remote, rkey, &op->comp);
    if (s == UCS_OK || s == UCS_INPROGRESS) ++native_ops_;
    if (put && (s == UCS_OK || s == UCS_INPROGRESS)) return complete_after_flush(op);
    if (s == UCS_INPROGRESS) return in_flight();
    release_op(op);
    if (ops_pending_ == 0) set_cma_progress(false);
    if (s == UCS_OK) return Status::completed;
    if (s == UCS_ERR_NO_RESOURCE) return Status::out_of_resource;
    const Status e = native_error(s, ep);
    if (e == Status::peer_failed) return e;
    // The transport refused (cma: the kernel denied the peer's memory, as
    // in a container without ptrace rights): this peer's put/get go by
    // active messages from now on.
    ep->rdma_broken = true;
    ++native_fallbacks_;
    out_.verbose(1, "{}: {} {} to rank {} failed ({}): active messages from now on", name(),
                 rdma_name_, put ? "put" : "get", ep->peer(), ucs_status_string(s));
    return Status::not_available;
}

// A slot for an operation UCT carries itself: it completes through `comp`.
template <typename Request>
RdmaOp* UctModule::start_native(OpKind kind, const Request& req) noexcept {
    RdmaOp* op = start_op(kind, req);
    if (op == nullptr) return nullptr;
    op->native = true;
    op->owner = this;
    op->comp.func = &UctModule::native_done_cb;
    op->comp.count = 1;
    op->comp.status = UCS_OK;
    return op;
}

// cma's own progress (UCT's scopy queue) is on the worker only while an
// operation is in flight: polled on every progress, the idle second
// interface cost ~2 % of an 8-byte message's latency (alternating runs,
// btl_uct_rdma=am against the default: 1.021 and 1.024 over 60 and 100).
void UctModule::set_cma_progress(bool on) noexcept {
    if (!cma_iface_ || on == cma_progress_) return;
    cma_progress_ = on;
    if (on)
        uct_iface_progress_enable(cma_iface_.get(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    else
        uct_iface_progress_disable(cma_iface_.get(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

void UctModule::release_op(RdmaOp* op) noexcept {
    ++op->generation;  // late completions for this slot no longer match
    ops_.put(op);
}

// An operation UCT reported in progress: its callback completes it
// (finish_native).
Status UctModule::in_flight() noexcept {
    ++ops_pending_;
    update_progress();
    return Status::success;
}

// A remote write UCT accepted (a put, a posted atomic) is complete for the
// upper layer once it is at the target: when the flush after it says so (at
// once for cma, whose put is a system call, and for shared-memory atomics).
Status UctModule::complete_after_flush(RdmaOp* op) noexcept {
    ++ops_pending_;
    const Status f = native_flush(op);
    if (f == Status::completed) {
        release_op(op);
        if (--ops_pending_ == 0) set_cma_progress(false);
    }
    update_progress();
    return f;
}

// The endpoint an operation went out on: atomics use the module's own
// interface, put/get the RDMA one (cma beside posix or sysv).
uct_ep_h UctModule::native_ep(const RdmaOp* op) noexcept {
    if (op->endpoint == nullptr) return nullptr;
    return op->kind == OpKind::atomic ? op->endpoint->ep : op->endpoint->rdma_ep;
}

// Flushes the operation's endpoint: completed (nothing outstanding), success
// (the callback comes), or queued for a retry from progress.  ops_pending_
// counts the operation already.
Status UctModule::native_flush(RdmaOp* op) noexcept {
    const ucs_status_t s = uct_ep_flush(native_ep(op), 0, &op->comp);
    if (s == UCS_OK) return Status::completed;
    if (s == UCS_INPROGRESS) return Status::success;
    if (s == UCS_ERR_NO_RESOURCE) {
        flushes_.push(op);
        attention_ = true;
        return Status::success;
    }
    // The put went out but cannot be confirmed: it ends with the error.
    op->status = from_ucs(s, op->endpoint);
    mark_done(op);
    return Status::success;
}

int UctModule::retry_flushes() noexcept {
    int events = 0;
    while (!flushes_.empty()) {
        RdmaOp* op = flushes_.front();
        ucs_status_t s = UCS_ERR_CANCELED;
        if (uct_ep_h ep = native_ep(op)) s = uct_ep_flush(ep, 0, &op->comp);
        if (s == UCS_ERR_NO_RESOURCE) break;
        flushes_.pop();
        ++events;
        if (s == UCS_INPROGRESS) continue;  // the callback comes
        if (s != UCS_OK) op->status = op->endpoint ? from_ucs(s, op->endpoint) : Status::cancelled;
        mark_done(op);
    }
    return events;
}

// cma reports a copy from or to a process that is dying as an I/O error, not
// as a lost peer, and does so once the process has dropped its memory, a
// moment before its exit can be seen (the process watch looks every 100 ms).
// So on such an error the exit is waited for, briefly (an error path: a copy
// the kernel denies costs it once, then that peer goes by active messages),
// and the loss, when it comes, is the operation's status.
Status UctModule::native_error(ucs_status_t s, UctEndpoint* ep) noexcept {
    const Status e = from_ucs(s, ep);
    if (e == Status::peer_failed || ep == nullptr || !ep->process.watching()) return e;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (!ep->process.exited()) {
        if (std::chrono::steady_clock::now() >= until) return e;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!ep->failed) {
        out_.verbose(1, "{}: rank {} (pid {}) exited", name(), ep->peer(), ep->process.pid());
        ep->failed = true;
        failures_ = true;
        attention_ = true;
    }
    return Status::peer_failed;
}

// From UCT's progress: noted, and reported once it returns (a callback may
// start operations or drive progress).
void UctModule::native_done_cb(uct_completion_t* comp) noexcept {
    auto* op = reinterpret_cast<RdmaOp*>(comp);  // comp is its first member
    auto* m = static_cast<UctModule*>(op->owner);
    if (comp->status != UCS_OK) op->status = m->native_error(comp->status, op->endpoint);
    m->mark_done(op);
}

void UctModule::mark_done(RdmaOp* op) noexcept {
    op->next_done = done_head_;
    done_head_ = op;
    attention_ = true;
}

int UctModule::finish_native() noexcept {
    int events = 0;
    while (done_head_ != nullptr) {
        RdmaOp* op = done_head_;
        done_head_ = op->next_done;
        op->next_done = nullptr;
        op->native = false;
        if (op->kind == OpKind::atomic && op->mode != AtomicMode::post && ok(op->status))
            std::memcpy(op->local_address, &op->result, op->bits32 ? 4 : 8);
        complete_op(op);
        ++events;
    }
    return events;
}

}  // namespace transit::uct

// --- native atomics --------------------------------------------------------------
//
// posix and sysv offer UCT atomics (CPU atomics on a peer's shared memory) but
// only on memory their memory domain allocated.  mem_alloc hands such memory
// out; its registrations carry the interface's own remote key beside the RDMA
// one, and atomics on it use uct_ep_atomic*.  Other memory, and operations
// UCT lacks (or gets wrong, below), keep going by active messages.

namespace transit::uct {

namespace {

std::optional<uct_atomic_op_t> uct_op(btl::AtomicOp op) noexcept {
    switch (op) {
        case btl::AtomicOp::add:
            return UCT_ATOMIC_OP_ADD;
        case btl::AtomicOp::and_:
            return UCT_ATOMIC_OP_AND;
        case btl::AtomicOp::or_:
            return UCT_ATOMIC_OP_OR;
        case btl::AtomicOp::xor_:
            return UCT_ATOMIC_OP_XOR;
        case btl::AtomicOp::swap:
            return UCT_ATOMIC_OP_SWAP;
        default:
            return std::nullopt;
    }
}

// UCX 1.13's shared-memory fetching and/or/xor return the old value but leave
// the target unchanged (seen here with posix and sysv); they stay with the
// target's own CPU atomics.
constexpr bool fetch_is_trusted(uct_atomic_op_t op) noexcept {
    return op == UCT_ATOMIC_OP_ADD || op == UCT_ATOMIC_OP_SWAP;
}

}  // namespace

void UctModule::open_native_atomics() {
    if (config_.rdma == RdmaMode::am) return;
    // The same rule as put/get (open_native says why at its level): only where
    // the target's device checks the key.
    {
        uct_md_attr_t md_attr{};
        if (uct_md_query(md_.get(), &md_attr) != UCS_OK ||
            native_refusal(resource_.tl_name, (md_attr.cap.flags & UCT_MD_FLAG_REG) != 0,
                           md_attr.rkey_packed_size))
            return;
    }
    constexpr std::uint64_t atomic_kinds = UCT_IFACE_FLAG_ATOMIC_CPU | UCT_IFACE_FLAG_ATOMIC_DEVICE;
    if (!(iface_attr_.cap.flags & atomic_kinds) || iface_attr_.cap.atomic64.op_flags == 0) return;
    uct_md_attr_t md_attr{};
    if (uct_md_query(md_.get(), &md_attr) != UCS_OK || !(md_attr.cap.flags & UCT_MD_FLAG_ALLOC))
        return;
    // Room in a handle for both keys (the RDMA one may be there already).
    if (md_attr.rkey_packed_size + rkey_len_ + 2 * sizeof(RemoteKeyHeader) + sizeof(PackedHandle) >
        btl::max_registration_handle_size) {
        out_.verbose(10, "{}: no native atomics: the remote keys do not fit a handle", name());
        return;
    }
    native_amo_ = true;
    amo_md_tag_ = md_tag(resource_.md_name);
    amo_rkey_len_ = md_attr.rkey_packed_size;
    out_.verbose(10, "{}: atomics on mem_alloc memory by UCT's own (remote key {} bytes)", name(),
                 amo_rkey_len_);
}

void* UctModule::mem_alloc(std::size_t size) noexcept {
    if (!native_amo_ || size == 0) return nullptr;
    try {
        allocations_.reserve(allocations_.size() + 1);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
    const uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_md_h md = md_.get();
    uct_mem_alloc_params_t params{};
    params.field_mask = UCT_MEM_ALLOC_PARAM_FIELD_FLAGS | UCT_MEM_ALLOC_PARAM_FIELD_MEM_TYPE |
                        UCT_MEM_ALLOC_PARAM_FIELD_MDS | UCT_MEM_ALLOC_PARAM_FIELD_NAME;
    params.flags = UCT_MD_MEM_ACCESS_ALL;
    params.mem_type = UCS_MEMORY_TYPE_HOST;
    params.mds.mds = &md;
    params.mds.count = 1;
    params.name = "transit mem_alloc";
    uct_allocated_memory_t mem{};
    if (ucs_status_t s = uct_mem_alloc(size, &method, 1, &params, &mem); s != UCS_OK) {
        out_.verbose(5, "{}: mem_alloc({}) failed: {}", name(), size, ucs_status_string(s));
        return nullptr;
    }
    allocations_.push_back(mem);
    return mem.address;
}

bool UctModule::mem_free(void* p) noexcept {
    for (auto it = allocations_.begin(); it != allocations_.end(); ++it) {
        if (it->address != p) continue;
        (void)uct_mem_free(&*it);
        allocations_.erase(it);
        return true;
    }
    return false;
}

void UctModule::free_allocations() noexcept {
    for (const uct_allocated_memory_t& m : allocations_) (void)uct_mem_free(&m);
    allocations_.clear();
}

const uct_allocated_memory_t* UctModule::allocation_of(const void* base,
                                                       std::size_t size) const noexcept {
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    for (const uct_allocated_memory_t& m : allocations_) {
        const auto a = reinterpret_cast<std::uintptr_t>(m.address);
        if (b >= a && size <= m.length && b - a <= m.length - size) return &m;
    }
    return nullptr;
}

bool UctModule::amo_rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle,
                             std::uint64_t key, uct_rkey_t& rkey) noexcept {
    ep->amo_component = resource_.component;  // releases the cached keys with the endpoint
    return cached_rkey(ep->amo_rkeys, resource_.component, handle, amo_md_tag_, amo_rkey_len_, key,
                       rkey);
}

Status UctModule::native_atomic(const btl::AtomicRequest& req, std::uint64_t key,
                                AtomicMode mode) noexcept {
    auto* ep = static_cast<UctEndpoint*>(req.endpoint);
    const bool bits32 = (req.flags & btl::atomic_flags::bits32) != 0;
    const std::uint64_t operand = req.operand;
    const std::uint64_t compare = req.compare;
    const std::uint64_t remote_address = req.remote;
    if (ep->amo_broken || ep->failed) return Status::not_available;
    const std::optional<uct_atomic_op_t> op =
        mode == AtomicMode::cswap ? std::optional(UCT_ATOMIC_OP_CSWAP) : uct_op(req.op);
    if (!op) return Status::not_available;
    const auto& caps = bits32 ? iface_attr_.cap.atomic32 : iface_attr_.cap.atomic64;
    const std::uint64_t offered = mode == AtomicMode::post ? caps.op_flags : caps.fop_flags;
    if (!(offered & UCS_BIT(*op))) return Status::not_available;
    if (mode == AtomicMode::fetch && !fetch_is_trusted(*op)) return Status::not_available;
    uct_rkey_t rkey = UCT_INVALID_RKEY;
    if (!amo_rkey_for(ep, req.remote_handle, key, rkey)) return Status::not_available;

    RdmaOp* o = start_native(OpKind::atomic, req);
    if (o == nullptr) return Status::out_of_resource;
    o->mode = mode;
    o->bits32 = bits32;
    o->result = 0;
    auto* r64 = &o->result;
    auto* r32 = reinterpret_cast<std::uint32_t*>(&o->result);  // the low half, read by memcpy
    const auto v32 = static_cast<std::uint32_t>(operand);
    const auto c32 = static_cast<std::uint32_t>(compare);
    ucs_status_t s;
    switch (mode) {
        case AtomicMode::post:
            s = bits32 ? uct_ep_atomic32_post(ep->ep, *op, v32, remote_address, rkey)
                       : uct_ep_atomic64_post(ep->ep, *op, operand, remote_address, rkey);
            break;
        case AtomicMode::fetch:
            s = bits32
                    ? uct_ep_atomic32_fetch(ep->ep, *op, v32, r32, remote_address, rkey, &o->comp)
                    : uct_ep_atomic64_fetch(ep->ep, *op, operand, r64, remote_address, rkey,
                                            &o->comp);
            break;
        case AtomicMode::cswap:
        default:
            s = bits32
                    ? uct_ep_atomic_cswap32(ep->ep, c32, v32, remote_address, rkey, r32, &o->comp)
                    : uct_ep_atomic_cswap64(ep->ep, compare, operand, remote_address, rkey, r64,
                                            &o->comp);
            break;
    }
    if (s == UCS_OK || s == UCS_INPROGRESS) ++native_amos_;
    if (s == UCS_OK && mode == AtomicMode::post) return complete_after_flush(o);
    if (s == UCS_INPROGRESS) return in_flight();  // finish_native copies the result out
    const std::uint64_t old = o->result;
    release_op(o);
    if (s == UCS_OK) {
        std::memcpy(req.local, &old, bits32 ? 4 : 8);
        return Status::completed;
    }
    if (s == UCS_ERR_NO_RESOURCE) return Status::out_of_resource;
    const Status e = from_ucs(s, ep);
    if (e == Status::peer_failed) return e;
    ep->amo_broken = true;
    ++native_fallbacks_;
    out_.verbose(1, "{}: a native atomic to rank {} failed ({}): active messages from now on",
                 name(), ep->peer(), ucs_status_string(s));
    return Status::not_available;
}

}  // namespace transit::uct
