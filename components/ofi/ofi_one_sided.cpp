// btl::Rdma of an ofi module: put, get, registrations and flush.
#include "ofi_one_sided.hpp"

#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <string>

#include "ofi_module.hpp"
#include "ofi_status.hpp"

namespace transit::ofi {

Status OfiOneSided::check_remote(const btl::RegistrationHandle* handle, std::uint64_t address,
                                 std::size_t size, std::uint32_t access,
                                 PackedHandle& packed) const noexcept {
    // Another provider's registration of the same region is not ours to use.
    return remote_refusal(handle, m_.provider_id_, address, size, access, packed);
}

void* OfiOneSided::local_desc(btl::RegistrationHandle* handle, const void* address,
                              std::size_t size) noexcept {
    (void)address;
    (void)size;
    if (!m_.local_mr_) return nullptr;
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
    OfiRdma* op = m_.rdma_.get();
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
        ++m_.rdma_pending_;
        ++m_.rdma_live_;
        ++m_.live_to(*op);
        return Status::success;
    }
    m_.rdma_.put(op);
    return rc == -FI_EAGAIN ? Status::out_of_resource : status_of_fi_error(static_cast<int>(-rc));
}

// Providers that need local registrations (FI_MR_LOCAL) get them from the
// caller's handle or from the cache; a miss registers and holds the region
// until the operation completes.
Status OfiOneSided::transfer(const btl::RdmaRequest& req, bool write) noexcept {
    if (!m_.valid(req.endpoint) || (req.size > 0 && req.local == nullptr)) [[unlikely]]
        return Status::bad_param;
    if (m_.lost(req.endpoint)) [[unlikely]]
        return Status::peer_failed;
    PackedHandle p;
    const std::uint32_t access = write ? btl::reg_flags::remote_write : btl::reg_flags::remote_read;
    if (Status s = check_remote(req.remote_handle, req.remote, req.size, access, p);
        s != Status::success) [[unlikely]]
        return s;
    if (req.size > (write ? m_.attr_.put_limit : m_.attr_.get_limit)) [[unlikely]]
        return Status::bad_param;
    OfiRdma* op =
        start_rdma(req.endpoint, req.local, req.local_handle, req.cb, req.cbcontext, req.cbdata);
    if (op == nullptr) return Status::out_of_resource;
    void* desc = local_desc(req.local_handle, req.local, req.size);
    if (m_.local_mr_ && desc == nullptr) {
        CacheEntry* e = m_.rcache_.find(req.local, req.size);
        if (e == nullptr)
            e = m_.rcache_.acquire(req.local, req.size, nullptr);
        else
            m_.rcache_.retain(e);
        if (e == nullptr) {
            m_.rdma_.put(op);
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
        fi_rma_iov rma{m_.target_address(p, req.remote), req.size, p.key};
        const fi_msg_rma msg{
            &iov, &desc, 1, op->endpoint->address, &rma, 1, static_cast<OpContext*>(op), 0};
        rc = fi_writemsg(m_.ep_.get(), &msg, FI_COMPLETION | m_.delivery_complete_);
    } else {
        rc = fi_read(m_.ep_.get(), req.local, req.size, desc, op->endpoint->address,
                     m_.target_address(p, req.remote), p.key, static_cast<OpContext*>(op));
    }
    if (rc != 0 && op->temp_registration != nullptr) {
        m_.rcache_.release(static_cast<CacheEntry*>(op->temp_registration));
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
        e = m_.rcache_.acquire(base, size, &error);
        if (e == nullptr) {
            m_.out_.verbose(1, "{}: registering {} bytes at {} failed: {}", m_.name(), size, base,
                            error);
            return nullptr;
        }
    }
    // Peers name the memory by libfabric's key: the table's own key is unused.
    OfiRegistration* r = m_.registrations_.add().record;
    if (r == nullptr) {
        if (e != nullptr) m_.rcache_.release(e);
        m_.out_.verbose(1, "{}: register_mem: no room for another registration", m_.name());
        return nullptr;
    }
    const auto addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base));
    r->packed = PackedHandle{.key = e ? e->key : 0,
                             .mr_base = e ? e->base : addr,
                             .base = addr,
                             .len = size,
                             .access = flags,
                             .magic = handle_magic,
                             .provider = m_.provider_id_};
    r->entry = e;
    return reinterpret_cast<btl::RegistrationHandle*>(&r->packed);
}

Status OfiOneSided::deregister_mem(btl::RegistrationHandle* handle) {
    OfiRegistration* r = m_.registrations_.live(handle);
    if (r == nullptr) return Status::not_found;
    if (r->entry != nullptr) m_.rcache_.release(r->entry);
    r->entry = nullptr;
    m_.registrations_.remove(*r);
    return Status::success;
}

// Completions arrive in any order: waiting until none of the operations in
// question is in flight covers every one started before the call.  A lost
// peer's operations are left out: they already ended with peer_failed, and shm
// may never give them back.
Status OfiOneSided::flush(btl::Endpoint* endpoint) {
    auto* only = static_cast<OfiEndpoint*>(endpoint);
    const std::size_t& live = only == nullptr ? m_.rdma_live_ : m_.live_to(*only);
    while (live > 0) m_.completions_.poll();
    return only != nullptr && only->failed ? Status::peer_failed : Status::success;
}

}  // namespace transit::ofi
