// transit::init and the Context: thin, inlined-by-LTO-or-not forwarding to the
// engine, one non-virtual call per operation.
#include <stdexcept>

#include "pml/engine.hpp"
#include "pml/last_error.hpp"
#include "runtime/runtime.hpp"
#include "transit/params.hpp"
#include "transit/transit.hpp"

namespace transit {

namespace {

pml::Req* as_req(Request* r) noexcept {
    return static_cast<pml::Req*>(r);
}
pml::RegionImpl* as_region(MemoryRegion* r) noexcept {
    return reinterpret_cast<pml::RegionImpl*>(r);
}
const pml::RemoteKeyImpl* as_key(const RemoteKey* k) noexcept {
    return reinterpret_cast<const pml::RemoteKeyImpl*>(k);
}

}  // namespace

namespace {

Context open_context(std::optional<ThreadLevel> level) {
    auto engine = std::make_unique<pml::Engine>(rt::open_runtime(), level);
    params::registry().warn_unknown();
    return Context(std::move(engine));
}

}  // namespace

Context init(int& argc, char**& argv) {
    params::parse_command_line(argc, argv);
    return open_context({});
}

Context init() {
    return open_context({});
}

Context init(int& argc, char**& argv, ThreadLevel level) {
    params::parse_command_line(argc, argv);
    return open_context(level);
}

Context init(ThreadLevel level) {
    return open_context(level);
}

Context::Context(std::unique_ptr<pml::Engine> engine) : engine_(std::move(engine)) {
    engine_->set_context(this);
}

Context::Context(Context&& o) noexcept : engine_(std::move(o.engine_)) {
    if (engine_) engine_->set_context(this);
}

Context& Context::operator=(Context&& o) noexcept {
    engine_ = std::move(o.engine_);
    if (engine_) engine_->set_context(this);
    return *this;
}

Context::~Context() {
    if (engine_) engine_->shutdown();
}

Rank Context::rank() const noexcept {
    return engine_->rank();
}
std::uint32_t Context::size() const noexcept {
    return engine_->size();
}
ThreadLevel Context::thread_level() const noexcept {
    return engine_->thread_level();
}
int Context::progress() noexcept {
    auto guard = engine_->lock();
    return engine_->progress();
}

int Context::progress(std::chrono::milliseconds timeout) noexcept {
    auto guard = engine_->lock();
    return engine_->progress_for(timeout);
}

int Context::event_fd() const noexcept {
    return engine_->event_fd();
}

Status Context::arm() noexcept {
    auto guard = engine_->lock();
    return engine_->arm();
}

Status Context::isend(Rank dst, std::uint32_t tag, const void* buf, std::size_t len, Request*& req,
                      void* user) noexcept {
    const pml::ApiCall call("isend");
    auto guard = engine_->lock();
    pml::Req* r;
    Status s = engine_->isend(dst, tag, nullptr, 0, buf, len, r, user);
    req = r;
    return call(s, dst, this);
}

Status Context::isendv(Rank dst, std::uint32_t tag, std::span<const iovec> iov, Request*& req,
                       void* user) noexcept {
    const pml::ApiCall call("isendv");
    auto guard = engine_->lock();
    pml::Req* r;
    Status s = engine_->isend(dst, tag, iov.data(), iov.size(), nullptr, 0, r, user);
    req = r;
    return call(s, dst, this);
}

Status Context::irecv(Rank src, std::uint32_t tag, void* buf, std::size_t len, Request*& req,
                      void* user) noexcept {
    const pml::ApiCall call("irecv");
    auto guard = engine_->lock();
    pml::Req* r;
    Status s = engine_->irecv(src, tag, buf, nullptr, 0, len, r, user);
    req = r;
    return call(s, src, this);
}

Status Context::irecvv(Rank src, std::uint32_t tag, std::span<const iovec> iov, Request*& req,
                       void* user) noexcept {
    const pml::ApiCall call("irecvv");
    auto guard = engine_->lock();
    pml::Req* r;
    Status s = engine_->irecv(src, tag, nullptr, iov.data(), iov.size(), 0, r, user);
    req = r;
    return call(s, src, this);
}

Status Context::test(Request*& req, bool& done, RequestStatus* status) noexcept {
    const pml::ApiCall call("test");
    auto guard = engine_->lock();
    done = false;
    if (!req) return call(Status::bad_param);
    if (!req->done()) engine_->progress();
    if (!req->done()) return call(Status::success);
    done = true;
    Status s = req->status().status;
    const Rank source = req->status().source;
    if (status) *status = req->status();
    engine_->release(as_req(req));
    req = nullptr;
    return call(s, source, this);
}

Status Context::wait(Request*& req, RequestStatus* status) noexcept {
    const pml::ApiCall call("wait");
    auto guard = engine_->lock();
    if (!req) return call(Status::bad_param);
    Request* r = req;
    engine_->wait_until([r] { return r->done(); });
    Status s = r->status().status;
    const Rank source = r->status().source;
    if (status) *status = r->status();
    engine_->release(as_req(r));
    req = nullptr;
    return call(s, source, this);
}

Status Context::wait(Request*& req, std::chrono::milliseconds timeout,
                     RequestStatus* status) noexcept {
    auto guard = engine_->lock();
    if (!req) return Status::bad_param;
    Request* r = req;
    if (!engine_->wait_until([r] { return r->done(); }, pml::Engine::deadline_after(timeout)))
        return Status::timeout;
    Status s = r->status().status;
    if (status) *status = r->status();
    engine_->release(as_req(r));
    req = nullptr;
    return s;
}

Status Context::wait_any(std::span<Request*> reqs, std::size_t& index,
                         RequestStatus* status) noexcept {
    const pml::ApiCall call("wait_any");
    auto guard = engine_->lock();
    bool any = false;
    for (Request* r : reqs) any |= r != nullptr;
    if (!any) return call(Status::not_found);
    std::size_t found = reqs.size();
    engine_->wait_until([&] {
        for (std::size_t i = 0; i < reqs.size(); ++i)
            if (reqs[i] && reqs[i]->done()) {
                found = i;
                return true;
            }
        return false;
    });
    index = found;
    return call(wait(reqs[found], status));
}

Status Context::wait_all(std::span<Request*> reqs, std::span<RequestStatus> statuses) noexcept {
    const pml::ApiCall call("wait_all");
    auto guard = engine_->lock();
    // Progress until every request is done (most already are when a window of
    // small sends returns), then collect them all in one pass.
    std::size_t next = 0;
    engine_->wait_until([&] {
        while (next < reqs.size() && (!reqs[next] || reqs[next]->done())) ++next;
        return next == reqs.size();
    });
    Status first = Status::success;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        Request* r = reqs[i];
        if (!r) continue;
        Status s = r->status().status;
        if (i < statuses.size()) statuses[i] = r->status();
        engine_->release(as_req(r));
        reqs[i] = nullptr;
        if (!ok(s) && ok(first)) first = s;
    }
    return call(first);
}

