// The receive side of a tcp module: socket events, the frame parser, and the
// target's execution of put, get and atomics on registered memory.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tcp_module.hpp"
#include "transit/btl/util/atomic_width.hpp"

namespace transit::tcp {

void TcpModule::on_event(Link& l, std::uint32_t events) noexcept {
    // Events are hints: the socket calls below decide what really happened (an
    // event may even name a socket this link has replaced in the same batch).
    switch (l.state) {
        case LinkState::probing:
            if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) on_probe(l);
            break;
        case LinkState::hello_sent:
        case LinkState::accepting:
            if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_handshake_input(l);
            break;
        case LinkState::connected:
            if ((events & EPOLLOUT) && !l.queue.empty()) flush_queue(l);
            if (l.state == LinkState::connected && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                on_readable(l);
            break;
        default:
            break;
    }
}

namespace {

// What a short read takes: the next frame's header and its request or reply,
// or a few control frames, and at most this much of a payload (copied twice).
constexpr std::size_t short_read_size = 1024;
// Short reads after each payload read straight into its destination; a stream
// of small frames is back to full reads after these.
constexpr std::uint8_t short_reads_after_direct = 4;

}  // namespace

void TcpModule::on_readable(Link& l) noexcept {
    if (l.direct_left > 0) {
        read_direct(l);
        if (l.direct_left > 0 || l.state != LinkState::connected) return;
        // The read that ended the payload took what followed it, if anything
        // had come: reading again now would mostly find the socket empty.
        if (l.rtail > l.rhead) parse(l);
        return;
    }
    if (l.rtail == l.rcap) {  // a partial frame sits at the end: move it to the front
        std::memmove(l.rbuf.get(), l.rbuf.get() + l.rhead, l.rtail - l.rhead);
        l.rtail -= l.rhead;
        l.rhead = 0;
    }
    std::size_t room = l.rcap - l.rtail;
    if (l.short_reads > 0) {
        --l.short_reads;
        room = std::min(room, short_read_size);
    }
    const ssize_t n = ::recv(l.fd.get(), l.rbuf.get() + l.rtail, room, MSG_DONTWAIT);
    if (n == 0) return fail_link(l, "connection closed by the peer");
    if (n < 0) {
        if (would_block(errno)) return;
        return fail_link(l, std::string("receive failed: ") + std::strerror(errno));
    }
    l.rtail += static_cast<std::size_t>(n);
    parse(l);
}

void TcpModule::read_direct(Link& l) noexcept {
    // A refused put's data is read into the (empty) receive buffer and dropped.
    std::byte* dst = l.direct_dst ? l.direct_dst : l.rbuf.get();
    const std::size_t want = l.direct_dst ? l.direct_left : std::min(l.direct_left, l.rcap);
    // What follows the payload (the next frame's header and request) comes
    // in the same call, into the receive buffer, which is empty while a
    // payload is read directly: one system call fewer per payload, and no
    // read that finds the socket empty right after it.
    iovec parts[2] = {{dst, want}, {l.rbuf.get(), short_read_size}};
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = l.direct_dst && want == l.direct_left ? 2 : 1;
    const ssize_t n = ::recvmsg(l.fd.get(), &m, MSG_DONTWAIT);
    if (n == 0) return fail_link(l, "connection closed by the peer");
    if (n < 0) {
        if (would_block(errno)) return;
        return fail_link(l, std::string("receive failed: ") + std::strerror(errno));
    }
    const std::size_t payload = std::min(static_cast<std::size_t>(n), want);
    if (l.direct_dst) l.direct_dst += payload;
    l.direct_left -= payload;
    if (static_cast<std::size_t>(n) > payload) {
        l.rtail = static_cast<std::size_t>(n) - payload;  // the buffer was empty
        if (l.short_reads > 0) --l.short_reads;
    }
    if (l.direct_left == 0) finish_direct(l);
}

void TcpModule::finish_direct(Link& l) noexcept {
    const DirectAfter after = l.direct_after;
    l.direct_after = DirectAfter::none;
    l.direct_dst = nullptr;
    if (after == DirectAfter::put_done)
        send_reply(l, l.direct_op, static_cast<Status>(l.direct_status), 0, nullptr, 0);
    else if (after == DirectAfter::get_done)
        complete_op(l.direct_op, Status::success);
}

void TcpModule::parse(Link& l) noexcept {
    while (l.state == LinkState::connected && l.direct_left == 0) {
        wire::FrameHeader h;
        const wire::ScanResult r =
            wire::next_frame({l.rbuf.get(), l.rhead, l.rtail, l.rcap}, limits_, h);
        if (r == wire::ScanResult::need_more) break;
        if (r != wire::ScanResult::ok)
            return fail_link(l, "malformed frame from rank " + std::to_string(l.endpoint->peer()) +
                                    ": " + std::string(wire::to_string(r)));
        const std::size_t avail = l.rtail - l.rhead;
        if (!handle_frame(l, h, avail)) return;
    }
    if (l.rhead == l.rtail) l.rhead = l.rtail = 0;
}

bool TcpModule::handle_frame(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept {
    std::byte* body = l.rbuf.get() + l.rhead + wire::header_size;
    tcp_.count_event();
    switch (h.type) {
        case wire::FrameType::am: {
            // Step over the frame first: the callback may send, fail this link, ...
            l.rhead += wire::header_size + h.length;
            const btl::Segment seg{body, h.length};
            const btl::ReceiveDescriptor d{l.endpoint, &seg, 1, h.tag};
            if (!tcp_.am_table().dispatch(this, d)) {
                fail_link(l, "frame for unknown tag " + std::to_string(h.tag) + " from rank " +
                                 std::to_string(l.endpoint->peer()));
                return false;
            }
            break;
        }
        case wire::FrameType::goodbye:
            l.rhead += wire::header_size;
            l.endpoint->goodbye = true;
            break;
        case wire::FrameType::get:
            handle_get(l);
            l.rhead += wire::header_size + h.length;
            break;
        case wire::FrameType::atomic:
            handle_atomic(l);
            l.rhead += wire::header_size + h.length;
            break;
        case wire::FrameType::put:
            handle_put(l, h, avail);
            break;
        case wire::FrameType::reply:
            handle_reply(l, h, avail);
            break;
    }
    return l.state == LinkState::connected;
}

// --- the target ------------------------------------------------------------------------

Status TcpModule::check_access(const Link& l, const btl::util::RegistrationKey& key,
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

void TcpModule::handle_put(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept {
    const std::byte* p = l.rbuf.get() + l.rhead + wire::header_size;
    const wire::RdmaRequest req = wire::decode_rdma_request(p);
    const std::size_t data_len = h.length - wire::rdma_request_size;
    if (req.size != data_len)
        return fail_link(l, "put request whose size disagrees with its frame");
    const Status st =
        check_access(l, {req.key, req.secret}, req.address, req.size, btl::reg_flags::remote_write);
    if (!ok(st)) [[unlikely]]
        tcp_.rdma_refused(name(), "a put", req.address, l.endpoint->peer(), st);
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

void TcpModule::handle_get(Link& l) noexcept {
    const wire::RdmaRequest req =
        wire::decode_rdma_request(l.rbuf.get() + l.rhead + wire::header_size);
    Status st =
        check_access(l, {req.key, req.secret}, req.address, req.size, btl::reg_flags::remote_read);
    if (ok(st) && req.size > limits_.max_rdma) st = Status::bad_param;
    if (!ok(st)) [[unlikely]] {
        tcp_.rdma_refused(name(), "a get", req.address, l.endpoint->peer(), st);
        return send_reply(l, req.op_id, st, 0, nullptr, 0);
    }
    send_reply(l, req.op_id, st, 0, reinterpret_cast<const void*>(req.address), req.size);
}

void TcpModule::handle_atomic(Link& l) noexcept {
    const wire::AtomicRequest req =
        wire::decode_atomic_request(l.rbuf.get() + l.rhead + wire::header_size);
    const std::uint64_t width = btl::util::atomic_width(req.atomic_flags);
    Status st =
        check_access(l, {req.key, req.secret}, req.address, width, btl::reg_flags::remote_atomic);
    if (ok(st) && (req.address % width != 0 || (req.atomic_flags & ~btl::atomic_flags::bits32)))
        st = Status::bad_param;
    const bool cswap = req.kind == wire::RdmaKind::atomic_cswap;
    if (ok(st) && !cswap && req.kind != wire::RdmaKind::atomic_op &&
        req.kind != wire::RdmaKind::atomic_fop)
        st = Status::bad_param;
    if (ok(st) && !cswap && !btl::is_atomic_op(req.op)) st = Status::bad_param;
    std::uint64_t old = 0;
    if (ok(st)) {
        auto* target = reinterpret_cast<void*>(req.address);
        old = cswap ? btl::apply_cswap(target, req.compare, req.operand, req.atomic_flags)
                    : btl::apply_atomic(target, static_cast<btl::AtomicOp>(req.op), req.operand,
                                        req.atomic_flags);
    } else {
        tcp_.rdma_refused(name(), "an atomic", req.address, l.endpoint->peer(), st);
    }
    send_reply(l, req.op_id, st, old, nullptr, 0);
}

void TcpModule::send_reply(Link& l, std::uint32_t op_id, Status status, std::uint64_t value,
                           const void* data, std::size_t size) noexcept {
    // Replies ignore the pool limit: they are bounded by the peers' op tables,
    // and refusing one would leave an origin waiting forever.
    Frag* f = control_->get(true);
    if (f == nullptr) return fail_link(l, "out of memory for a reply");
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
    send_control(l, f);
}

// --- the origin ------------------------------------------------------------------------

void TcpModule::handle_reply(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept {
    const std::byte* p = l.rbuf.get() + l.rhead + wire::header_size;
    const wire::Reply rep = wire::decode_reply(p);
    const std::size_t data_len = h.length - wire::reply_size;
    Op* op = find_op(l, rep.op_id);
    if (op == nullptr) return fail_link(l, "reply to an operation that is not pending");
    const Status st = status_from_wire(rep.status);
    const bool carries = op->type == wire::FrameType::get && ok(st);
    if (carries ? data_len != op->size : data_len != 0)
        return fail_link(l, "reply whose length does not match its operation");
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

}  // namespace transit::tcp
