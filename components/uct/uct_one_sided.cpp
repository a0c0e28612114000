// btl::Rdma of the uct module (see uct_one_sided.hpp).  Native put and get by
// UCT's put_zcopy/get_zcopy only on a transport whose device checks the
// remote key on every access (rc, dc: native_refusal in uct_rdma_policy.hpp),
// with the remote key packed into the registration handle.  Shared memory,
// cma and tcp cannot refuse a stale or forged key, so they never carry them.
// Anything native cannot serve (a handle without a key, a small transfer, a
// failure of the transport) goes by active messages (uct_ops.cpp), where the
// target checks the handle (uct_target.cpp).
#include "uct_one_sided.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "uct_atomics.hpp"
#include "uct_module.hpp"
#include "uct_ops.hpp"

namespace transit::uct {

// Put and get differ only in the size limit, the access the remote
// registration must grant, and (in advance) which way the data goes.
Status UctOneSided::transfer(OpKind kind, const btl::RdmaRequest& req) noexcept {
    const bool put = kind == OpKind::put;
    const std::size_t limit = put ? module_.attributes().put_limit : module_.attributes().get_limit;
    if (!module_.valid(req.endpoint) || (req.size > 0 && req.local == nullptr) || req.size > limit)
        [[unlikely]]
        return Status::bad_param;
    PackedHandle p;
    const std::uint32_t access = put ? btl::reg_flags::remote_write : btl::reg_flags::remote_read;
    if (Status s = UctOps::check_remote(req.remote_handle, req.remote, req.size, access, p);
        s != Status::success) [[unlikely]]
        return s;
    if ((put ? native_put_ : native_get_) && req.size >= native_min_ &&
        p.magic == native_handle_magic) {
        if (req.size == 0) return Status::completed;
        const Status s = native_transfer(kind, req, p.key);
        if (s != Status::not_available) return s;
    }
    RdmaOp* op = ops_.start_op(kind, req);
    if (op == nullptr) return Status::out_of_resource;
    op->key = p.key;
    op->secret = p.secret;
    op->remote_address = req.remote;
    op->size = req.size;
    op->pieces = req.size == 0
                     ? 1
                     : static_cast<std::uint32_t>((req.size + ops_.chunk() - 1) / ops_.chunk());
    return ops_.launch(op);
}

Status UctOneSided::put(const btl::RdmaRequest& req) noexcept {
    return transfer(OpKind::put, req);
}

Status UctOneSided::get(const btl::RdmaRequest& req) noexcept {
    return transfer(OpKind::get, req);
}

btl::RegistrationHandle* UctOneSided::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                   std::uint32_t flags) {
    if (base == nullptr && size > 0) return nullptr;
    const auto addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base));
    Registration* reg = regions_.add({addr, size, flags});
    if (reg == nullptr) {
        out_.verbose(5, "{}: register_mem: no room for another registration ({} live)",
                     module_.name(), regions_.live_count());
        return nullptr;
    }
    register_native(*reg, base, size);
    return reinterpret_cast<btl::RegistrationHandle*>(reg->packed.data());
}

Status UctOneSided::deregister_mem(btl::RegistrationHandle* handle) {
    Registration* reg = regions_.live(handle);
    if (reg == nullptr) return Status::not_found;
    regions_.remove(*reg);
    return Status::success;
}

