// btl::Atomics of the uct module (see uct_atomics.hpp): by active messages
// the target performs, or by UCT's own atomics on mem_alloc memory.
#include "uct_atomics.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <optional>

#include "transit/btl/util/atomic_width.hpp"
#include "uct_module.hpp"
#include "uct_ops.hpp"

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

Status UctAtomics::atomic_common(const btl::AtomicRequest& req, AtomicMode mode) noexcept {
    if (!module_.valid(req.endpoint) || (mode != AtomicMode::post && req.local == nullptr) ||
        (mode != AtomicMode::cswap && !btl::is_atomic_op(static_cast<std::uint16_t>(req.op))))
        [[unlikely]]
        return Status::bad_param;
    const bool bits32 = (req.flags & btl::atomic_flags::bits32) != 0;
    const std::size_t width = btl::util::atomic_width(req.flags);
    if (req.remote % width != 0) [[unlikely]]
        return Status::bad_param;
    PackedHandle p;
    if (Status s = UctOps::check_remote(req.remote_handle, req.remote, width,
                                        btl::reg_flags::remote_atomic, p);
        s != Status::success) [[unlikely]]
        return s;
    if (native_amo_ && p.magic == native_handle_magic) {
        const Status s = native_atomic(req, p.key, mode);
        if (s != Status::not_available) return s;
    }
    RdmaOp* op = ops_.start_op(OpKind::atomic, req);
    if (op == nullptr) return Status::out_of_resource;
    op->key = p.key;
    op->secret = p.secret;
    op->remote_address = req.remote;
    op->size = 0;
    op->mode = mode;
    op->bits32 = bits32;
    op->amo = static_cast<std::uint16_t>(req.op);
    op->operand = req.operand;
    op->compare = req.compare;
    return ops_.launch(op);
}

Status UctAtomics::atomic_op(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_op(req), AtomicMode::post);
}

Status UctAtomics::atomic_fop(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_fop(req), AtomicMode::fetch);
}

Status UctAtomics::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_cswap(req), AtomicMode::cswap);
}

// --- native atomics --------------------------------------------------------------
//
// posix and sysv offer UCT atomics (CPU atomics on a peer's shared memory) but
// only on memory their memory domain allocated.  mem_alloc hands such memory
// out; its registrations carry the interface's own remote key beside the RDMA
// one, and atomics on it use uct_ep_atomic*.  Other memory, and operations
// UCT lacks (or gets wrong, above), keep going by active messages.

void UctAtomics::open(uct_md_h md, const uct_iface_attr_t& iface_attr, std::size_t rdma_rkey_len) {
    md_ = md;
    iface_attr_ = &iface_attr;
    if (config_.rdma == RdmaMode::am) return;
    // The same rule as put/get (UctOneSided::open says why at its level): only where
    // the target's device checks the key.
    {
        uct_md_attr_t md_attr{};
        if (uct_md_query(md_, &md_attr) != UCS_OK ||
            native_refusal(resource_.tl_name, (md_attr.cap.flags & UCT_MD_FLAG_REG) != 0,
                           md_attr.rkey_packed_size))
            return;
    }
    constexpr std::uint64_t atomic_kinds = UCT_IFACE_FLAG_ATOMIC_CPU | UCT_IFACE_FLAG_ATOMIC_DEVICE;
    if (!(iface_attr_->cap.flags & atomic_kinds) || iface_attr_->cap.atomic64.op_flags == 0) return;
    uct_md_attr_t md_attr{};
    if (uct_md_query(md_, &md_attr) != UCS_OK || !(md_attr.cap.flags & UCT_MD_FLAG_ALLOC)) return;
    // Room in a handle for both keys (the RDMA one may be there already).
    if (md_attr.rkey_packed_size + rdma_rkey_len + 2 * sizeof(RemoteKeyHeader) +
            sizeof(PackedHandle) >
        btl::max_registration_handle_size) {
        out_.verbose(10, "{}: no native atomics: the remote keys do not fit a handle",
                     module_.name());
        return;
    }
    native_amo_ = true;
    amo_md_tag_ = md_tag(resource_.md_name);
    amo_rkey_len_ = md_attr.rkey_packed_size;
    out_.verbose(10, "{}: atomics on mem_alloc memory by UCT's own (remote key {} bytes)",
                 module_.name(), amo_rkey_len_);
}

