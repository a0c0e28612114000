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

// --- pools ---------------------------------------------------------------------------

SendFrag* Module::take_send_frag() noexcept {
    SendFrag* f = send_frags_.get();
    if (!f) return nullptr;
    f->next = nullptr;
    f->inline_done = false;
    f->flags = 0;
    f->cbfunc = nullptr;
    f->cbdata = nullptr;
    f->context = nullptr;
    f->endpoint = nullptr;
    f->type = wire::FragType::data;
    return f;
}

void Module::return_send_frag(SendFrag* f) noexcept {
    send_frags_.put(f);
}

RdmaFrag* Module::take_rdma_frag() noexcept {
    RdmaFrag* f = rdma_frags_.get();
    if (!f) return nullptr;
    f->next = nullptr;
    ++f->generation;
    return f;
}

RdmaFrag* Module::rdma_frag(std::uint64_t request_id) noexcept {
    const auto index = static_cast<std::uint32_t>(request_id);
    const auto generation = static_cast<std::uint32_t>(request_id >> 32);
    RdmaFrag* f = index < rdma_frags_.size() ? &rdma_frags_.at(index) : nullptr;
    if (!f || !f->in_use || f->generation != generation) return nullptr;
    return f;
}

void Module::return_rdma_frag(RdmaFrag* f) noexcept {
    rdma_frags_.put(f);
}

// --- descriptors ----------------------------------------------------------------------

btl::Descriptor* Module::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                               std::uint32_t flags) noexcept {
    if (size > config_.max_send_size) size = config_.max_send_size;
    SendFrag* f = take_send_frag();
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
    return_send_frag(f);
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
    if (ep.usable() && !ep.has_pending() && try_post(ep, f)) return Status::success;
    if (ep.failed()) return Status::unreachable;  // posting failed the endpoint
    ep.enqueue(f);
    attention(ep);
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
    SendFrag* f = take_send_frag();
    if (!f) return fallback();
    std::byte* p = f->buffer + wire::FragHeader::size;
    if (header_size) std::memcpy(p, header, header_size);
    if (payload_size) {
        if (!convertor) {
            return_send_frag(f);
            return Status::bad_param;
        }
        std::size_t got = convertor->pack(p + header_size, payload_size);
        if (got != payload_size) {
            convertor->seek(convertor->position() - got);
            return_send_frag(f);
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
    if (try_post(*ep, f)) return Status::completed;
    // Short of a send slot or CQ room: undo, the caller keeps its data.
    if (convertor && payload_size) convertor->seek(convertor->position() - payload_size);
    return_send_frag(f);
    return fallback();
}

// --- RDMA operations (OneSided, RemoteAtomics)
// --------------------------------------------------------------------

Status Module::start_rdma(btl::Endpoint* endpoint, RdmaFrag* f) noexcept {
    auto* ep = static_cast<Endpoint*>(endpoint);
    ++ep->rdma_in_flight;
    Status s = submit(*ep, f);
    if (!ok(s)) {
        --ep->rdma_in_flight;
        return_rdma_frag(f);
    }
    return s;
}

// --- posting -------------------------------------------------------------------------

bool Module::reserve_send_wr(Endpoint& ep) noexcept {
    if (send_cq_free_ == 0) return false;
    if (!ep.send_slots.take()) return false;
    --send_cq_free_;
    ++ep.posted;
    return true;
}

void Module::unreserve_send_wr(Endpoint& ep) noexcept {
    ep.send_slots.give();
    ++send_cq_free_;
    --ep.posted;
}

bool Module::try_post(Endpoint& ep, Frag* f) noexcept {
    if (f->kind == FragKind::send) return post_send_frag(ep, static_cast<SendFrag*>(f));
    return post_rdma_frag(ep, static_cast<RdmaFrag*>(f));
}

bool Module::post_send_frag(Endpoint& ep, SendFrag* f) noexcept {
    if (!ep.credits.take_data_credit()) return false;
    if (!reserve_send_wr(ep)) {
        ep.credits.untake_data_credit();
        return false;
    }
    const auto pb = ep.credits.take_piggyback();
    wire::FragHeader h{f->type, f->tag,
                       pb.returns_control ? wire::frag_flags::returns_control : std::uint8_t{0},
                       pb.credits};
    wire::encode(h, f->buffer);
    const auto len = static_cast<std::uint32_t>(wire::FragHeader::size + f->segment.len);
    ibv_sge sge{reinterpret_cast<std::uint64_t>(f->buffer), len, f->lkey};
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<std::uint64_t>(static_cast<Frag*>(f));
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (len <= ep.max_inline) wr.send_flags |= IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(ep.qp(), &wr, &bad)) {
        unreserve_send_wr(ep);
        ep.credits.untake_data_credit();
        ep.credits.restore_piggyback(pb);
        out_.verbose(1, "{}: ibv_post_send to peer {} failed: {}", name(), ep.peer(),
                     std::strerror(rc));
        ep.connection().fail("posting a send failed");
        return false;
    }
    return true;
}

bool Module::post_rdma_frag(Endpoint& ep, RdmaFrag* f) noexcept {
    if (f->op == RdmaOp::emulated_atomic) {
        // A request fragment to the target, which answers with the old value.
        SendFrag* s = take_send_frag();
        if (!s) return false;
        wire::AtomicRequest r;
        r.request_id = (static_cast<std::uint64_t>(f->generation) << 32) | f->index;
        r.remote_address = f->remote_address;
        r.operand = f->operand;
        r.compare = f->compare;
        r.rkey = f->rkey;
        r.op = static_cast<std::uint16_t>(f->atomic);
        r.kind = f->atomic_kind;
        r.bits32 = f->bits32 ? 1 : 0;
        wire::encode(r, s->buffer + wire::FragHeader::size);
        s->segment.addr = s->buffer + wire::FragHeader::size;
        s->segment.len = wire::AtomicRequest::size;
        s->type = wire::FragType::atomic_request;
        s->tag = 0;
        s->endpoint = &ep;
        s->flags = btl::des_flags::btl_ownership;
        s->inline_done = true;
        if (!post_send_frag(ep, s)) {
            return_send_frag(s);
            return false;
        }
        return true;  // completes when the reply arrives
    }
    if (!reserve_send_wr(ep)) return false;
    ibv_sge sge{reinterpret_cast<std::uint64_t>(f->local_address),
                static_cast<std::uint32_t>(f->size), f->lkey};
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<std::uint64_t>(static_cast<Frag*>(f));
    wr.sg_list = &sge;
    wr.num_sge = f->size ? 1 : 0;
    wr.send_flags = IBV_SEND_SIGNALED;
    switch (f->op) {
        case RdmaOp::put:
            wr.opcode = IBV_WR_RDMA_WRITE;
            wr.wr.rdma = {f->remote_address, f->rkey};
            break;
        case RdmaOp::get:
            wr.opcode = IBV_WR_RDMA_READ;
            wr.wr.rdma = {f->remote_address, f->rkey};
            break;
        case RdmaOp::hw_fetch_add:
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.wr.atomic = {f->remote_address, f->operand, 0, f->rkey};
            break;
        case RdmaOp::hw_cswap:
            wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
            wr.wr.atomic = {f->remote_address, f->compare, f->operand, f->rkey};
            break;
        case RdmaOp::emulated_atomic:
            break;
    }
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(ep.qp(), &wr, &bad)) {
        unreserve_send_wr(ep);
        out_.verbose(1, "{}: posting RDMA to peer {} failed: {}", name(), ep.peer(),
                     std::strerror(rc));
        ep.connection().fail("posting an RDMA operation failed");
        return false;
    }
    return true;
}