void UctOneSided::open(uct_md_h md, uct_iface_h iface, const uct_iface_attr_t& iface_attr) {
    iface_ = iface;
    if (config_.rdma == RdmaMode::am) {
        out_.verbose(10, "{}: put/get by active messages (btl_uct_rdma=am)", module_.name());
        return;
    }
    // Asked for explicitly, a missing native path is said at level 1.
    const int level = config_.rdma == RdmaMode::transport ? 1 : 10;
    uct_md_attr_t md_attr{};
    if (ucs_status_t s = uct_md_query(md, &md_attr); s != UCS_OK) {
        out_.verbose(level, "{}: native put/get not used: uct_md_query failed: {}", module_.name(),
                     ucs_status_string(s));
        return;
    }
    if (const auto why =
            native_refusal(resource_.tl_name, (md_attr.cap.flags & UCT_MD_FLAG_REG) != 0,
                           md_attr.rkey_packed_size)) {
        out_.verbose(level, "{}: native put/get/atomics not used, active messages instead: {}",
                     module_.name(), *why);
        return;
    }
    if (!(iface_attr.cap.flags & UCT_IFACE_FLAG_PUT_ZCOPY)) {
        out_.verbose(level, "{}: native put/get not used: the transport has no zcopy put",
                     module_.name());
        return;
    }
    if (md_attr.rkey_packed_size > max_rkey_len) {
        out_.verbose(level, "{}: native put/get not used: {}'s remote keys ({} bytes) do not fit",
                     module_.name(), resource_.name(), md_attr.rkey_packed_size);
        return;
    }
    // The transport's own memory domain registers memory and its device
    // checks the key (rc, dc): the target refuses a stale or forged key.
    rdma_md_ = md;
    rdma_iface_ = iface_;
    rdma_component_ = resource_.component;
    rdma_attr_ = iface_attr;
    rdma_name_ = resource_.name();
    rkey_len_ = md_attr.rkey_packed_size;
    rdma_need_memh_ = (md_attr.cap.flags & UCT_MD_FLAG_NEED_MEMH) != 0;
    rdma_md_tag_ = md_tag(resource_.md_name);
    native_put_ = true;
    native_get_ = (rdma_attr_.cap.flags & UCT_IFACE_FLAG_GET_ZCOPY) != 0;
    native_min_ = config_.rdma_min_size;
    out_.verbose(10, "{}: {} of {} bytes and more by {} (zcopy, remote key {} bytes)",
                 module_.name(), native_get_ ? "put/get" : "put (get by active messages)",
                 native_min_, rdma_name_, rkey_len_);
}

// The peer's RDMA endpoint: the module's own endpoint, or one on cma to the
// cma interface in the peer's address.  A peer without one is served by
// active messages.
void UctOneSided::connect(UctEndpoint* e, const AddressHeader& h, const std::byte* addresses) {
    if (rdma_iface_ == iface_) {
        e->rdma_ep = e->ep;
        e->rkey_component = rdma_component_;
        return;
    }
    if (h.rdma_iface_len == 0) {
        out_.verbose(10, "{}: rank {} has no {}: its put/get go by active messages", module_.name(),
                     e->peer(), rdma_name_);
        return;
    }
    if (h.rdma_iface_len != rdma_attr_.iface_addr_len ||
        h.rdma_device_len != rdma_attr_.device_addr_len) {
        out_.verbose(10, "{}: rank {}'s {} address is malformed: active messages for put/get",
                     module_.name(), e->peer(), rdma_name_);
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
        out_.verbose(10, "{}: rank {} not reachable by {}: active messages for put/get",
                     module_.name(), e->peer(), rdma_name_);
        return;
    }
    uct_ep_params_t params{};
    params.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
                        UCT_EP_PARAM_FIELD_IFACE_ADDR | UCT_EP_PARAM_FIELD_USER_DATA;
    params.iface = rdma_iface_;
    params.dev_addr = dev;
    params.iface_addr = ifa;
    params.user_data = &module_;
    uct_ep_h ep = nullptr;
    if (ucs_status_t s = uct_ep_create(&params, &ep); s != UCS_OK) {
        out_.verbose(10, "{}: rank {}: {} uct_ep_create failed ({}): active messages for put/get",
                     module_.name(), e->peer(), rdma_name_, ucs_status_string(s));
        return;
    }
    e->rdma_ep = ep;
    e->rkey_component = rdma_component_;
}

// Fills r.packed: with a remote key when the RDMA memory domain registers the
// memory, else the plain handle (the active-message path needs no more).
void UctOneSided::register_native(Registration& r, void* base, std::size_t size) noexcept {
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
                         module_.name(), rdma_name_, size, ucs_status_string(s));
    }
    pack_handle(r.packed, h, rdma_md_tag_, std::span(rkey).first(with_rkey ? rkey_len_ : 0),
                with_rkey);
    // mem_alloc memory: the interface's own key too, for native atomics.
    atomics_.append_key(r, base, size);
}

