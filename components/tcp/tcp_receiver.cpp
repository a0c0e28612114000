// The receive side of a tcp module: reading a connected link's socket and the
// frame parser, which hands one-sided requests and replies to the module's
// TcpRdma and TcpAtomics.
#include "tcp_receiver.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tcp_atomics.hpp"
#include "tcp_component.hpp"
#include "tcp_module.hpp"
#include "tcp_rdma.hpp"

namespace transit::tcp {

TcpReceiver::TcpReceiver(TcpModule& module, TcpComponent& tcp, TcpRdma& rdma, TcpAtomics& atomics,
                         const wire::Limits& limits) noexcept
    : module_(module), tcp_(tcp), rdma_(rdma), atomics_(atomics), limits_(limits) {}

namespace {

// What a short read takes: the next frame's header and its request or reply,
// or a few control frames, and at most this much of a payload (copied twice).
constexpr std::size_t short_read_size = 1024;

}  // namespace

void TcpReceiver::on_readable(Link& l) noexcept {
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
    if (n == 0) return module_.fail_link(l, "connection closed by the peer");
    if (n < 0) {
        if (would_block(errno)) return;
        return module_.fail_link(l, std::string("receive failed: ") + std::strerror(errno));
    }
    l.rtail += static_cast<std::size_t>(n);
    tcp_.count_event();  // part of a frame is work too (read_direct)
    parse(l);
}

void TcpReceiver::read_direct(Link& l) noexcept {
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
    if (n == 0) return module_.fail_link(l, "connection closed by the peer");
    if (n < 0) {
        if (would_block(errno)) return;
        return module_.fail_link(l, std::string("receive failed: ") + std::strerror(errno));
    }
    // Bytes moved are work, though no frame ended: a waiter that counted this
    // poll idle would sleep in the middle of the payload.
    tcp_.count_event();
    const std::size_t payload = std::min(static_cast<std::size_t>(n), want);
    if (l.direct_dst) l.direct_dst += payload;
    l.direct_left -= payload;
    if (static_cast<std::size_t>(n) > payload) {
        l.rtail = static_cast<std::size_t>(n) - payload;  // the buffer was empty
        if (l.short_reads > 0) --l.short_reads;
    }
    if (l.direct_left == 0) rdma_.finish_direct(l);
}

void TcpReceiver::parse(Link& l) noexcept {
    while (l.state == LinkState::connected && l.direct_left == 0) {
        wire::FrameHeader h;
        const wire::ScanResult r =
            wire::next_frame({l.rbuf.get(), l.rhead, l.rtail, l.rcap}, limits_, h);
        if (r == wire::ScanResult::need_more) break;
        if (r != wire::ScanResult::ok)
            return module_.fail_link(l, "malformed frame from rank " +
                                            std::to_string(l.endpoint->peer()) + ": " +
                                            std::string(wire::to_string(r)));
        const std::size_t avail = l.rtail - l.rhead;
        if (!handle_frame(l, h, avail)) return;
    }
    if (l.rhead == l.rtail) l.rhead = l.rtail = 0;
}

bool TcpReceiver::handle_frame(Link& l, const wire::FrameHeader& h, std::size_t avail) noexcept {
    std::byte* body = l.rbuf.get() + l.rhead + wire::header_size;
    tcp_.count_event();
    switch (h.type) {
        case wire::FrameType::am: {
            // Step over the frame first: the callback may send, fail this link, ...
            l.rhead += wire::header_size + h.length;
            const btl::Segment seg{body, h.length};
            const btl::ReceiveDescriptor d{l.endpoint, &seg, 1, h.tag};
            if (!tcp_.am_table().dispatch(&module_, d)) {
                module_.fail_link(l, "frame for unknown tag " + std::to_string(h.tag) +
                                         " from rank " + std::to_string(l.endpoint->peer()));
                return false;
            }
            break;
        }
        case wire::FrameType::goodbye:
            l.rhead += wire::header_size;
            l.endpoint->goodbye = true;
            break;
        case wire::FrameType::get:
            rdma_.handle_get(l);
            l.rhead += wire::header_size + h.length;
            break;
        case wire::FrameType::atomic:
            atomics_.handle_atomic(l);
            l.rhead += wire::header_size + h.length;
            break;
        case wire::FrameType::put:
            rdma_.handle_put(l, h, avail);
            break;
        case wire::FrameType::reply:
            rdma_.handle_reply(l, h, avail);
            break;
    }
    return l.state == LinkState::connected;
}

}  // namespace transit::tcp
