// btl::Atomics of an ofi module.
#include "ofi_atomics.hpp"

#include <rdma/fi_errno.h>

#include "ofi_fabric.hpp"
#include "ofi_module.hpp"
#include "ofi_one_sided.hpp"
#include "transit/btl/util/atomic_width.hpp"

namespace transit::ofi {
namespace {

struct FiAtomic {
    btl::AtomicOp op;
    fi_op fi;
    bool is_signed;
    std::uint32_t support;
};

// Slot order is the order of Transit's atomic_support bits.
constexpr FiAtomic fi_atomics[] = {
    {btl::AtomicOp::add, FI_SUM, false, btl::atomic_support::add},
    {btl::AtomicOp::and_, FI_BAND, false, btl::atomic_support::and_},
    {btl::AtomicOp::or_, FI_BOR, false, btl::atomic_support::or_},
    {btl::AtomicOp::xor_, FI_BXOR, false, btl::atomic_support::xor_},
    {btl::AtomicOp::land, FI_LAND, false, btl::atomic_support::land},
    {btl::AtomicOp::lor, FI_LOR, false, btl::atomic_support::lor},
    {btl::AtomicOp::lxor, FI_LXOR, false, btl::atomic_support::lxor},
    {btl::AtomicOp::swap, FI_ATOMIC_WRITE, false, btl::atomic_support::swap},
    {btl::AtomicOp::min, FI_MIN, true, btl::atomic_support::min},
    {btl::AtomicOp::max, FI_MAX, true, btl::atomic_support::max},
};

int op_slot(btl::AtomicOp op) noexcept {
    for (std::size_t i = 0; i < std::size(fi_atomics); ++i)
        if (fi_atomics[i].op == op) return static_cast<int>(i);
    return -1;
}

fi_datatype datatype(bool bits32, bool is_signed) noexcept {
    if (bits32) return is_signed ? FI_INT32 : FI_UINT32;
    return is_signed ? FI_INT64 : FI_UINT64;
}

}  // namespace

void OfiAtomics::query() {
    if ((f_.info->caps & FI_ATOMIC) == 0) return;
    for (std::size_t i = 0; i < std::size(fi_atomics); ++i) {
        for (bool bits32 : {false, true}) {
            const fi_datatype dt = datatype(bits32, fi_atomics[i].is_signed);
            fi_atomic_attr attr{};
            AtomicCaps& caps = bits32 ? atomics32_[i] : atomics64_[i];
            caps.plain = fi_query_atomic(f_.domain.get(), dt, fi_atomics[i].fi, &attr, 0) == 0;
            caps.fetch =
                fi_query_atomic(f_.domain.get(), dt, fi_atomics[i].fi, &attr, FI_FETCH_ATOMIC) == 0;
        }
    }
    fi_atomic_attr attr{};
    cswap64_ = fi_query_atomic(f_.domain.get(), FI_UINT64, FI_CSWAP, &attr, FI_COMPARE_ATOMIC) == 0;
    cswap32_ = fi_query_atomic(f_.domain.get(), FI_UINT32, FI_CSWAP, &attr, FI_COMPARE_ATOMIC) == 0;
}

// A non-fetching atomic, completed once applied at the target: posted as a
// fetching one where the provider has it (its answer comes after the
// operation; the result goes to the record's spare word), else with
// FI_DELIVERY_COMPLETE.  shm completes plain atomics when it queues them, so a
// later operation through another provider could overtake them.
ssize_t OfiAtomics::post_atomic(OfiRdma* rec, std::uint64_t target, std::uint64_t key,
                                fi_datatype dt, fi_op op, bool can_fetch) noexcept {
    if (can_fetch)
        return fi_fetch_atomic(f_.ep.get(), &rec->operand, 1, one_sided_.record_desc(),
                               &rec->compare, one_sided_.record_desc(), rec->endpoint->address,
                               target, key, dt, op, static_cast<OpContext*>(rec));
    fi_ioc operand{&rec->operand, 1};
    fi_rma_ioc remote{target, 1, key};
    void* desc = one_sided_.record_desc();
    const fi_msg_atomic msg{&operand, &desc, 1,  rec->endpoint->address,       &remote,
                            1,        dt,    op, static_cast<OpContext*>(rec), 0};
    return fi_atomicmsg(f_.ep.get(), &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
}

// An atomic's target: aligned to its width (a misaligned one is not atomic)
// and inside a registration of the peer's that allows atomics.
Status OfiAtomics::check_atomic_target(const btl::AtomicRequest& req,
                                       PackedHandle& packed) const noexcept {
    const std::size_t width = btl::util::atomic_width(req.flags);
    if (req.remote % width != 0) [[unlikely]]
        return Status::bad_param;
    return one_sided_.check_remote(req.remote_handle, req.remote, width,
                                   btl::reg_flags::remote_atomic, packed);
}

Status OfiAtomics::atomic_common(const btl::AtomicRequest& req, bool fetch) noexcept {
    const int slot = op_slot(req.op);
    if (!m_.valid(req.endpoint) || slot < 0 || (fetch && req.local == nullptr)) [[unlikely]]
        return Status::bad_param;
    if (OfiModule::lost(req.endpoint)) [[unlikely]]
        return Status::peer_failed;
    const bool bits32 = (req.flags & btl::atomic_flags::bits32) != 0;
    const AtomicCaps& caps = bits32 ? atomics32_[slot] : atomics64_[slot];
    if (!(fetch ? caps.fetch : caps.plain)) [[unlikely]]
        return Status::not_supported;
    const std::size_t width = btl::util::atomic_width(req.flags);
    PackedHandle p;
    if (Status s = check_atomic_target(req, p); s != Status::success) [[unlikely]]
        return s;
    void* result_desc = fetch ? one_sided_.local_desc(req.local_handle, req.local, width) : nullptr;
    if (fetch && f_.local_mr && result_desc == nullptr) [[unlikely]]
        return Status::bad_param;  // this provider needs the result buffer registered
    OfiRdma* rec = one_sided_.start_rdma(req.endpoint, req.local, req.local_handle, req.cb,
                                         req.cbcontext, req.cbdata);
    if (rec == nullptr) return Status::out_of_resource;
    rec->operand = req.operand;  // little-endian: a 32-bit operation reads the low half
    const fi_datatype dt = datatype(bits32, fi_atomics[slot].is_signed);
    const std::uint64_t target = f_.target_address(p, req.remote);
    const ssize_t rc =
        fetch ? fi_fetch_atomic(f_.ep.get(), &rec->operand, 1, one_sided_.record_desc(), req.local,
                                result_desc, rec->endpoint->address, target, p.key, dt,
                                fi_atomics[slot].fi, static_cast<OpContext*>(rec))
              : post_atomic(rec, target, p.key, dt, fi_atomics[slot].fi, caps.fetch);
    return one_sided_.issued(rec, rc);
}

Status OfiAtomics::atomic_op(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_op(req), false);
}

Status OfiAtomics::atomic_fop(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_fop(req), true);
}

