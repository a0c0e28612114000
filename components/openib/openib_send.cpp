// The openib data path: descriptors, sends, RDMA and atomics.  Nothing here
// allocates, throws or locks; a resource that is short (credit, send slot,
// completion-queue room) parks the work on the endpoint's pending queue, and
// the queue drains from progress in the order the work was submitted.
#include <cerrno>
#include <chrono>
#include <cstring>

#include "openib_module.hpp"
#include "transit/btl/util/atomic_width.hpp"

namespace transit::openib {

// --- descriptors ----------------------------------------------------------------------

btl::Descriptor* Module::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                               std::uint32_t flags) noexcept {
    if (size > config_.max_send_size) size = config_.max_send_size;
    SendFrag* f = frags_.take_send();
    if (!f) return nullptr;
    f->endpoint = static_cast<Endpoint*>(endpoint);
    f->order = order;
    f->flags = flags;
    f->segment.addr = f->buffer + wire::FragHeader::size;
    f->segment.len = size;
    return f;
}

Status Module::free(btl::Descriptor* descriptor) noexcept {
    auto* f = static_cast<SendFrag*>(descriptor);
    if (!f || f->kind != FragKind::send || !f->in_use) return Status::bad_param;
    frags_.put(f);
    return Status::success;
}

btl::Descriptor* Module::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                     std::uint8_t order, std::size_t reserve, std::size_t& size,
                                     std::uint32_t flags) noexcept {
    if (reserve > config_.max_send_size) return nullptr;
    std::size_t room = config_.max_send_size - reserve;
    if (size > room) size = room;
    SendFrag* f = static_cast<SendFrag*>(alloc(endpoint, order, reserve + size, flags));
    if (!f) return nullptr;
    // Always a copy: the fragment buffer is registered, the user's may not be.
    size = convertor.pack(f->buffer + wire::FragHeader::size + reserve, size);
    f->segment.len = reserve + size;
    return f;
}

// --- sends ---------------------------------------------------------------------------

Status Module::submit(Endpoint& ep, Frag* f) noexcept {
    f->endpoint = &ep;
    if (ep.failed()) return Status::unreachable;
    if (ep.connection().state() == ConnState::idle) {
        ep.connection().start(now_ms());
        if (ep.failed()) return Status::unreachable;
        update_progress();
    }
    if (ep.usable() && !ep.has_pending() && send_queue_.post(ep, f)) return Status::success;
    if (ep.failed()) return Status::unreachable;  // posting failed the endpoint
    ep.enqueue(f);
    endpoints_.attention(ep);
    return Status::success;
}

Status Module::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor, btl::Tag tag) noexcept {
    auto* f = static_cast<SendFrag*>(descriptor);
    if (!endpoint || !f || f->kind != FragKind::send || !f->in_use) return Status::bad_param;
    f->type = wire::FragType::data;
    f->tag = tag;
    return submit(*static_cast<Endpoint*>(endpoint), f);
}

Status Module::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                     std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                     std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    auto* ep = static_cast<Endpoint*>(endpoint);
    if (!ep) return Status::bad_param;
    const std::size_t total = header_size + payload_size;
    if (total > config_.max_send_size) return Status::bad_param;
    auto fallback = [&] {
        if (ep->connection().state() == ConnState::idle) {
            ep->connection().start(now_ms());
            update_progress();
        }
        if (ep->failed()) return Status::unreachable;
        if (descriptor) *descriptor = alloc(ep, order, total, flags);
        return Status::out_of_resource;
    };
    if (!ep->usable() || ep->has_pending() || ep->credits.send_credits() == 0) return fallback();
    SendFrag* f = frags_.take_send();
    if (!f) return fallback();
    std::byte* p = f->buffer + wire::FragHeader::size;
    if (header_size) std::memcpy(p, header, header_size);
    if (payload_size) {
        if (!convertor) {
            frags_.put(f);
            return Status::bad_param;
        }
        std::size_t got = convertor->pack(p + header_size, payload_size);
        if (got != payload_size) {
            convertor->seek(convertor->position() - got);
            frags_.put(f);
            return Status::bad_param;
        }
    }
    f->endpoint = ep;
    f->order = order;
    f->flags = flags | btl::des_flags::btl_ownership;
    f->segment.addr = p;
    f->segment.len = total;
    f->type = wire::FragType::data;
    f->tag = tag;
    f->inline_done = true;
    if (send_queue_.post(*ep, f)) return Status::completed;
    // Short of a send slot or CQ room: undo, the caller keeps its data.
    if (convertor && payload_size) convertor->seek(convertor->position() - payload_size);
    frags_.put(f);
    return fallback();
}

// --- RDMA operations (OneSided, RemoteAtomics) --------------------------------------

Status Module::start_rdma(btl::Endpoint* endpoint, RdmaFrag* f) noexcept {
    auto* ep = static_cast<Endpoint*>(endpoint);
    ++ep->rdma_in_flight;
    Status s = submit(*ep, f);
    if (!ok(s)) {
        --ep->rdma_in_flight;
        frags_.put(f);
    }
    return s;
}

}  // namespace transit::openib
