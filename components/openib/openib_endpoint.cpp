#include "openib_endpoint.hpp"

namespace transit::openib {

std::string_view to_string(ConnState s) noexcept {
    switch (s) {
        case ConnState::idle:
            return "idle";
        case ConnState::requesting:
            return "requesting";
        case ConnState::accepting:
            return "accepting";
        case ConnState::connected:
            return "connected";
        case ConnState::failed:
            return "failed";
    }
    return "unknown";
}

void Connection::start(std::uint64_t now_ms) {
    if (state_ != ConnState::idle) return;
    granted_to_peer_ = act_.reserve_credits();
    if (granted_to_peer_ == 0) {
        fail("no receive buffers left in the shared receive queue for a new peer");
        return;
    }
    if (!have_qp_) {
        if (!act_.create_qp(local_)) {
            fail("cannot create an RC queue pair");
            return;
        }
        have_qp_ = true;
    }
    state_ = ConnState::requesting;
    arm(now_ms);
    send(wire::CmType::request, 0);
}

void Connection::receive(const wire::CmMessage& m, std::uint64_t now_ms) {
    if (state_ == ConnState::failed) return;
    switch (m.type) {
        case wire::CmType::request:
            on_request(m, now_ms);
            break;
        case wire::CmType::reply:
            on_reply(m);
            break;
        case wire::CmType::ready:
            on_ready(m);
            break;
        case wire::CmType::reject:
            on_reject(m);
            break;
    }
}

void Connection::on_request(const wire::CmMessage& m, std::uint64_t now_ms) {
    switch (state_) {
        case ConnState::idle:
            accept(m, now_ms);
            break;
        case ConnState::requesting:
            // Simultaneous start: the lower rank's request wins.
            if (cfg_.local_rank > cfg_.peer_rank) accept(m, now_ms);
            break;
        case ConnState::accepting:
            // Our reply was lost; the same request again gets the same answer.
            if (m.src.qpn == remote_.qpn) send(wire::CmType::reply, remote_.qpn);
            break;
        case ConnState::connected:
        case ConnState::failed:
            // A late duplicate: the peer is past it already.
            break;
    }
}

void Connection::accept(const wire::CmMessage& m, std::uint64_t now_ms) {
    if (granted_to_peer_ == 0) {
        granted_to_peer_ = act_.reserve_credits();
        if (granted_to_peer_ == 0) {
            // Tell the peer at once instead of letting it time out.
            wire::CmMessage r;
            r.type = wire::CmType::reject;
            r.src_rank = cfg_.local_rank;
            r.dst_rank = cfg_.peer_rank;
            r.job_key = cfg_.job_key;
            r.src = local_.qpn ? local_ : m.src;  // a reject needs some valid source QPN
            r.src.mtu = m.src.mtu;
            r.dst_qpn = m.src.qpn;
            act_.send_cm(r);
            return;
        }
    }
    if (!have_qp_) {
        if (!act_.create_qp(local_)) {
            fail("cannot create an RC queue pair");
            return;
        }
        have_qp_ = true;
    }
    remote_ = m.src;
    granted_to_us_ = m.credits;
    if (!act_.connect_qp(remote_)) {
        fail("cannot connect the RC queue pair to the peer's");
        return;
    }
    state_ = ConnState::accepting;
    arm(now_ms);
    send(wire::CmType::reply, remote_.qpn);
}

void Connection::on_reply(const wire::CmMessage& m) {
    if (m.dst_qpn != local_.qpn) return;  // answers a QP we no longer have
    switch (state_) {
        case ConnState::requesting:
            remote_ = m.src;
            granted_to_us_ = m.credits;
            if (!act_.connect_qp(remote_)) {
                fail("cannot connect the RC queue pair to the peer's");
                return;
            }
            send(wire::CmType::ready, remote_.qpn);
            become_connected();
            break;
        case ConnState::connected:
            // Our READY was lost and the peer resent its reply.
            if (m.src.qpn == remote_.qpn) send(wire::CmType::ready, remote_.qpn);
            break;
        case ConnState::accepting:
            // Both sides accepted each other's QP: both QPs are connected.
            if (matches_remote(m)) {
                send(wire::CmType::ready, remote_.qpn);
                become_connected();
            }
            break;
        case ConnState::idle:
        case ConnState::failed:
            break;
    }
}

void Connection::on_ready(const wire::CmMessage& m) {
    if (state_ == ConnState::accepting && matches_remote(m)) become_connected();
}

void Connection::on_reject(const wire::CmMessage& m) {
    if (state_ == ConnState::requesting && m.dst_qpn == local_.qpn)
        fail("the peer has no receive buffers left for a new connection");
}

void Connection::fragment_arrived() {
    if (state_ == ConnState::accepting) become_connected();
}

void Connection::tick(std::uint64_t now_ms) {
    if (!waiting() || now_ms < deadline_) return;
    if (++attempts_ > cfg_.max_retries) {
        fail(state_ == ConnState::requesting ? "connection request timed out"
                                             : "connection never confirmed by the peer");
        return;
    }
    deadline_ = now_ms + cfg_.retry_interval_ms;
    if (state_ == ConnState::requesting)
        send(wire::CmType::request, 0);
    else
        send(wire::CmType::reply, remote_.qpn);
}

void Connection::fail(const char* reason) {
    if (state_ == ConnState::failed) return;
    state_ = ConnState::failed;
    failure_ = reason;
    if (granted_to_peer_ != 0) {
        act_.release_credits(granted_to_peer_);
        granted_to_peer_ = 0;
    }
    act_.failed(reason);
}

void Connection::become_connected() {
    state_ = ConnState::connected;
    act_.connected(granted_to_us_, granted_to_peer_);
}

void Connection::send(wire::CmType type, std::uint32_t dst_qpn) {
    wire::CmMessage m;
    m.type = type;
    m.src_rank = cfg_.local_rank;
    m.dst_rank = cfg_.peer_rank;
    m.job_key = cfg_.job_key;
    m.src = local_;
    m.dst_qpn = dst_qpn;
    if (type == wire::CmType::request || type == wire::CmType::reply) m.credits = granted_to_peer_;
    act_.send_cm(m);
}

}  // namespace transit::openib
