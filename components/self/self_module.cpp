// The self module's operations.  Nothing is queued: a send is a direct call of
// the receive callback, put/get are memcpy, atomics are CPU atomics, so every
// operation returns Status::completed (or an error) and never calls back later.
#include "self_module.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "transit/btl/util/atomic_width.hpp"
#include "transit/btl/util/descriptor_setup.hpp"
#include "transit/log.hpp"

namespace transit::self {
namespace {

// Checks [address, address + size) against a (possibly copied, so possibly
// unaligned) handle: a put or get outside a live registration is refused here
// instead of corrupting or reading memory the owner never exposed.
Status check_remote(std::span<const btl::RegionSlot> table, const btl::RegistrationHandle* handle,
                    std::uint64_t address, std::size_t size, std::uint32_t access) noexcept {
    if (handle == nullptr) [[unlikely]]
        return Status::bad_param;
    return btl::region_permits(table, handle, address, size, access);
}

Status check_atomic(std::span<const btl::RegionSlot> table, const btl::RegistrationHandle* handle,
                    std::uint64_t address, int flags) noexcept {
    const std::size_t width = btl::util::atomic_width(flags);
    if (address % width != 0) [[unlikely]]
        return Status::bad_param;  // a misaligned atomic is not atomic
    return check_remote(table, handle, address, width, btl::reg_flags::remote_atomic);
}

void store_result(void* local_address, std::uint64_t value, int flags) noexcept {
    if (flags & btl::atomic_flags::bits32) {
        const auto v32 = static_cast<std::uint32_t>(value);
        std::memcpy(local_address, &v32, sizeof v32);
    } else {
        std::memcpy(local_address, &value, sizeof value);
    }
}

void* to_pointer(std::uint64_t address) noexcept {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
}

}  // namespace

SelfModule::SelfModule(btl::Component& component, const SelfConfig& config, Rank own_rank,
                       btl::AmTable& am_table)
    : btl::Module(component), endpoint_(own_rank), am_table_(am_table) {
    attr_.eager_limit = config.eager_limit;
    attr_.rndv_eager_limit = config.eager_limit;
    attr_.max_send_size = config.max_send_size;
    attr_.exclusivity = config.exclusivity;
    attr_.latency = 0;
    attr_.bandwidth = 100000;
    attr_.flags = btl::flags::send | btl::flags::rdma | btl::flags::send_inplace |
                  btl::flags::atomic_ops | btl::flags::atomic_fops | btl::flags::rdma_flush |
                  btl::flags::rdma_without_target | btl::flags::reports_peer_loss;
    // Safe for concurrent calls when asked to be: nothing is queued, a send runs
    // the receive callback on the caller's thread, put/get touch only the
    // caller's buffers and the target's, atomics are CPU atomics and the
    // registration table is a sequence lock read without a lock.  What is left
    // shared, the two fragment pools, then takes a lock; for one thread it does
    // not, and the flag stays off.
    if (config.multi_threaded) attr_.flags |= btl::flags::thread_safe;
    attr_.reach = btl::reach::own_process;
    namespace as = btl::atomic_support;
    attr_.atomic_flags = as::add | as::and_ | as::or_ | as::xor_ | as::land | as::lor | as::lxor |
                         as::swap | as::min | as::max | as::bits32 | as::cswap | as::global;
    attr_.registration_handle_size = sizeof(btl::RegionKey);
    slots_ = std::make_unique<btl::RegionSlot[]>(registration_slots);
    registrations_ = btl::RegionTable(slots_.get(), registration_slots);
    eager_.setup(config.free_list_max, config.eager_limit, config.multi_threaded);
    large_.setup(config.free_list_max, config.max_send_size, config.multi_threaded);
}

Status SelfModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                             btl::Reachability& reachable) {
    if (endpoints.size() < peers.size() || reachable.size() < peers.size())
        return Status::bad_param;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        if (peers[i] != endpoint_.peer()) continue;
        endpoints[i] = &endpoint_;
        reachable.set(i);
    }
    return Status::success;
}

Status SelfModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    if (endpoints.size() < peers.size()) return Status::bad_param;
    // The one endpoint lives as long as the module; forgetting it is enough.
    for (std::size_t i = 0; i < peers.size(); ++i)
        if (endpoints[i] == &endpoint_) endpoints[i] = nullptr;
    return Status::success;
}

SelfFrag* SelfModule::take(std::size_t bytes) noexcept {
    return bytes <= eager_.capacity() ? eager_.get() : large_.get();
}

