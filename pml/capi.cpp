// The C API: each function forwards to the Context method of the same name.
// A C header handler is adapted through a small table kept by the context.
#include "transit/transit.h"

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <optional>

#include "pml/last_error.hpp"
#include "pml/pools.hpp"

#include "transit/log.hpp"
#include "transit/params.hpp"

#include "transit/transit.hpp"

struct transit_context {
    explicit transit_context(transit::Context c) : ctx(std::move(c)) {}
    transit::Context ctx;
    struct CHandler {
        transit_am_header_fn header = nullptr;
        transit_am_completion_fn completion = nullptr;
        void* arg = nullptr;
        transit_context* self = nullptr;
    };
    std::array<CHandler, transit::Context::am_max_handlers> handlers{};
    transit_peer_event_fn peer_event = nullptr;
    void* peer_event_user = nullptr;
};

struct transit_counter {
    transit::Counter c;
};

namespace {

using transit::Status;

int code(Status s) noexcept {
    return static_cast<int>(s);
}

// A C caller sees the status; the reason goes to the log (stderr unless a
// sink is set), as the C++ tools print it, and stays for transit_last_error
// (transit::last_error, which the Context methods set when they fail).
int failed(int status, std::string_view reason) noexcept {
    transit::pml::set_last_error(reason);
    try {
        transit::log::error("{}", reason);
    } catch (...) {
        // Out of memory while reporting: the status still says what failed.
    }
    return status;
}

template <typename F>
int guarded(F&& f) noexcept {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        return failed(TRANSIT_OUT_OF_RESOURCE, "out of memory");
    } catch (const transit::params::Error& e) {
        return failed(TRANSIT_BAD_PARAM, e.what());
    } catch (const transit::InitError& e) {
        return failed(code(e.status()), e.what());
    } catch (const std::exception& e) {
        return failed(TRANSIT_ERROR, e.what());
    } catch (...) {
        return failed(TRANSIT_ERROR, "unknown error");
    }
}

// An address into the caller's buffer, NUL-terminated; TRUNCATED when it does
// not fit (*needed says what would).
int copy_out(const std::string& text, char* buf, size_t size, size_t* needed,
             std::string_view what) {
    if (needed) *needed = text.size() + 1;
    if (!buf || size < text.size() + 1)
        return failed(TRANSIT_TRUNCATED, std::string(what) + ": the buffer is too small");
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return TRANSIT_SUCCESS;
}

void to_c(const transit::RequestStatus& s, transit_status* out) noexcept {
    if (!out) return;
    out->source = s.source;
    out->tag = s.tag;
    out->length = s.length;
    out->sent_length = s.sent_length;
    out->status = code(s.status);
}

// transit::init with argc/argv that may be null, at `level` if given.
std::unique_ptr<transit_context> open_context(int* argc, char*** argv,
                                              std::optional<transit::ThreadLevel> level) {
    int zero = 0;
    char* none[] = {nullptr};
    char** empty = none;
    int& ac = argc ? *argc : zero;
    char**& av = argv ? *argv : empty;
    return std::make_unique<transit_context>(level ? transit::init(ac, av, *level)
                                                   : transit::init(ac, av));
}

transit::Request*& as_req(transit_request*& r) noexcept {
    return reinterpret_cast<transit::Request*&>(r);
}

// A C header handler's answer, carried to the completion as its user data.
// Records come from a free list, so steady traffic does not allocate.
struct CompletionRecord {
    CompletionRecord* next_free = nullptr;
    bool in_use = false;
    transit_am_completion_fn fn = nullptr;
    void* user = nullptr;
    transit_context* self = nullptr;
};

transit::pml::Pool<CompletionRecord>& records() {
    static transit::pml::Pool<CompletionRecord> list;
    return list;
}

transit::AmDestination c_header(transit::Context&, const transit::AmInfo& info, void* arg) {
    auto* h = static_cast<transit_context::CHandler*>(arg);
    transit_am_destination d = h->header(h->self, info.source, info.handler, info.header.data(),
                                         info.header.size(), info.data_length, h->arg);
    CompletionRecord* rec = records().get();
    if (!rec) return {d.buffer, nullptr, nullptr};
    rec->fn = d.completion ? d.completion : h->completion;
    rec->user = d.user_data;
    rec->self = h->self;
    return {d.buffer, nullptr, rec};
}

void c_complete(transit::Context&, transit::Rank source, void* buffer, std::size_t length,
                void* user) {
    auto* rec = static_cast<CompletionRecord*>(user);
    if (!rec) return;
    transit_am_completion_fn fn = rec->fn;
    void* u = rec->user;
    transit_context* self = rec->self;
    records().put(rec);
    if (fn) fn(self, source, buffer, length, u);
}

