#include "components/vader/vader_atomics.hpp"

#include <cstring>

#include "components/vader/vader_module.hpp"
#include "transit/btl/util/atomic_width.hpp"

namespace transit::vader {

Status VaderAtomics::start(const btl::AtomicRequest& req, AtomicKind kind) noexcept {
    VaderEndpoint* ep = static_cast<VaderEndpoint*>(req.endpoint);
    if (ep == nullptr) [[unlikely]]
        return Status::bad_param;  // a peer vader does not reach (e.g. the caller itself)
    if (ep->dead) [[unlikely]]
        return Status::peer_failed;
    const std::size_t width = btl::util::atomic_width(req.flags);
    if (req.remote % width != 0) return Status::bad_param;
    if (kind != AtomicKind::cswap && !btl::is_atomic_op(static_cast<std::uint16_t>(req.op)))
        [[unlikely]]
        return Status::bad_param;
    if (const Status s = btl::region_permits(ep->regions, req.remote_handle, req.remote, width,
                                             btl::reg_flags::remote_atomic);
        !ok(s)) [[unlikely]]
        return s;
    // Memory inside the peer's segment is ours too: a CPU atomic is coherent.
    if (char* direct = ep->translate(req.remote, width); direct != nullptr) {
        const std::uint64_t old =
            kind == AtomicKind::cswap
                ? btl::apply_cswap(direct, req.compare, req.operand, req.flags)
                : btl::apply_atomic(direct, req.op, req.operand, req.flags);
        if (kind != AtomicKind::op) std::memcpy(req.local, &old, width);
        return Status::completed;
    }
    Frag* f = module_.take_frag(ep);
    if (f == nullptr) return Status::out_of_resource;
    FragHeader& h = *f->header;
    h.kind = FragKind::atomic;
    h.size = 0;
    h.atomic_kind = kind;
    h.atomic_flags = static_cast<std::uint8_t>(req.flags & btl::atomic_flags::bits32);
    h.atomic_op = static_cast<std::uint16_t>(req.op);
    h.atomic_status = 0;
    h.address = req.remote;
    h.operand = req.operand;
    h.compare = req.compare;
    f->internal = true;
    f->rdma_cb = req.cb;
    f->local_address = req.local;
    f->local_handle = req.local_handle;
    f->rdma_context = req.cbcontext;
    f->rdma_cbdata = req.cbdata;
    if (!module_.push(ep, f)) {
        frags_.put(f);
        return Status::out_of_resource;
    }
    return Status::success;
}

Status VaderAtomics::atomic_op(const btl::AtomicRequest& req) noexcept {
    return start(btl::as_atomic_op(req), AtomicKind::op);
}

Status VaderAtomics::atomic_fop(const btl::AtomicRequest& req) noexcept {
    return start(btl::as_atomic_fop(req), AtomicKind::fop);
}

Status VaderAtomics::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    return start(btl::as_atomic_cswap(req), AtomicKind::cswap);
}

bool VaderAtomics::in_flight(const btl::Endpoint* endpoint) const noexcept {
    for (const Frag& f : frags_.items())
        if (f.in_flight && !f.orphan && f.header->kind == FragKind::atomic &&
            (endpoint == nullptr || f.endpoint == endpoint))
            return true;
    return false;
}

void VaderAtomics::perform(VaderEndpoint* ep, FragHeader& h) noexcept {
    h.result = 0;
    if (const char* why = atomic_refusal(h); why != nullptr) [[unlikely]] {
        module_.report_peer_error(ep, why);
        h.atomic_status = static_cast<std::int16_t>(Status::bad_param);
        return;
    }
    h.atomic_status = 0;
    void* target = reinterpret_cast<void*>(h.address);
    h.result = h.atomic_kind == AtomicKind::cswap
                   ? btl::apply_cswap(target, h.compare, h.operand, h.atomic_flags)
                   : btl::apply_atomic(target, static_cast<btl::AtomicOp>(h.atomic_op), h.operand,
                                       h.atomic_flags);
}

void VaderAtomics::complete(Frag* f, Status status) noexcept {
    VaderEndpoint* ep = f->endpoint;
    const FragHeader& h = *f->header;
    if (ok(status) && h.atomic_status != 0) [[unlikely]]
        status = static_cast<Status>(h.atomic_status);
    if (ok(status) && h.atomic_kind != AtomicKind::op && f->local_address != nullptr)
        std::memcpy(f->local_address, &h.result,
                    (h.atomic_flags & btl::atomic_flags::bits32) ? 4 : 8);
    if (f->rdma_cb)
        f->rdma_cb(&module_, ep, f->local_address, f->local_handle, f->rdma_context, f->rdma_cbdata,
                   status);
    frags_.put(f);
}

}  // namespace transit::vader
