// btl::Rdma of an ofi module: put, get, registrations and flush.
#include "ofi_one_sided.hpp"

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <span>
#include <stdexcept>
#include <string>

#include "ofi_completions.hpp"
#include "ofi_endpoint.hpp"
#include "ofi_fabric.hpp"
#include "ofi_module.hpp"
#include "ofi_status.hpp"

namespace transit::ofi {

void OfiOneSided::setup(std::size_t max_ops, std::size_t ranks) {
    records_.setup({.initial = max_ops, .max = max_ops});
    for (OfiRdma& op : records_.items()) op.kind = OpKind::rdma;
    live_to_rank_.assign(ranks, 0);
    if (f_.local_mr) {
        // One registration, kept for the module's life.
        std::string error;
        const std::span<OfiRdma> block = records_.chunk_items(0);
        CacheEntry* e = f_.rcache.acquire(block.data(), block.size_bytes(), &error);
        if (e == nullptr) throw std::runtime_error("registering buffers failed: " + error);
        f_.pool_registrations.push_back(e);
        record_desc_ = e->desc;
    }
}

std::size_t& OfiOneSided::live_to(OfiEndpoint& ep) noexcept {
    return ep.dynamic ? ep.rdma_live : live_to_rank_[ep.peer()];
}

std::size_t& OfiOneSided::live_to(const OfiRdma& op) noexcept {
    return op.peer < live_to_rank_.size() ? live_to_rank_[op.peer] : op.endpoint->rdma_live;
}

std::size_t OfiOneSided::in_flight_to(const OfiEndpoint& ep) const noexcept {
    return ep.dynamic ? ep.rdma_live : live_to_rank_[ep.peer()];
}

Status OfiOneSided::check_remote(const btl::RegistrationHandle* handle, std::uint64_t address,
                                 std::size_t size, std::uint32_t access,
                                 PackedHandle& packed) const noexcept {
    // Another provider's registration of the same region is not ours to use.
    return remote_refusal(handle, provider_id_, address, size, access, packed);
}

void* OfiOneSided::local_desc(btl::RegistrationHandle* handle, const void* address,
                              std::size_t size) noexcept {
    (void)address;
    (void)size;
    if (!f_.local_mr) return nullptr;
    if (handle != nullptr) {
        auto* r = reinterpret_cast<OfiRegistration*>(handle);
        if (r->entry != nullptr) return r->entry->desc;
    }
    return nullptr;
}

OfiRdma* OfiOneSided::start_rdma(btl::Endpoint* endpoint, void* local_address,
                                 btl::RegistrationHandle* local_handle,
                                 btl::RdmaCompletionFn cbfunc, void* cbcontext,
                                 void* cbdata) noexcept {
    OfiRdma* op = records_.get();
    if (op == nullptr) return nullptr;
    op->cbfunc = cbfunc;
    op->cbcontext = cbcontext;
    op->cbdata = cbdata;
    op->endpoint = static_cast<OfiEndpoint*>(endpoint);
    op->peer = endpoint->peer();
    op->local_address = local_address;
    op->local_handle = local_handle;
    op->temp_registration = nullptr;
    op->abandoned = false;
    return op;
}

Status OfiOneSided::issued(OfiRdma* op, ssize_t rc) noexcept {
    if (rc == 0) {
        ++pending_;
        ++live_;
        ++live_to(*op);
        return Status::success;
    }
    records_.put(op);
    return rc == -FI_EAGAIN ? Status::out_of_resource : status_of_fi_error(static_cast<int>(-rc));
}

// Providers that need local registrations (FI_MR_LOCAL) get them from the
// caller's handle or from the cache; a miss registers and holds the region
// until the operation completes.
Status OfiOneSided::transfer(const btl::RdmaRequest& req, bool write) noexcept {
    if (!m_.valid(req.endpoint) || (req.size > 0 && req.local == nullptr)) [[unlikely]]
        return Status::bad_param;
    if (OfiModule::lost(req.endpoint)) [[unlikely]]
        return Status::peer_failed;
    PackedHandle p;
    const std::uint32_t access = write ? btl::reg_flags::remote_write : btl::reg_flags::remote_read;
    if (Status s = check_remote(req.remote_handle, req.remote, req.size, access, p);
        s != Status::success) [[unlikely]]
        return s;
    if (req.size > (write ? m_.attributes().put_limit : m_.attributes().get_limit)) [[unlikely]]
        return Status::bad_param;
    OfiRdma* op =
        start_rdma(req.endpoint, req.local, req.local_handle, req.cb, req.cbcontext, req.cbdata);
    if (op == nullptr) return Status::out_of_resource;
    void* desc = local_desc(req.local_handle, req.local, req.size);
    if (f_.local_mr && desc == nullptr) {
        CacheEntry* e = f_.rcache.find(req.local, req.size);
        if (e == nullptr)
            e = f_.rcache.acquire(req.local, req.size, nullptr);
        else
            f_.rcache.retain(e);
        if (e == nullptr) {
            records_.put(op);
            return Status::out_of_resource;
        }
        op->temp_registration = e;
        desc = e->desc;
    }
    ssize_t rc;
    if (write) {
        // Completed only once the data is in the target's memory (FI_DELIVERY_COMPLETE):
        // a flush promises that, and a provider's default (transmit complete) lets
        // a later operation through another provider (shm beside tcp) overtake it.
        iovec iov{req.local, req.size};
        fi_rma_iov rma{f_.target_address(p, req.remote), req.size, p.key};
        const fi_msg_rma msg{
            &iov, &desc, 1, op->endpoint->address, &rma, 1, static_cast<OpContext*>(op), 0};
        rc = fi_writemsg(f_.ep.get(), &msg, FI_COMPLETION | f_.delivery_complete);
    } else {
        rc = fi_read(f_.ep.get(), req.local, req.size, desc, op->endpoint->address,
                     f_.target_address(p, req.remote), p.key, static_cast<OpContext*>(op));
    }
    if (rc != 0 && op->temp_registration != nullptr) {
        f_.rcache.release(static_cast<CacheEntry*>(op->temp_registration));
        op->temp_registration = nullptr;
    }
    return issued(op, rc);
}

Status OfiOneSided::put(const btl::RdmaRequest& req) noexcept {
    return transfer(req, true);
}

Status OfiOneSided::get(const btl::RdmaRequest& req) noexcept {
    return transfer(req, false);
}

btl::RegistrationHandle* OfiOneSided::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                   std::uint32_t flags) {
    if (base == nullptr && size > 0) return nullptr;
    CacheEntry* e = nullptr;
    if (size > 0) {
        std::string error;
        e = f_.rcache.acquire(base, size, &error);
        if (e == nullptr) {
            out_.verbose(1, "{}: registering {} bytes at {} failed: {}", m_.name(), size, base,
                         error);
            return nullptr;
        }
    }
    // Peers name the memory by libfabric's key: the table's own key is unused.
    OfiRegistration* r = registrations_.add().record;
    if (r == nullptr) {
        if (e != nullptr) f_.rcache.release(e);
        out_.verbose(1, "{}: register_mem: no room for another registration", m_.name());
        return nullptr;
    }
    const auto addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base));
    r->packed = PackedHandle{.key = e ? e->key : 0,
                             .mr_base = e ? e->base : addr,
                             .base = addr,
                             .len = size,
                             .access = flags,
                             .magic = handle_magic,
                             .provider = provider_id_};
    r->entry = e;
    return reinterpret_cast<btl::RegistrationHandle*>(&r->packed);
}