btl::Descriptor* SelfModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                   std::uint32_t flags) noexcept {
    if (!valid_endpoint(endpoint)) [[unlikely]]
        return nullptr;
    SelfFrag* f = take(size);
    if (f == nullptr) return nullptr;
    f->segs[0] = {f->buffer, std::min(size, f->capacity)};
    btl::util::hand_out(*f, f->segs, 1, flags, order);
    return f;
}

Status SelfModule::free(btl::Descriptor* descriptor) noexcept {
    if (descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    auto* f = static_cast<SelfFrag*>(descriptor);
    return f->pool->put(f) ? Status::success : Status::bad_param;
}

btl::Descriptor* SelfModule::prepare_inplace(btl::Convertor& convertor, std::uint8_t order,
                                             std::size_t reserve, std::size_t size,
                                             std::uint32_t flags) noexcept {
    const void* data = convertor.contiguous_at(size);
    SelfFrag* f = eager_.get();  // holds only the reserved header
    if (f == nullptr) return nullptr;
    f->segs[0] = {f->buffer, reserve};
    f->segs[1] = {const_cast<void*>(data), size};
    btl::util::hand_out(*f, f->segs, 2, flags, order);
    convertor.skip(size);
    return f;
}

btl::Descriptor* SelfModule::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                         std::uint8_t order, std::size_t reserve, std::size_t& size,
                                         std::uint32_t flags) noexcept {
    if (!valid_endpoint(endpoint) || reserve > large_.capacity()) [[unlikely]]
        return nullptr;
    size = std::min(size, convertor.remaining());
    // Above the eager limit a contiguous source is not copied: the receiver reads
    // the user's buffer directly, which is alive until send() returns.
    if (size > 0 && reserve + size > attr_.eager_limit && reserve <= eager_.capacity() &&
        convertor.contiguous_at(size) != nullptr)
        return prepare_inplace(convertor, order, reserve, size, flags);
    SelfFrag* f = take(reserve + size);
    if (f == nullptr) return nullptr;
    size = convertor.pack(f->buffer + reserve, std::min(size, f->capacity - reserve));
    f->segs[0] = {f->buffer, reserve + size};
    btl::util::hand_out(*f, f->segs, 1, flags, order);
    return f;
}

Status SelfModule::deliver(btl::Endpoint* endpoint, const btl::Segment* segments, std::size_t count,
                           btl::Tag tag) noexcept {
    const btl::ReceiveDescriptor received{endpoint, segments, count, tag};
    // No callback for the tag: nothing was delivered, the sender keeps the data.
    return am_table_.dispatch(this, received) ? Status::completed : Status::protocol_error;
}

Status SelfModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                        btl::Tag tag) noexcept {
    if (!valid_endpoint(endpoint) || descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    // Read before the callbacks: the completion callback may free the descriptor.
    const std::uint32_t des_flags = descriptor->flags;
    const Status s = deliver(endpoint, descriptor->segments, descriptor->segment_count, tag);
    if (s != Status::completed) [[unlikely]]
        return s;
    if ((des_flags & btl::des_flags::send_always_callback) && descriptor->cbfunc != nullptr)
        descriptor->cbfunc(this, endpoint, descriptor, Status::success);
    if (des_flags & btl::des_flags::btl_ownership) free(descriptor);
    return Status::completed;
}

Status SelfModule::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                         std::size_t header_size, std::size_t payload_size, std::uint8_t,
                         std::uint32_t, btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    // Self never needs to hand back a descriptor: it delivers whenever it can.
    if (descriptor != nullptr) *descriptor = nullptr;
    if (!valid_endpoint(endpoint) ||
        !btl::sendi_arguments_valid(convertor, header, header_size, payload_size)) [[unlikely]]
        return Status::bad_param;
    const void* payload = payload_size > 0 ? convertor->contiguous_at(payload_size) : nullptr;
    if (payload_size == 0 || payload != nullptr) {
        const btl::Segment segs[2] = {{const_cast<void*>(header), header_size},
                                      {const_cast<void*>(payload), payload_size}};
        const Status s = deliver(endpoint, segs, payload_size > 0 ? 2 : 1, tag);
        if (s == Status::completed && payload_size > 0) convertor->skip(payload_size);
        return s;
    }
    // A scattered payload is gathered into a fragment, returned right after the
    // upcall, so a callback that sends again gets a fragment of its own.
    SelfFrag* f = take(header_size + payload_size);
    if (f == nullptr) return Status::out_of_resource;
    if (header_size + payload_size > f->capacity) {
        f->pool->put(f);
        return Status::out_of_resource;  // too big to gather: use prepare_src + send
    }
    const std::size_t start = convertor->position();
    if (header_size > 0) std::memcpy(f->buffer, header, header_size);
    convertor->pack(f->buffer + header_size, payload_size);
    const btl::Segment segs[2] = {{f->buffer, header_size},
                                  {f->buffer + header_size, payload_size}};
    const Status s = deliver(endpoint, segs, 2, tag);
    f->pool->put(f);
    if (s != Status::completed) convertor->seek(start);
    return s;
}