void* UctAtomics::mem_alloc(std::size_t size) noexcept {
    if (!native_amo_ || size == 0) return nullptr;
    try {
        allocations_.reserve(allocations_.size() + 1);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
    const uct_alloc_method_t method = UCT_ALLOC_METHOD_MD;
    uct_md_h md = md_;
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
        out_.verbose(5, "{}: mem_alloc({}) failed: {}", module_.name(), size, ucs_status_string(s));
        return nullptr;
    }
    allocations_.push_back(mem);
    return mem.address;
}

bool UctAtomics::mem_free(void* p) noexcept {
    for (auto it = allocations_.begin(); it != allocations_.end(); ++it) {
        if (it->address != p) continue;
        (void)uct_mem_free(&*it);
        allocations_.erase(it);
        return true;
    }
    return false;
}

void UctAtomics::free_allocations() noexcept {
    for (const uct_allocated_memory_t& m : allocations_) (void)uct_mem_free(&m);
    allocations_.clear();
}

const uct_allocated_memory_t* UctAtomics::allocation_of(const void* base,
                                                        std::size_t size) const noexcept {
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    for (const uct_allocated_memory_t& m : allocations_) {
        const auto a = reinterpret_cast<std::uintptr_t>(m.address);
        if (b >= a && size <= m.length && b - a <= m.length - size) return &m;
    }
    return nullptr;
}

bool UctAtomics::amo_rkey_for(UctEndpoint* ep, const btl::RegistrationHandle* handle,
                              std::uint64_t key, uct_rkey_t& rkey) noexcept {
    ep->amo_component = resource_.component;  // releases the cached keys with the endpoint
    return cached_rkey(ep->amo_rkeys, resource_.component, handle, amo_md_tag_, amo_rkey_len_, key,
                       rkey);
}

Status UctAtomics::native_atomic(const btl::AtomicRequest& req, std::uint64_t key,
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
    const auto& caps = bits32 ? iface_attr_->cap.atomic32 : iface_attr_->cap.atomic64;
    const std::uint64_t offered = mode == AtomicMode::post ? caps.op_flags : caps.fop_flags;
    if (!(offered & UCS_BIT(*op))) return Status::not_available;
    if (mode == AtomicMode::fetch && !fetch_is_trusted(*op)) return Status::not_available;
    uct_rkey_t rkey = UCT_INVALID_RKEY;
    if (!amo_rkey_for(ep, req.remote_handle, key, rkey)) return Status::not_available;

    RdmaOp* o = ops_.start_native(OpKind::atomic, req);
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
    if (s == UCS_OK && mode == AtomicMode::post) return ops_.complete_after_flush(o);
    if (s == UCS_INPROGRESS) return ops_.in_flight();  // finish_native copies the result out
    const std::uint64_t old = o->result;
    ops_.release_op(o);
    if (s == UCS_OK) {
        std::memcpy(req.local, &old, bits32 ? 4 : 8);
        return Status::completed;
    }
    if (s == UCS_ERR_NO_RESOURCE) return Status::out_of_resource;
    const Status e = module_.from_ucs(s, ep);
    if (e == Status::peer_failed) return e;
    ep->amo_broken = true;
    ++native_fallbacks_;
    out_.verbose(1, "{}: a native atomic to rank {} failed ({}): active messages from now on",
                 module_.name(), ep->peer(), ucs_status_string(s));
    return Status::not_available;
}

void UctAtomics::append_key(Registration& r, void* base, std::size_t size) noexcept {
    if (const uct_allocated_memory_t* m = native_amo_ ? allocation_of(base, size) : nullptr) {
        std::array<std::byte, max_rkey_len> amo_key{};
        if (uct_md_mkey_pack(md_, m->memh, amo_key.data()) != UCS_OK ||
            !append_rkey(r.packed, amo_md_tag_, std::span(amo_key).first(amo_rkey_len_)))
            out_.verbose(10, "{}: no native atomics on {} bytes at {}: the key was not packed",
                         module_.name(), size, base);
    }
}

std::size_t UctAtomics::handle_key_size() const noexcept {
    return native_amo_ ? sizeof(RemoteKeyHeader) + amo_rkey_len_ : 0;
}

}  // namespace transit::uct
