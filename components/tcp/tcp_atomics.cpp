// Atomics of a tcp module: the origin's request and the target's execution.
#include "tcp_atomics.hpp"

#include "tcp_component.hpp"
#include "tcp_module.hpp"
#include "tcp_rdma.hpp"
#include "transit/btl/util/atomic_width.hpp"

namespace transit::tcp {

Status TcpAtomics::atomic(const btl::AtomicRequest& req, wire::RdmaKind kind) noexcept {
    const bool fetch = kind != wire::RdmaKind::atomic_op;
    const auto op_code = kind == wire::RdmaKind::atomic_cswap ? std::uint16_t{0}
                                                              : static_cast<std::uint16_t>(req.op);
    RdmaOp op{req.cb, req.cbcontext,           req.cbdata, req.local, req.local_handle, nullptr, 0,
              0,      wire::FrameType::atomic, false,      fetch,     req.flags};
    return rdma_.start(
        req.endpoint, req.remote_handle, op,
        [&](Frag& f, const btl::util::RegistrationKey& key, std::uint32_t id) {
            fill_request(
                f, wire::FrameType::atomic,
                wire::AtomicRequest{key.id, key.secret, req.remote, req.operand, req.compare, id,
                                    op_code, kind, static_cast<std::uint8_t>(req.flags)},
                nullptr, 0);
        });
}

Status TcpAtomics::atomic_op(const btl::AtomicRequest& req) noexcept {
    return atomic(btl::as_atomic_op(req), wire::RdmaKind::atomic_op);
}

Status TcpAtomics::atomic_fop(const btl::AtomicRequest& req) noexcept {
    return atomic(btl::as_atomic_fop(req), wire::RdmaKind::atomic_fop);
}

Status TcpAtomics::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    return atomic(btl::as_atomic_cswap(req), wire::RdmaKind::atomic_cswap);
}

void TcpAtomics::handle_atomic(Link& l) noexcept {
    const wire::AtomicRequest req =
        wire::decode_atomic_request(l.rbuf.get() + l.rhead + wire::header_size);
    const std::uint64_t width = btl::util::atomic_width(req.atomic_flags);
    Status st = rdma_.check_access(l, {req.key, req.secret}, req.address, width,
                                   btl::reg_flags::remote_atomic);
    if (ok(st) && (req.address % width != 0 || (req.atomic_flags & ~btl::atomic_flags::bits32)))
        st = Status::bad_param;
    const bool cswap = req.kind == wire::RdmaKind::atomic_cswap;
    if (ok(st) && !cswap && req.kind != wire::RdmaKind::atomic_op &&
        req.kind != wire::RdmaKind::atomic_fop)
        st = Status::bad_param;
    if (ok(st) && !cswap && !btl::is_atomic_op(req.op)) st = Status::bad_param;
    std::uint64_t old = 0;
    if (ok(st)) {
        auto* target = reinterpret_cast<void*>(req.address);
        old = cswap ? btl::apply_cswap(target, req.compare, req.operand, req.atomic_flags)
                    : btl::apply_atomic(target, static_cast<btl::AtomicOp>(req.op), req.operand,
                                        req.atomic_flags);
    } else {
        tcp_.rdma_refused(module_.name(), "an atomic", req.address, l.endpoint->peer(), st);
    }
    rdma_.send_reply(l, req.op_id, st, old, nullptr, 0);
}

}  // namespace transit::tcp
