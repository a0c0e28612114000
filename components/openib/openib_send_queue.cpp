// Posting to the endpoints' RC send queues (openib_send_queue.hpp).
#include "openib_send_queue.hpp"

#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

bool SendQueue::reserve(Endpoint& ep) noexcept {
    if (cq_free_ == 0) return false;
    if (!ep.send_slots.take()) return false;
    --cq_free_;
    ++ep.posted;
    return true;
}

void SendQueue::release(Endpoint& ep) noexcept {
    ep.send_slots.give();
    ++cq_free_;
    --ep.posted;
}

bool SendQueue::post(Endpoint& ep, Frag* f) noexcept {
    if (f->kind == FragKind::send) return post_send(ep, static_cast<SendFrag*>(f));
    return post_rdma(ep, static_cast<RdmaFrag*>(f));
}

bool SendQueue::post_send(Endpoint& ep, SendFrag* f) noexcept {
    if (!ep.credits.take_data_credit()) return false;
    if (!reserve(ep)) {
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
        release(ep);
        ep.credits.untake_data_credit();
        ep.credits.restore_piggyback(pb);
        module_.out().verbose(1, "{}: ibv_post_send to peer {} failed: {}", module_.name(),
                              ep.peer(), std::strerror(rc));
        ep.connection().fail("posting a send failed");
        return false;
    }
    return true;
}

bool SendQueue::post_rdma(Endpoint& ep, RdmaFrag* f) noexcept {
    if (f->op == RdmaOp::emulated_atomic) {
        // A request fragment to the target, which answers with the old value.
        SendFrag* s = module_.fragments().take_send();
        if (!s) return false;
        wire::AtomicRequest r;
        r.request_id = FragPools::request_id(*f);
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
        if (!post_send(ep, s)) {
            module_.fragments().put(s);
            return false;
        }
        return true;  // completes when the reply arrives
    }
    if (!reserve(ep)) return false;
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
        release(ep);
        module_.out().verbose(1, "{}: posting RDMA to peer {} failed: {}", module_.name(),
                              ep.peer(), std::strerror(rc));
        ep.connection().fail("posting an RDMA operation failed");
        return false;
    }
    return true;
}

bool SendQueue::post_credit_message(Endpoint& ep) noexcept {
    if (!ep.credits.take_control_credit()) return false;
    if (!reserve(ep)) {
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
        release(ep);
        ep.credits.untake_control_credit();
        ep.credits.restore_piggyback(pb);
        module_.out().verbose(1, "{}: credit message to peer {} failed: {}", module_.name(),
                              ep.peer(), std::strerror(rc));
        ep.connection().fail("posting a credit message failed");
        return false;
    }
    return true;
}

void SendQueue::drain(Endpoint& ep) noexcept {
    while (ep.usable() && ep.has_pending()) {
        Frag* f = ep.pending_front();
        if (!post(ep, f)) break;
        ep.pop_pending();
    }
    if (ep.usable() && ep.credits.credit_message_due()) post_credit_message(ep);
}

}  // namespace transit::openib