bool Module::post_credit_message(Endpoint& ep) noexcept {
    if (!ep.credits.take_control_credit()) return false;
    if (!reserve_send_wr(ep)) {
        ep.credits.untake_control_credit();
        return false;
    }
    const auto pb = ep.credits.take_piggyback();
    wire::FragHeader h{wire::FragType::credit, 0,
                       pb.returns_control ? wire::frag_flags::returns_control : std::uint8_t{0},
                       pb.credits};
    wire::encode(h, ep.control_header);
    // Inline: the HCA copies the 8 bytes at post time, so no registration is needed.
    ibv_sge sge{reinterpret_cast<std::uint64_t>(ep.control_header), wire::FragHeader::size, 0};
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<std::uint64_t>(&ep.control_frag);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(ep.qp(), &wr, &bad)) {
        unreserve_send_wr(ep);
        ep.credits.untake_control_credit();
        ep.credits.restore_piggyback(pb);
        out_.verbose(1, "{}: credit message to peer {} failed: {}", name(), ep.peer(),
                     std::strerror(rc));
        ep.connection().fail("posting a credit message failed");
        return false;
    }
    return true;
}

void Module::drain(Endpoint& ep) noexcept {
    while (ep.usable() && ep.has_pending()) {
        Frag* f = ep.pending_front();
        if (!try_post(ep, f)) break;
        ep.pop_pending();
    }
    if (ep.usable() && ep.credits.credit_message_due()) post_credit_message(ep);
}

void Module::attention(Endpoint& ep) noexcept {
    if (ep.on_attention) return;
    ep.on_attention = true;
    ep.attention_next = attention_head_;
    attention_head_ = &ep;
}

}  // namespace transit::openib
