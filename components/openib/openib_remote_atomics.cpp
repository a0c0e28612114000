// The atomics of an openib module (openib_remote_atomics.hpp).
#include "openib_remote_atomics.hpp"

#include <cstring>

#include "openib_module.hpp"
#include "openib_one_sided.hpp"
#include "transit/btl/util/atomic_width.hpp"

namespace transit::openib {

Status RemoteAtomics::start(const btl::AtomicRequest& req, wire::AtomicKind kind) noexcept {
    RemoteKey rk;
    const bool bits32 = (req.flags & btl::atomic_flags::bits32) != 0;
    const std::size_t width = btl::util::atomic_width(req.flags);
    if (!req.endpoint || !unpack_handle(req.remote_handle, rk) || req.remote % width != 0 ||
        !rk.allows(req.remote, width, btl::reg_flags::remote_atomic))
        return Status::bad_param;
    if (kind != wire::AtomicKind::op && req.local == nullptr) return Status::bad_param;
    // The emulated path writes the result with the CPU; the device needs the
    // caller's registration (and the hybrid path emulates without one).
    if (req.local_handle && !local_ok(req.local_handle, req.local, width, true))
        return Status::bad_param;
    // The verbs have 64-bit fetch-add and req.compare-swap only.
    const bool device_can =
        !bits32 && (kind == wire::AtomicKind::cswap || req.op == btl::AtomicOp::add);
    const bool have_local = kind == wire::AtomicKind::op || req.local_handle != nullptr;
    if (path_ == AtomicPath::hardware_only) {
        if (!device_can) return Status::not_supported;
        if (!have_local) return Status::bad_param;
    }
    const bool use_device = path_ != AtomicPath::emulated && device_can && have_local;
    RdmaFrag* f = module_.fragments().take_rdma();
    if (!f) return Status::out_of_resource;
    f->local_address = req.local;
    f->local_handle = req.local_handle;
    f->remote_address = req.remote;
    f->rkey = rk.rkey;
    f->size = width;
    f->operand = req.operand;
    f->compare = req.compare;
    f->atomic = req.op;
    f->atomic_kind = kind;
    f->bits32 = bits32;
    f->cbfunc = req.cb;
    f->cbcontext = req.cbcontext;
    f->user_cbdata = req.cbdata;
    if (use_device) {
        f->op = kind == wire::AtomicKind::cswap ? RdmaOp::hw_cswap : RdmaOp::hw_fetch_add;
        if (kind == wire::AtomicKind::op) {
            // The old value is not wanted, but the device writes it somewhere.
            f->local_address = scratch_;
            f->lkey = scratch_lkey_;
        } else {
            f->lkey = reinterpret_cast<Handle*>(req.local_handle)->lkey;
        }
    } else {
        f->op = RdmaOp::emulated_atomic;
    }
    return module_.start_rdma(req.endpoint, f);
}

Status RemoteAtomics::atomic_op(const btl::AtomicRequest& req) noexcept {
    return start(btl::as_atomic_op(req), wire::AtomicKind::op);
}

Status RemoteAtomics::atomic_fop(const btl::AtomicRequest& req) noexcept {
    return start(btl::as_atomic_fop(req), wire::AtomicKind::fetch_op);
}

Status RemoteAtomics::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    return start(btl::as_atomic_cswap(req), wire::AtomicKind::cswap);
}

void RemoteAtomics::perform(Endpoint& ep, const wire::AtomicRequest& r,
                            wire::AtomicReply& reply) const noexcept {
    const std::size_t width = r.bits32 ? 4 : 8;
    const Registration* reg = one_sided_.find(r.rkey);
    if (!reg || !(reg->access & btl::reg_flags::remote_atomic) ||
        !reg->covers(r.remote_address, width) || r.remote_address % width != 0 ||
        !btl::is_atomic_op(r.op)) {
        module_.out().verbose(10, "{}: peer {}: refused atomic at {:#x} (rkey {:#x})",
                              module_.name(), ep.peer(), r.remote_address, r.rkey);
        reply.status = static_cast<std::int32_t>(Status::access_denied);
        return;
    }
    void* target = reinterpret_cast<void*>(r.remote_address);
    const int flags = r.bits32 ? btl::atomic_flags::bits32 : 0;
    reply.old_value =
        r.kind == wire::AtomicKind::cswap
            ? btl::apply_cswap(target, r.compare, r.operand, flags)
            : btl::apply_atomic(target, static_cast<btl::AtomicOp>(r.op), r.operand, flags);
    reply.status = static_cast<std::int32_t>(Status::success);
}

void RemoteAtomics::finish(Endpoint& ep, const wire::AtomicReply& r) noexcept {
    RdmaFrag* f = module_.fragments().find(r.request_id);
    if (!f || f->op != RdmaOp::emulated_atomic || f->endpoint != &ep) {
        module_.out().verbose(1, "{}: peer {}: reply to no pending atomic", module_.name(),
                              ep.peer());
        return;
    }
    const auto s = static_cast<Status>(r.status);
    if (ok(s) && f->atomic_kind != wire::AtomicKind::op && f->local_address) {
        if (f->bits32) {
            auto v = static_cast<std::uint32_t>(r.old_value);
            std::memcpy(f->local_address, &v, sizeof v);
        } else {
            std::memcpy(f->local_address, &r.old_value, sizeof r.old_value);
        }
    }
    module_.complete_rdma(f, s);
}

}  // namespace transit::openib