Status Context::cancel(Request* req) noexcept {
    const pml::ApiCall call("cancel");
    auto guard = engine_->lock();
    return call(req ? engine_->cancel(as_req(req)) : Status::bad_param);
}

Status Context::iprobe(Rank src, std::uint32_t tag, bool& found, RequestStatus& status) noexcept {
    const pml::ApiCall call("iprobe");
    auto guard = engine_->lock();
    if (src != any_rank && src >= size()) return call(Status::bad_param, src, this);
    engine_->progress();
    found = engine_->iprobe(src, tag, status);
    return call(Status::success, src, this);
}

Status Context::probe(Rank src, std::uint32_t tag, RequestStatus& status) noexcept {
    const pml::ApiCall call("probe");
    auto guard = engine_->lock();
    if (src != any_rank && src >= size()) return call(Status::bad_param, src, this);
    engine_->wait_until([&] { return engine_->iprobe(src, tag, status); });
    return call(Status::success, src, this);
}

// The blocking calls let go of the lock before waiting (wait takes it again):
// held twice, wait_until could not let other threads in.
Status Context::send(Rank dst, std::uint32_t tag, const void* buf, std::size_t len) noexcept {
    const pml::ApiCall call("send");
    pml::Req* r = nullptr;
    Status s;
    {
        auto guard = engine_->lock();
        s = engine_->send(dst, tag, buf, len, r);
    }
    if (!r) [[likely]]
        return call(s, dst, this);
    Request* req = r;
    return call(wait(req), dst, this);
}