Status OfiOneSided::deregister_mem(btl::RegistrationHandle* handle) {
    OfiRegistration* r = registrations_.live(handle);
    if (r == nullptr) return Status::not_found;
    if (r->entry != nullptr) f_.rcache.release(r->entry);
    r->entry = nullptr;
    registrations_.remove(*r);
    return Status::success;
}

// Completions arrive in any order: waiting until none of the operations in
// question is in flight covers every one started before the call.  A lost
// peer's operations are left out: they already ended with peer_failed, and shm
// may never give them back.
Status OfiOneSided::flush(btl::Endpoint* endpoint) {
    auto* only = static_cast<OfiEndpoint*>(endpoint);
    const std::size_t& live = only == nullptr ? live_ : live_to(*only);
    while (live > 0) completions_.poll();
    return only != nullptr && only->failed ? Status::peer_failed : Status::success;
}

void OfiOneSided::complete(OfiRdma* op) noexcept {
    // Copied out first: the callback may start another operation.
    const OfiRdma done = *op;
    if (!retire(op)) return;
    call_back(done, Status::success);
}

void OfiOneSided::fail(OfiRdma* op, int err, const char* why) noexcept {
    const OfiRdma done = *op;
    if (!retire(op)) return;
    out_.verbose(10, "{}: one-sided operation with rank {} failed (error {}): {}", m_.name(),
                 done.peer, err, why);
    call_back(done, status_of_rdma_failure(err));
}

// A one-sided operation the provider completed (or failed): its temporary
// registration and record go back.  False when its peer was lost before: the
// caller was called back then, and is not again.
bool OfiOneSided::retire(OfiRdma* op) noexcept {
    const bool abandoned = op->abandoned;
    if (op->temp_registration != nullptr)
        f_.rcache.release(static_cast<CacheEntry*>(op->temp_registration));
    op->temp_registration = nullptr;
    if (!abandoned) end_live(*op);
    records_.put(op);
    --pending_;
    return !abandoned;
}

void OfiOneSided::call_back(const OfiRdma& op, Status status) noexcept {
    if (op.cbfunc != nullptr)
        op.cbfunc(&m_, op.endpoint, op.local_address, op.local_handle, op.cbcontext, op.cbdata,
                  status);
}

// By rank: an operation started before the peer was deleted and added again
// is lost with it too.
void OfiOneSided::abandon(Rank peer, Status status) noexcept {
    for (OfiRdma& op : records_.items()) {
        if (!op.in_use || op.abandoned || op.peer != peer) continue;
        op.abandoned = true;
        end_live(op);
        call_back(op, status);
    }
}

}  // namespace transit::ofi
