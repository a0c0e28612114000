// One-sided operations of a tcp module: the origin's requests and op table,
// registration and flush, and the target's execution of put and get.
#include "tcp_rdma.hpp"

#include <algorithm>
#include <limits>

#include "tcp_component.hpp"
#include "tcp_module.hpp"

namespace transit::tcp {

TcpRdma::TcpRdma(TcpModule& module, TcpComponent& tcp, FragPool& control,
                 const wire::Limits& limits)
    : module_(module), tcp_(tcp), control_(control), limits_(limits) {
    const std::size_t max_ops = tcp.params().max_rdma_ops;
    // One block that never grows: an id's index reaches its op directly.
    ops_.setup({.initial = max_ops, .max = max_ops});
    op_table_ = ops_.chunk_items(0);
    for (std::size_t i = 0; i < op_table_.size(); ++i)
        op_table_[i].index = static_cast<std::uint16_t>(i);
}

bool TcpRdma::lends(std::size_t size) const noexcept {
    const TcpParams& p = tcp_.params();
    return p.splice_min > 0 && size >= p.splice_min && (p.splice_max == 0 || size <= p.splice_max);
}

// --- the origin ------------------------------------------------------------------------

TcpRdma::Op* TcpRdma::take(Frag*& f) noexcept {
    Op* slot = ops_.get();
    if (slot == nullptr) return nullptr;
    f = control_.get();
    if (f == nullptr) {
        ops_.put(slot);
        return nullptr;
    }
    // No endpoint until it is sent: a failure of the link inside enqueue must
    // not complete it (the caller hears of it from the return value).
    slot->endpoint = nullptr;
    return slot;
}

Status TcpRdma::submit(TcpEndpoint& ep, Op& slot, Frag* f, const Op& op) noexcept {
    f->kind = FragKind::control;
    f->endpoint = &ep;
    Link& l = ep.next_rdma_link();
    const Status s = module_.enqueue(l, f);
    if (s == Status::completed) control_.put(f);
    if (s != Status::completed && s != Status::success) {
        control_.put(f);
        ops_.put(&slot);
        return s;
    }
    // The slot keeps its place in the table and its generation.
    const std::uint16_t index = slot.index;
    const std::uint16_t gen = slot.generation;
    slot = op;
    slot.index = index;
    slot.generation = gen;
    slot.endpoint = &ep;
    slot.in_use = true;  // op's next_free is nullptr too
    ++ep.outstanding;
    return Status::success;
}

Status TcpRdma::transfer(const btl::RdmaRequest& req, wire::FrameType type) noexcept {
    const bool put = type == wire::FrameType::put;
    const btl::Attributes& attr = module_.attributes();
    if (req.size > (put ? attr.put_limit : attr.get_limit)) return Status::bad_param;
    Op op{req.cb, req.cbcontext, req.cbdata, req.local, req.local_handle, nullptr, req.size, 0,
          type,   false,         false,      0};
    return start(req.endpoint, req.remote_handle, op,
                 [&](Frag& f, const btl::util::RegistrationKey& key, std::uint32_t id) {
                     fill_request(
                         f, type,
                         wire::RdmaRequest{key.id, key.secret, req.remote, req.size, id, 0},
                         put ? req.local : nullptr, put ? req.size : 0);
                     f.by_reference = put && lends(req.size);
                 });
}

Status TcpRdma::put(const btl::RdmaRequest& req) noexcept {
    return transfer(req, wire::FrameType::put);
}

Status TcpRdma::get(const btl::RdmaRequest& req) noexcept {
    return transfer(req, wire::FrameType::get);
}

TcpRdma::Op* TcpRdma::find_op(const Link& l, std::uint32_t op_id) noexcept {
    const std::uint32_t idx = op_id & 0xffff;
    if (idx >= op_table_.size()) return nullptr;
    Op& op = op_table_[idx];
    if (!op.in_use || op.generation != (op_id >> 16) || op.endpoint != l.endpoint) return nullptr;
    return &op;
}

void TcpRdma::complete_op(std::uint32_t op_id, Status status) noexcept {
    Op& slot = op_table_[op_id & 0xffff];
    const Op op = slot;
    ++slot.generation;
    ops_.put(&slot);
    if (op.endpoint) --op.endpoint->outstanding;
    if (op.cbfunc)
        op.cbfunc(&module_, op.endpoint, op.local, op.local_handle, op.cbcontext, op.cbdata,
                  status);
}

void TcpRdma::complete_ops(const TcpEndpoint* ep, Status status) noexcept {
    for (Op& op : op_table_)
        if (op.in_use && (ep == nullptr || op.endpoint == ep)) complete_op(id_of(op), status);
}

// --- registration and flush ------------------------------------------------------------

btl::RegistrationHandle* TcpRdma::register_mem(btl::Endpoint* endpoint, void* base,
                                               std::size_t size, std::uint32_t flags) {
    return tcp_.register_mem(endpoint ? endpoint->peer() : any_rank, base, size, flags);
}

Status TcpRdma::deregister_mem(btl::RegistrationHandle* handle) {
    return tcp_.deregister_mem(handle);
}

Status TcpRdma::flush(btl::Endpoint* endpoint) {
    auto* ep = static_cast<TcpEndpoint*>(endpoint);
    auto pending = [&] { return ep ? ep->outstanding : ops_.size() - ops_.available(); };
    // Every operation ends: by its reply, by a failure of its link, or by a timeout.
    while (pending() > 0) tcp_.progress_engine().progress();
    return ep && ep->failed ? Status::peer_failed : Status::success;
}

// --- the target ------------------------------------------------------------------------

Status TcpRdma::check_access(const Link& l, const btl::util::RegistrationKey& key,
                             std::uint64_t address, std::uint64_t size,
                             std::uint32_t access) const noexcept {
    const TcpRegistration* reg = tcp_.find_registration(key);
    if (reg == nullptr) return Status::access_denied;
    if (reg->peer != any_rank && reg->peer != l.endpoint->peer()) return Status::access_denied;
    if ((reg->access & access) != access) return Status::access_denied;
    if (address < reg->base || size > reg->size || address - reg->base > reg->size - size)
        return Status::bad_param;
    return Status::success;
}

void TcpRdma::handle_put(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept {
    const std::byte* p = l.rbuf.get() + l.rhead + wire::header_size;
    const wire::RdmaRequest req = wire::decode_rdma_request(p);
    const std::size_t data_len = h.length - wire::rdma_request_size;
    if (req.size != data_len)
        return module_.fail_link(l, "put request whose size disagrees with its frame");
    const Status st =
        check_access(l, {req.key, req.secret}, req.address, req.size, btl::reg_flags::remote_write);
    if (!ok(st)) [[unlikely]]
        tcp_.rdma_refused(module_.name(), "a put", req.address, l.endpoint->peer(), st);
    auto* dst = ok(st) ? reinterpret_cast<std::byte*>(req.address) : nullptr;
    const std::size_t here = avail - wire::header_size - wire::rdma_request_size;
    const std::size_t in_buf = std::min(here, data_len);
    if (dst && in_buf) std::memcpy(dst, p + wire::rdma_request_size, in_buf);
    l.rhead += wire::header_size + wire::rdma_request_size + in_buf;
    if (in_buf < data_len) {
        // The rest goes from the socket straight into the target memory.
        l.direct_dst = dst ? dst + in_buf : nullptr;
        l.direct_left = data_len - in_buf;
        l.direct_after = DirectAfter::put_done;
        l.direct_op = req.op_id;
        l.direct_status = static_cast<std::int32_t>(st);
        l.short_reads = short_reads_after_direct;
        l.rhead = l.rtail = 0;
        return;
    }
    send_reply(l, req.op_id, st, 0, nullptr, 0);
}

void TcpRdma::handle_get(Link& l) noexcept {
    const wire::RdmaRequest req =
        wire::decode_rdma_request(l.rbuf.get() + l.rhead + wire::header_size);
    Status st =
        check_access(l, {req.key, req.secret}, req.address, req.size, btl::reg_flags::remote_read);
    if (ok(st) && req.size > limits_.max_rdma) st = Status::bad_param;
    if (!ok(st)) [[unlikely]] {
        tcp_.rdma_refused(module_.name(), "a get", req.address, l.endpoint->peer(), st);
        return send_reply(l, req.op_id, st, 0, nullptr, 0);
    }
    send_reply(l, req.op_id, st, 0, reinterpret_cast<const void*>(req.address), req.size);
}

void TcpRdma::send_reply(Link& l, std::uint32_t op_id, Status status, std::uint64_t value,
                         const void* data, std::size_t size) noexcept {
    // Replies ignore the pool limit: they are bounded by the peers' op tables,
    // and refusing one would leave an origin waiting forever.
    Frag* f = control_.get(true);
    if (f == nullptr) return module_.fail_link(l, "out of memory for a reply");
    constexpr std::size_t front = wire::header_size + wire::reply_size;
    std::byte* at = f->payload() - front;
    wire::encode(wire::FrameHeader{wire::frame_magic, wire::FrameType::reply, 0, 0,
                                   static_cast<std::uint32_t>(wire::reply_size + size)},
                 at);
    wire::encode(wire::Reply{op_id, static_cast<std::int32_t>(status), value},
                 at + wire::header_size);
    f->iov[0] = {at, front};
    f->iov[1] = {const_cast<void*>(data), size};
    f->iov_count = size ? 2 : 1;
    f->iov_index = 0;
    f->by_reference = lends(size);
    module_.send_control(l, f);
}

// --- the origin's replies -------------------------------------------------------------

void TcpRdma::handle_reply(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept {
    const std::byte* p = l.rbuf.get() + l.rhead + wire::header_size;
    const wire::Reply rep = wire::decode_reply(p);
    const std::size_t data_len = h.length - wire::reply_size;
    Op* op = find_op(l, rep.op_id);
    if (op == nullptr) return module_.fail_link(l, "reply to an operation that is not pending");
    const Status st = status_from_wire(rep.status);
    const bool carries = op->type == wire::FrameType::get && ok(st);
    if (carries ? data_len != op->size : data_len != 0)
        return module_.fail_link(l, "reply whose length does not match its operation");
    const std::size_t here = avail - wire::header_size - wire::reply_size;
    const std::size_t in_buf = std::min(here, data_len);
    if (in_buf) std::memcpy(op->local, p + wire::reply_size, in_buf);
    l.rhead += wire::header_size + wire::reply_size + in_buf;
    if (in_buf < data_len) {
        l.direct_dst = static_cast<std::byte*>(op->local) + in_buf;
        l.direct_left = data_len - in_buf;
        l.direct_after = DirectAfter::get_done;
        l.direct_op = rep.op_id;
        l.short_reads = short_reads_after_direct;
        l.rhead = l.rtail = 0;
        return;
    }
    if (op->fetch && ok(st) && op->local) {
        if (op->atomic_flags & btl::atomic_flags::bits32) {
            const auto v32 = static_cast<std::uint32_t>(rep.value);
            std::memcpy(op->local, &v32, sizeof v32);
        } else {
            std::memcpy(op->local, &rep.value, sizeof rep.value);
        }
    }
    complete_op(rep.op_id, st);
}

void TcpRdma::finish_direct(Link& l) noexcept {
    const DirectAfter after = l.direct_after;
    l.direct_after = DirectAfter::none;
    l.direct_dst = nullptr;
    if (after == DirectAfter::put_done)
        send_reply(l, l.direct_op, static_cast<Status>(l.direct_status), 0, nullptr, 0);
    else if (after == DirectAfter::get_done)
        complete_op(l.direct_op, Status::success);
}

}  // namespace transit::tcp