Status Context::recv(Rank src, std::uint32_t tag, void* buf, std::size_t len,
                     RequestStatus* status) noexcept {
    const pml::ApiCall call("recv");
    Request* r;
    Status s = irecv(src, tag, buf, len, r);
    if (!r) return call(s, src, this);
    return call(wait(r, status), src, this);
}

Status Context::register_am_handler(std::uint32_t id, AmHeaderFn header_handler,
                                    AmCompletionFn completion_handler, void* handler_arg) {
    const pml::ApiCall call("register_am_handler");
    auto guard = engine_->lock();
    return call(engine_->register_am(id, {header_handler, completion_handler, handler_arg}));
}

Status Context::am_send(Rank dst, std::uint32_t id, std::span<const std::byte> header,
                        const void* data, std::size_t len, const AmCounters& counters) noexcept {
    const pml::ApiCall call("am_send");
    auto guard = engine_->lock();
    return call(engine_->am_send(dst, id, header, data, len, counters), dst, this);
}

CounterRef Context::counter_ref(Counter& c) const noexcept {
    auto guard = engine_->lock();
    return engine_->counter_ref(c);
}

Status Context::release_counter_ref(CounterRef ref) noexcept {
    const pml::ApiCall call("release_counter_ref");
    auto guard = engine_->lock();
    return call(engine_->release_counter_ref(ref));
}

Status Context::counter_wait(const Counter& c, std::uint64_t value) noexcept {
    const pml::ApiCall call("counter_wait");
    auto guard = engine_->lock();
    engine_->wait_until([&] { return c.value() + c.lost() >= value; });
    return call(c.value() >= value ? Status::success : Status::error);
}

Status Context::register_memory(void* base, std::size_t size, MemoryRegion*& region) {
    const pml::ApiCall call("register_memory");
    return call(register_memory(base, size, region, RegionScope::everyone()));
}

Status Context::register_memory(void* base, std::size_t size, MemoryRegion*& region,
                                const RegionScope& scope) {
    const pml::ApiCall call("register_memory");
    auto guard = engine_->lock();
    pml::RegionImpl* r;
    Status s = engine_->register_memory(base, size, scope, r);
    region = reinterpret_cast<MemoryRegion*>(r);
    return call(s);
}

Status Context::deregister_memory(MemoryRegion*& region) {
    const pml::ApiCall call("deregister_memory");
    auto guard = engine_->lock();
    Status s = engine_->deregister_memory(as_region(region));
    region = nullptr;
    return call(s);
}

std::vector<std::byte> Context::pack_key(const MemoryRegion* region) const {
    auto guard = engine_->lock();
    return engine_->pack_key(reinterpret_cast<const pml::RegionImpl*>(region));
}

Status Context::unpack_key(std::span<const std::byte> packed, RemoteKey*& key) {
    const pml::ApiCall call("unpack_key");
    auto guard = engine_->lock();
    pml::RemoteKeyImpl* k;
    Status s = engine_->unpack_key(packed, k);
    key = reinterpret_cast<RemoteKey*>(k);
    return call(s);
}

void Context::release_key(RemoteKey*& key) {
    auto guard = engine_->lock();
    std::unique_ptr<pml::RemoteKeyImpl> owned(reinterpret_cast<pml::RemoteKeyImpl*>(key));
    key = nullptr;
}

Status Context::put(Rank dst, const void* src, std::size_t len, const RemoteKey* key,
                    std::uint64_t offset) noexcept {
    const pml::ApiCall call("put");
    auto guard = engine_->lock();
    return call(engine_->rma(true, dst, const_cast<void*>(src), len, as_key(key), offset), dst,
                this);
}

Status Context::get(Rank dst, void* dst_buf, std::size_t len, const RemoteKey* key,
                    std::uint64_t offset) noexcept {
    const pml::ApiCall call("get");
    auto guard = engine_->lock();
    return call(engine_->rma(false, dst, dst_buf, len, as_key(key), offset), dst, this);
}