Status OfiAtomics::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    if (!m_.valid(req.endpoint) || req.local == nullptr) [[unlikely]]
        return Status::bad_param;
    if (OfiModule::lost(req.endpoint)) [[unlikely]]
        return Status::peer_failed;
    const bool bits32 = (req.flags & btl::atomic_flags::bits32) != 0;
    if (!(bits32 ? cswap32_ : cswap64_)) [[unlikely]]
        return Status::not_supported;
    const std::size_t width = btl::util::atomic_width(req.flags);
    PackedHandle p;
    if (Status s = check_atomic_target(req, p); s != Status::success) [[unlikely]]
        return s;
    void* result_desc = one_sided_.local_desc(req.local_handle, req.local, width);
    if (f_.local_mr && result_desc == nullptr) [[unlikely]]
        return Status::bad_param;
    OfiRdma* rec = one_sided_.start_rdma(req.endpoint, req.local, req.local_handle, req.cb,
                                         req.cbcontext, req.cbdata);
    if (rec == nullptr) return Status::out_of_resource;
    rec->operand = req.operand;
    rec->compare = req.compare;
    const ssize_t rc =
        fi_compare_atomic(f_.ep.get(), &rec->operand, 1, one_sided_.record_desc(), &rec->compare,
                          one_sided_.record_desc(), req.local, result_desc, rec->endpoint->address,
                          f_.target_address(p, req.remote), p.key, datatype(bits32, false),
                          FI_CSWAP, static_cast<OpContext*>(rec));
    return one_sided_.issued(rec, rc);
}

}  // namespace transit::ofi