// Before the memory domain closes: the handles stay (the active-message path
// does not need the memory domain's registration).
void UctOneSided::release_registrations() noexcept {
    if (rdma_md_ == nullptr) return;
    regions_.for_each_live([this](Registration& r) {
        if (r.md == rdma_md_) r.release();
    });
}

bool UctOneSided::rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle,
                           std::uint64_t key, uct_rkey_t& rkey) noexcept {
    return cached_rkey(ep->rkeys, rdma_component_, handle, rdma_md_tag_, rkey_len_, key, rkey);
}

bool UctOneSided::local_memh(const btl::RegistrationHandle* handle,
                             uct_mem_h& memh) const noexcept {
    memh = UCT_MEM_HANDLE_NULL;
    if (!rdma_need_memh_) return true;
    if (handle == nullptr) return false;
    // The handle is the first member of a Registration (see register_mem).
    const auto* r = reinterpret_cast<const Registration*>(handle);
    if (r->md != rdma_md_ || r->memh == nullptr) return false;
    memh = r->memh;
    return true;
}

Status UctOneSided::native_transfer(OpKind kind, const btl::RdmaRequest& req,
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
    RdmaOp* op = ops_.start_native(kind, req);
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
    if (put && (s == UCS_OK || s == UCS_INPROGRESS)) return ops_.complete_after_flush(op);
    if (s == UCS_INPROGRESS) return ops_.in_flight();
    ops_.release_op(op);
    if (ops_.pending() == 0) set_cma_progress(false);
    if (s == UCS_OK) return Status::completed;
    if (s == UCS_ERR_NO_RESOURCE) return Status::out_of_resource;
    const Status e = module_.native_error(s, ep);
    if (e == Status::peer_failed) return e;
    // The transport refused (cma: the kernel denied the peer's memory, as
    // in a container without ptrace rights): this peer's put/get go by
    // active messages from now on.
    ep->rdma_broken = true;
    ++native_fallbacks_;
    out_.verbose(1, "{}: {} {} to rank {} failed ({}): active messages from now on", module_.name(),
                 rdma_name_, put ? "put" : "get", ep->peer(), ucs_status_string(s));
    return Status::not_available;
}

// cma's own progress (UCT's scopy queue) is on the worker only while an
// operation is in flight: polled on every progress, the idle second
// interface cost ~2 % of an 8-byte message's latency (alternating runs,
// btl_uct_rdma=am against the default: 1.021 and 1.024 over 60 and 100).
void UctOneSided::set_cma_progress(bool on) noexcept {
    if (!cma_iface_ || on == cma_progress_) return;
    cma_progress_ = on;
    if (on)
        uct_iface_progress_enable(cma_iface_.get(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    else
        uct_iface_progress_disable(cma_iface_.get(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
}

Status UctOneSided::flush(btl::Endpoint* endpoint) {
    // Replies come in any order: waiting for none pending covers every
    // operation started before the call.
    while (ops_.pending() > 0) module_.progress_once();
    const auto* ep = static_cast<const UctEndpoint*>(endpoint);
    return ep != nullptr && ep->failed ? Status::peer_failed : Status::success;
}

void* UctOneSided::mem_alloc(std::size_t size) noexcept {
    return atomics_.mem_alloc(size);
}

bool UctOneSided::mem_free(void* p) noexcept {
    return atomics_.mem_free(p);
}

std::size_t UctOneSided::handle_key_size() const noexcept {
    return rdma_md_ != nullptr ? sizeof(RemoteKeyHeader) + rkey_len_ : 0;
}

void UctOneSided::close() noexcept {
    rdma_iface_ = nullptr;
    rdma_md_ = nullptr;
    cma_iface_.reset();
    cma_md_.reset();
}

}  // namespace transit::uct