// The C sink receives NUL-terminated copies of the source and the text.
struct CSink {
    transit_log_fn fn = nullptr;
    void* arg = nullptr;
};

CSink& c_sink() {
    static CSink sink;
    return sink;
}

transit_log_severity to_c(transit::log::Severity s) noexcept {
    switch (s) {
        case transit::log::Severity::error:
            return TRANSIT_LOG_ERROR;
        case transit::log::Severity::warning:
            return TRANSIT_LOG_WARNING;
        case transit::log::Severity::info:
            return TRANSIT_LOG_INFO;
        case transit::log::Severity::verbose:
            return TRANSIT_LOG_VERBOSE;
    }
    return TRANSIT_LOG_INFO;
}

void to_c_sink(const transit::log::Line& line, void* arg) {
    const auto* sink = static_cast<const CSink*>(arg);
    const std::string source(line.source);
    const std::string text(line.text);
    sink->fn(to_c(line.severity), line.verbosity, source.c_str(), text.c_str(), sink->arg);
}

}  // namespace

extern "C" {

const char* transit_status_string(int status) {
    return transit::to_string(static_cast<Status>(status)).data();
}

const char* transit_last_error(void) {
    return transit::last_error().data();  // NUL-terminated
}

void transit_set_log_sink(transit_log_fn fn, void* arg) {
    // Detached first, so no thread reads the C sink while it changes.
    transit::log::set_sink(nullptr, nullptr);
    if (fn == nullptr) return;
    c_sink() = CSink{fn, arg};
    transit::log::set_sink(to_c_sink, &c_sink());
}

int transit_init(int* argc, char*** argv, transit_context** ctx) {
    return guarded([&] {
        *ctx = open_context(argc, argv, {}).release();
        return TRANSIT_SUCCESS;
    });
}

int transit_init_thread(int* argc, char*** argv, int required, int* provided,
                        transit_context** ctx) {
    if (required < TRANSIT_THREAD_SINGLE || required > TRANSIT_THREAD_MULTIPLE)
        return failed(
            TRANSIT_BAD_PARAM,
            fmt::format("transit_init_thread: {} is not a thread level (0..3)", required));
    return guarded([&] {
        *ctx = open_context(argc, argv, static_cast<transit::ThreadLevel>(required)).release();
        if (provided) *provided = transit_query_thread(*ctx);
        return TRANSIT_SUCCESS;
    });
}

int transit_query_thread(const transit_context* ctx) {
    return static_cast<int>(ctx->ctx.thread_level());
}

int transit_finalize(transit_context* ctx) {
    std::unique_ptr<transit_context> owned(ctx);
    return TRANSIT_SUCCESS;
}

uint32_t transit_rank(const transit_context* ctx) {
    return ctx->ctx.rank();
}
uint32_t transit_size(const transit_context* ctx) {
    return ctx->ctx.size();
}
int transit_progress(transit_context* ctx) {
    return ctx->ctx.progress();
}

int transit_progress_timeout(transit_context* ctx, int timeout_ms) {
    const auto t =
        timeout_ms < 0 ? std::chrono::milliseconds::max() : std::chrono::milliseconds(timeout_ms);
    return ctx->ctx.progress(t);
}

int transit_event_fd(const transit_context* ctx) {
    return ctx->ctx.event_fd();
}

int transit_arm(transit_context* ctx) {
    return code(ctx->ctx.arm());
}

int transit_isend(transit_context* ctx, uint32_t dst, uint32_t tag, const void* buf, size_t len,
                  void* user, transit_request** req) {
    return code(ctx->ctx.isend(dst, tag, buf, len, as_req(*req), user));
}

int transit_isendv(transit_context* ctx, uint32_t dst, uint32_t tag, const struct iovec* iov,
                   size_t count, void* user, transit_request** req) {
    return code(ctx->ctx.isendv(dst, tag, {iov, count}, as_req(*req), user));
}

int transit_irecv(transit_context* ctx, uint32_t src, uint32_t tag, void* buf, size_t len,
                  void* user, transit_request** req) {
    return code(ctx->ctx.irecv(src, tag, buf, len, as_req(*req), user));
}

int transit_irecvv(transit_context* ctx, uint32_t src, uint32_t tag, const struct iovec* iov,
                   size_t count, void* user, transit_request** req) {
    return code(ctx->ctx.irecvv(src, tag, {iov, count}, as_req(*req), user));
}

void* transit_request_user(const transit_request* req) {
    return reinterpret_cast<const transit::Request*>(req)->user;
}

int transit_test(transit_context* ctx, transit_request** req, int* done, transit_status* status) {
    bool d = false;
    transit::RequestStatus st;
    Status s = ctx->ctx.test(as_req(*req), d, &st);
    *done = d;
    if (d) to_c(st, status);
    return code(s);
}

int transit_wait(transit_context* ctx, transit_request** req, transit_status* status) {
    transit::RequestStatus st;
    Status s = ctx->ctx.wait(as_req(*req), &st);
    to_c(st, status);
    return code(s);
}

int transit_wait_timeout(transit_context* ctx, transit_request** req, int timeout_ms,
                         transit_status* status) {
    transit::RequestStatus st;
    const auto t =
        timeout_ms < 0 ? std::chrono::milliseconds::max() : std::chrono::milliseconds(timeout_ms);
    Status s = ctx->ctx.wait(as_req(*req), t, &st);
    if (s != Status::timeout) to_c(st, status);
    return code(s);
}

int transit_wait_any(transit_context* ctx, transit_request** reqs, size_t count, size_t* index,
                     transit_status* status) {
    transit::RequestStatus st;
    Status s = ctx->ctx.wait_any({reinterpret_cast<transit::Request**>(reqs), count}, *index, &st);
    to_c(st, status);
    return code(s);
}

int transit_wait_all(transit_context* ctx, transit_request** reqs, size_t count,
                     transit_status* statuses) {
    Status first = Status::success;
    for (size_t i = 0; i < count; ++i) {
        if (!reqs[i]) continue;
        int s = transit_wait(ctx, &reqs[i], statuses ? &statuses[i] : nullptr);
        if (s < 0 && transit::ok(first)) first = static_cast<Status>(s);
    }
    return code(first);
}

int transit_cancel(transit_context* ctx, transit_request* req) {
    return code(ctx->ctx.cancel(reinterpret_cast<transit::Request*>(req)));
}

int transit_probe(transit_context* ctx, uint32_t src, uint32_t tag, transit_status* status) {
    transit::RequestStatus st;
    Status s = ctx->ctx.probe(src, tag, st);
    to_c(st, status);
    return code(s);
}

int transit_iprobe(transit_context* ctx, uint32_t src, uint32_t tag, int* found,
                   transit_status* status) {
    transit::RequestStatus st;
    bool f = false;
    Status s = ctx->ctx.iprobe(src, tag, f, st);
    *found = f;
    if (f) to_c(st, status);
    return code(s);
}

int transit_send(transit_context* ctx, uint32_t dst, uint32_t tag, const void* buf, size_t len) {
    return code(ctx->ctx.send(dst, tag, buf, len));
}

int transit_recv(transit_context* ctx, uint32_t src, uint32_t tag, void* buf, size_t len,
                 transit_status* status) {
    transit::RequestStatus st;
    Status s = ctx->ctx.recv(src, tag, buf, len, &st);
    to_c(st, status);
    return code(s);
}

transit_counter* transit_counter_create(void) {
    return new (std::nothrow) transit_counter;  // C callers own it through destroy
}

void transit_counter_destroy(transit_counter* c) {
    std::unique_ptr<transit_counter> owned(c);
}

transit_counter_ref transit_counter_ref_of(transit_context* ctx, transit_counter* c) {
    return ctx->ctx.counter_ref(c->c);
}

int transit_counter_ref_release(transit_context* ctx, transit_counter_ref ref) {
    return code(ctx->ctx.release_counter_ref(ref));
}

uint64_t transit_counter_get(transit_context* ctx, const transit_counter* c) {
    return ctx->ctx.counter_get(c->c);
}

uint64_t transit_counter_lost(transit_context*, const transit_counter* c) {
    return c->c.lost();
}

int transit_counter_wait(transit_context* ctx, const transit_counter* c, uint64_t value) {
    return code(ctx->ctx.counter_wait(c->c, value));
}

int transit_register_am_handler(transit_context* ctx, uint32_t id, transit_am_header_fn header,
                                transit_am_completion_fn completion, void* handler_arg) {
    if (id >= ctx->handlers.size() || !header)
        return failed(TRANSIT_BAD_PARAM,
                      fmt::format("transit_register_am_handler: {}",
                                  !header ? "no header handler"
                                          : fmt::format("handler id {} is not below {}", id,
                                                        ctx->handlers.size())));
    auto& h = ctx->handlers[id];
    if (h.header)
        return failed(TRANSIT_EXISTS,
                      fmt::format("transit_register_am_handler: handler id {} is taken", id));
    h = {header, completion, handler_arg, ctx};
    return guarded(
        [&] { return code(ctx->ctx.register_am_handler(id, c_header, c_complete, &h)); });
}

int transit_am_send(transit_context* ctx, uint32_t dst, uint32_t id, const void* header,
                    size_t header_length, const void* data, size_t len, transit_counter* origin,
                    transit_counter_ref target, transit_counter* completion) {
    transit::AmCounters c{origin ? &origin->c : nullptr, target,
                          completion ? &completion->c : nullptr};
    return code(ctx->ctx.am_send(dst, id, {static_cast<const std::byte*>(header), header_length},
                                 data, len, c));
}

int transit_register_memory(transit_context* ctx, void* base, size_t size,
                            transit_memory_region** region) {
    return guarded([&] {
        return code(ctx->ctx.register_memory(base, size,
                                             reinterpret_cast<transit::MemoryRegion*&>(*region)));
    });
}

int transit_register_memory_scoped(transit_context* ctx, void* base, size_t size,
                                   enum transit_region_scope scope, const uint32_t* peers,
                                   size_t count, transit_memory_region** region) {
    using Kind = transit::RegionScope::Kind;
    if (scope != TRANSIT_SCOPE_EVERYONE && scope != TRANSIT_SCOPE_JOB &&
        scope != TRANSIT_SCOPE_PEERS)
        return failed(TRANSIT_BAD_PARAM, fmt::format("transit_register_memory_scoped: {} is not a "
                                                     "transit_region_scope",
                                                     static_cast<int>(scope)));
    if (scope == TRANSIT_SCOPE_PEERS && count != 0 && peers == nullptr)
        return failed(TRANSIT_BAD_PARAM,
                      "transit_register_memory_scoped: TRANSIT_SCOPE_PEERS with a null list");
    static_assert(sizeof(transit::Rank) == sizeof(uint32_t));
    const transit::RegionScope s{scope == TRANSIT_SCOPE_EVERYONE ? Kind::everyone
                                 : scope == TRANSIT_SCOPE_JOB    ? Kind::job
                                                                 : Kind::peers,
                                 scope == TRANSIT_SCOPE_PEERS
                                     ? std::span<const transit::Rank>(peers, count)
                                     : std::span<const transit::Rank>{}};
    return guarded([&] {
        return code(ctx->ctx.register_memory(
            base, size, reinterpret_cast<transit::MemoryRegion*&>(*region), s));
    });
}

int transit_deregister_memory(transit_context* ctx, transit_memory_region** region) {
    return guarded([&] {
        return code(ctx->ctx.deregister_memory(reinterpret_cast<transit::MemoryRegion*&>(*region)));
    });
}

int transit_pack_key(transit_context* ctx, const transit_memory_region* region, void* buf,
                     size_t capacity, size_t* length) {
    return guarded([&] {
        auto bytes = ctx->ctx.pack_key(reinterpret_cast<const transit::MemoryRegion*>(region));
        *length = bytes.size();
        if (bytes.size() > capacity || !buf) {
            // Also how a caller asks for the size: reported, not logged.
            transit::pml::set_last_error(
                fmt::format("transit_pack_key: the key needs {} bytes, the buffer has {}",
                            bytes.size(), buf ? capacity : 0));
            return TRANSIT_OUT_OF_RESOURCE;
        }
        std::memcpy(buf, bytes.data(), bytes.size());
        return TRANSIT_SUCCESS;
    });
}

int transit_unpack_key(transit_context* ctx, const void* packed, size_t length,
                       transit_remote_key** key) {
    return guarded([&] {
        return code(ctx->ctx.unpack_key({static_cast<const std::byte*>(packed), length},
                                        reinterpret_cast<transit::RemoteKey*&>(*key)));
    });
}

void transit_release_key(transit_context* ctx, transit_remote_key** key) {
    ctx->ctx.release_key(reinterpret_cast<transit::RemoteKey*&>(*key));
}

static const transit::RemoteKey* cxx_key(const transit_remote_key* k) {
    return reinterpret_cast<const transit::RemoteKey*>(k);
}

int transit_put(transit_context* ctx, uint32_t dst, const void* src, size_t len,
                const transit_remote_key* key, uint64_t offset) {
    return code(ctx->ctx.put(dst, src, len, cxx_key(key), offset));
}

int transit_get(transit_context* ctx, uint32_t dst, void* dst_buf, size_t len,
                const transit_remote_key* key, uint64_t offset) {
    return code(ctx->ctx.get(dst, dst_buf, len, cxx_key(key), offset));
}

int transit_atomic(transit_context* ctx, uint32_t dst, transit_atomic_op op,
                   transit_atomic_width width, const transit_remote_key* key, uint64_t offset,
                   uint64_t operand, uint64_t* fetched) {
    if (op < TRANSIT_ATOMIC_ADD || op > TRANSIT_ATOMIC_MAX)
        return failed(
            TRANSIT_BAD_PARAM,
            fmt::format("transit_atomic: {} is not a transit_atomic_op", static_cast<int>(op)));
    return code(ctx->ctx.atomic(
        dst, static_cast<transit::AtomicOp>(op),
        width == TRANSIT_ATOMIC_32 ? transit::AtomicWidth::bits32 : transit::AtomicWidth::bits64,
        cxx_key(key), offset, operand, fetched));
}

int transit_cswap(transit_context* ctx, uint32_t dst, transit_atomic_width width,
                  const transit_remote_key* key, uint64_t offset, uint64_t compare, uint64_t value,
                  uint64_t* fetched) {
    return code(ctx->ctx.cswap(
        dst,
        width == TRANSIT_ATOMIC_32 ? transit::AtomicWidth::bits32 : transit::AtomicWidth::bits64,
        cxx_key(key), offset, compare, value, fetched));
}

int transit_flush(transit_context* ctx, uint32_t dst) {
    return code(ctx->ctx.flush(dst));
}
int transit_flush_all(transit_context* ctx) {
    return code(ctx->ctx.flush_all());
}
int transit_fence(transit_context* ctx) {
    return code(ctx->ctx.fence());
}
int transit_barrier(transit_context* ctx) {
    return code(ctx->ctx.barrier());
}

int transit_listen(transit_context* ctx, char* buf, size_t size, size_t* needed) {
    return guarded(
        [&] { return copy_out(ctx->ctx.listen(), buf, size, needed, "transit_listen"); });
}
int transit_connect(transit_context* ctx, const char* address, uint32_t* peer) {
    if (!address || !peer) return failed(TRANSIT_BAD_PARAM, "transit_connect: null argument");
    return code(ctx->ctx.connect(address, *peer));
}
int transit_disconnect(transit_context* ctx, uint32_t peer) {
    return code(ctx->ctx.disconnect(peer));
}
int transit_disconnect_abortive(transit_context* ctx, uint32_t peer) {
    return code(ctx->ctx.disconnect(peer, transit::Disconnect::abortive));
}
int transit_publish(transit_context* ctx, const char* name) {
    if (!name) return failed(TRANSIT_BAD_PARAM, "transit_publish: null name");
    return guarded([&] { return code(ctx->ctx.publish(name)); });
}
int transit_lookup(transit_context* ctx, const char* name, uint32_t wait_ms, char* buf, size_t size,
                   size_t* needed) {
    if (!name) return failed(TRANSIT_BAD_PARAM, "transit_lookup: null name");
    return guarded([&] {
        std::string address;
        const Status s = ctx->ctx.lookup(name, address, std::chrono::milliseconds(wait_ms));
        if (!transit::ok(s)) return code(s);
        return copy_out(address, buf, size, needed, "transit_lookup");
    });
}
int transit_unpublish(transit_context* ctx, const char* name) {
    if (!name) return failed(TRANSIT_BAD_PARAM, "transit_unpublish: null name");
    return guarded([&] { return code(ctx->ctx.unpublish(name)); });
}
static_assert(TRANSIT_PEER_EVENT_JOINED == static_cast<int>(transit::PeerEventKind::joined) &&
              TRANSIT_PEER_EVENT_DEPARTED == static_cast<int>(transit::PeerEventKind::departed) &&
              TRANSIT_PEER_EVENT_FAILED == static_cast<int>(transit::PeerEventKind::failed));
void transit_on_peer_event(transit_context* ctx, transit_peer_event_fn fn, void* user) {
    ctx->peer_event = fn;
    ctx->peer_event_user = user;
    if (!fn) return ctx->ctx.on_peer_event(nullptr, nullptr);
    ctx->ctx.on_peer_event(
        [](transit::Context&, const transit::PeerEvent& e, void* self) {
            auto* c = static_cast<transit_context*>(self);
            if (c->peer_event)
                c->peer_event(c, e.peer, static_cast<transit_peer_event_kind>(e.kind),
                              c->peer_event_user);
        },
        ctx);
}

void* transit_mem_alloc(transit_context* ctx, size_t size) {
    return ctx->ctx.mem_alloc(size);
}
void transit_mem_free(transit_context* ctx, void* ptr) {
    ctx->ctx.mem_free(ptr);
}

}  // extern "C"