Status Context::atomic(Rank dst, AtomicOp op, AtomicWidth width, const RemoteKey* key,
                       std::uint64_t offset, std::uint64_t operand,
                       std::uint64_t* fetched) noexcept {
    const pml::ApiCall call("atomic");
    auto guard = engine_->lock();
    return call(engine_->atomic(dst, static_cast<std::uint8_t>(op), width, as_key(key), offset,
                                operand, 0, fetched),
                dst, this);
}

Status Context::cswap(Rank dst, AtomicWidth width, const RemoteKey* key, std::uint64_t offset,
                      std::uint64_t compare, std::uint64_t value, std::uint64_t* fetched) noexcept {
    const pml::ApiCall call("cswap");
    auto guard = engine_->lock();
    if (!fetched) return call(Status::bad_param, dst, this);
    return call(engine_->atomic(dst, pml::wire::cswap_op, width, as_key(key), offset, value,
                                compare, fetched),
                dst);
}

Status Context::flush(Rank dst) noexcept {
    const pml::ApiCall call("flush");
    auto guard = engine_->lock();
    return call(engine_->flush(dst), dst, this);
}
Status Context::flush_all() noexcept {
    const pml::ApiCall call("flush_all");
    auto guard = engine_->lock();
    return call(engine_->flush_all());
}
Status Context::fence() noexcept {
    const pml::ApiCall call("fence");
    auto guard = engine_->lock();
    // The barrier runs even after a refusal, so every rank leaves the fence together.
    const Status flushed = engine_->flush_all();
    const Status s = engine_->barrier();
    return call(ok(s) ? flushed : s);
}
Status Context::barrier() noexcept {
    const pml::ApiCall call("barrier");
    auto guard = engine_->lock();
    return call(engine_->barrier());
}
std::string Context::listen() {
    auto guard = engine_->lock();
    return engine_->listen();
}
Status Context::connect(std::string_view address, Rank& peer) {
    const pml::ApiCall call("connect");
    auto guard = engine_->lock();
    try {
        return call(engine_->connect(address, peer));
    } catch (const std::exception& e) {
        log::error("pml: connect: {}", e.what());
        return call(Status::out_of_resource);
    }
}
Status Context::publish(std::string_view name) {
    const pml::ApiCall call("publish");
    auto guard = engine_->lock();
    return call(engine_->publish(name));
}
Status Context::lookup(std::string_view name, std::string& address,
                       std::chrono::milliseconds wait) {
    const pml::ApiCall call("lookup");
    auto guard = engine_->lock();
    return call(engine_->lookup(name, wait, address));
}
Status Context::unpublish(std::string_view name) {
    const pml::ApiCall call("unpublish");
    auto guard = engine_->lock();
    return call(engine_->unpublish(name));
}
void Context::on_peer_event(PeerEventFn fn, void* user) noexcept {
    auto guard = engine_->lock();
    engine_->on_peer_event(fn, user);
}

Status Context::disconnect(Rank peer, Disconnect how) noexcept {
    const pml::ApiCall call("disconnect");
    auto guard = engine_->lock();
    return call(engine_->disconnect(peer, how), peer, this);
}
PeerTransports Context::transports(Rank peer) {
    auto guard = engine_->lock();
    PeerTransports t;
    const bml::Endpoint* ep = engine_->peer_endpoint(peer);
    if (!ep) return t;
    auto names = [](const std::vector<bml::BtlRef>& refs) {
        std::vector<std::string> out;
        for (const bml::BtlRef& r : refs) out.push_back(r.module->name());
        return out;
    };
    t.eager = names(ep->eager);
    t.send = names(ep->send);
    t.rdma = names(ep->rdma);
    return t;
}

void* Context::mem_alloc(std::size_t size) noexcept {
    auto guard = engine_->lock();
    return engine_->mem_alloc(size);
}
void Context::mem_free(void* ptr) noexcept {
    auto guard = engine_->lock();
    engine_->mem_free(ptr);
}

}  // namespace transit
