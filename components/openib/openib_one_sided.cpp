// put, get and memory registration of an openib module (openib_one_sided.hpp).
#include "openib_one_sided.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

// ibv_reg_mr behind the registration cache.
class OneSided::Registrar final : public RegistrationBackend {
  public:
    explicit Registrar(ibv_pd* pd) : pd_(pd) {}
    bool register_region(Registration& r) noexcept override {
        ibv_mr* mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(r.base), r.length,
                                verbs::access_flags(r.access));
        if (!mr) return false;
        r.lkey = mr->lkey;
        r.rkey = mr->rkey;
        r.backend_handle = mr;
        return true;
    }
    void deregister_region(Registration& r) noexcept override {
        if (r.backend_handle) (void)ibv_dereg_mr(static_cast<ibv_mr*>(r.backend_handle));
        r.backend_handle = nullptr;
    }

  private:
    ibv_pd* pd_;
};

OneSided::OneSided(Module& module) noexcept : module_(module) {}

OneSided::~OneSided() = default;

void OneSided::open(ibv_pd* pd, std::size_t max_unused, bool monitor) {
    registrar_ = std::make_unique<Registrar>(pd);
    rcache_ = std::make_unique<RegistrationCache>(
        *registrar_,
        RegistrationCache::Config{.max_unused = max_unused,
                                  .page_size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)),
                                  .track_releases = monitor});
    if (const char* why = rcache_->unused_off_reason())
        module_.out().verbose(1, "{}: no memory registration is kept for reuse: {}", module_.name(),
                              why);
}

// put and get differ in the access the remote registration must grant, the
// size limit and which way the device moves the data (the local buffer is
// written by a get, which verbs checks against the registration's access).
Status OneSided::transfer(const btl::RdmaRequest& req, RdmaOp op) noexcept {
    const bool get = op == RdmaOp::get;
    const auto& attr = module_.attributes();
    RemoteKey rk;
    if (!req.endpoint || !local_ok(req.local_handle, req.local, req.size, get) ||
        !unpack_handle(req.remote_handle, rk) ||
        req.size > (get ? attr.get_limit : attr.put_limit) ||
        !rk.allows(req.remote, req.size,
                   get ? btl::reg_flags::remote_read : btl::reg_flags::remote_write))
        return Status::bad_param;
    RdmaFrag* f = module_.fragments().take_rdma();
    if (!f) return Status::out_of_resource;
    f->op = op;
    f->local_address = req.local;
    f->lkey = reinterpret_cast<Handle*>(req.local_handle)->lkey;
    f->local_handle = req.local_handle;
    f->remote_address = req.remote;
    f->rkey = rk.rkey;
    f->size = req.size;
    f->cbfunc = req.cb;
    f->cbcontext = req.cbcontext;
    f->user_cbdata = req.cbdata;
    return module_.start_rdma(req.endpoint, f);
}

Status OneSided::put(const btl::RdmaRequest& req) noexcept {
    return transfer(req, RdmaOp::put);
}

Status OneSided::get(const btl::RdmaRequest& req) noexcept {
    return transfer(req, RdmaOp::get);
}

btl::RegistrationHandle* OneSided::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                std::uint32_t flags) {
    if (!rcache_) return nullptr;
    if (flags == 0) flags = btl::reg_flags::access_any;
    Registration* r = rcache_->acquire(base, size, flags);
    if (!r) {
        module_.out().verbose(1, "{}: registering {} bytes at {} failed: {}", module_.name(), size,
                              base, std::strerror(errno));
        return nullptr;
    }
    Handle* h = handles_.add().record;
    if (!h) {
        rcache_->release(r);
        module_.out().verbose(1, "{}: register_mem: no room for another registration",
                              module_.name());
        return nullptr;
    }
    wire::encode(wire::RemoteKey{reinterpret_cast<std::uint64_t>(base), size, r->rkey, flags},
                 h->packed);
    h->lkey = r->lkey;
    h->registration = r;
    return reinterpret_cast<btl::RegistrationHandle*>(h);
}

Status OneSided::deregister_mem(btl::RegistrationHandle* handle) {
    if (!handle || !rcache_) return Status::bad_param;
    Handle* h = handles_.live(handle);
    if (!h) return Status::not_found;  // deregistered already, or not ours
    rcache_->release(h->registration);
    h->registration = nullptr;
    handles_.remove(*h);
    return Status::success;
}

Status OneSided::flush(btl::Endpoint* endpoint) {
    auto* ep = static_cast<Endpoint*>(endpoint);
    while (ep ? ep->rdma_in_flight > 0 && !ep->failed() : module_.endpoints().rdma_in_flight())
        module_.progress_engine().progress();
    if (ep && ep->failed()) return Status::peer_failed;
    return Status::success;
}

const Registration* OneSided::find(std::uint32_t rkey) const noexcept {
    if (!rcache_) return nullptr;
    return rcache_->find_held([&](const Registration& h) { return h.rkey == rkey; });
}

}  // namespace transit::openib