Status SelfModule::put(const btl::RdmaRequest& req) noexcept {
    if (!valid_endpoint(req.endpoint) || (req.size > 0 && req.local == nullptr)) [[unlikely]]
        return Status::bad_param;
    const Status s = check_remote(table(), req.remote_handle, req.remote, req.size,
                                  btl::reg_flags::remote_write);
    if (s != Status::success) [[unlikely]]
        return s;
    if (req.size > 0) std::memmove(to_pointer(req.remote), req.local, req.size);
    return Status::completed;
}

Status SelfModule::get(const btl::RdmaRequest& req) noexcept {
    if (!valid_endpoint(req.endpoint) || (req.size > 0 && req.local == nullptr)) [[unlikely]]
        return Status::bad_param;
    const Status s =
        check_remote(table(), req.remote_handle, req.remote, req.size, btl::reg_flags::remote_read);
    if (s != Status::success) [[unlikely]]
        return s;
    if (req.size > 0) std::memmove(req.local, to_pointer(req.remote), req.size);
    return Status::completed;
}

Status SelfModule::atomic_op(const btl::AtomicRequest& req) noexcept {
    if (!valid_endpoint(req.endpoint) || !btl::is_atomic_op(req.op)) [[unlikely]]
        return Status::bad_param;
    const Status s = check_atomic(table(), req.remote_handle, req.remote, req.flags);
    if (s != Status::success) [[unlikely]]
        return s;
    btl::apply_atomic(to_pointer(req.remote), req.op, req.operand, req.flags);
    return Status::completed;
}

Status SelfModule::atomic_fop(const btl::AtomicRequest& req) noexcept {
    if (!valid_endpoint(req.endpoint) || !btl::is_atomic_op(req.op) || req.local == nullptr)
        [[unlikely]]
        return Status::bad_param;
    const Status s = check_atomic(table(), req.remote_handle, req.remote, req.flags);
    if (s != Status::success) [[unlikely]]
        return s;
    store_result(req.local,
                 btl::apply_atomic(to_pointer(req.remote), req.op, req.operand, req.flags),
                 req.flags);
    return Status::completed;
}

Status SelfModule::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    if (!valid_endpoint(req.endpoint) || req.local == nullptr) [[unlikely]]
        return Status::bad_param;
    const Status s = check_atomic(table(), req.remote_handle, req.remote, req.flags);
    if (s != Status::success) [[unlikely]]
        return s;
    store_result(req.local,
                 btl::apply_cswap(to_pointer(req.remote), req.compare, req.operand, req.flags),
                 req.flags);
    return Status::completed;
}

btl::RegistrationHandle* SelfModule::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                  std::uint32_t flags) {
    if (base == nullptr && size > 0) return nullptr;
    std::lock_guard guard(registrations_mutex_);
    btl::RegistrationHandle* h = registrations_.add(base, size, flags);
    if (h != nullptr) ++registered_;
    return h;
}

Status SelfModule::deregister_mem(btl::RegistrationHandle* handle) {
    std::lock_guard guard(registrations_mutex_);
    const Status s = registrations_.remove(handle);
    if (ok(s)) --registered_;
    return s;
}

// Every operation completed before it returned; there is nothing to wait for.
Status SelfModule::flush(btl::Endpoint*) {
    return Status::success;
}

void SelfModule::dump(btl::Endpoint*, int verbosity) {
    std::lock_guard guard(registrations_mutex_);
    log::write("btl:self",
               fmt::format("rank {}: eager fragments {}/{} free ({} B), large {}/{} free ({} B), "
                           "{} registrations",
                           endpoint_.peer(), eager_.available(), eager_.size(), eager_.capacity(),
                           large_.available(), large_.size(), large_.capacity(), registered_));
    (void)verbosity;
}

Status SelfModule::finalize() {
    // A fragment still out at finalize is the caller's leak; say so once.
    if (eager_.available() != eager_.size() || large_.available() != large_.size())
        log::warn("btl self: {} eager and {} large fragments not returned at finalize",
                  eager_.size() - eager_.available(), large_.size() - large_.available());
    return Status::success;
}

}  // namespace transit::self
