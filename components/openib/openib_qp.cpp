// The verbs side of an endpoint: its RC queue pair through INIT -> RTR -> RTS,
// the address handle of the peer's connection-manager QP, the pending queue.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

Endpoint::Endpoint(Module& module, Rank peer, const wire::PortAddress& remote,
                   Connection::Config cfg)
    : btl::Endpoint(peer),
      send_slots(module.port().config.sq_depth),
      module_(module),
      remote_port_(remote),
      conn_(*this, cfg) {
    control_frag.kind = FragKind::control;
    control_frag.endpoint = this;
}

Endpoint::~Endpoint() = default;

void Endpoint::enqueue(Frag* f) noexcept {
    f->next = nullptr;
    if (pending_tail_)
        pending_tail_->next = f;
    else
        pending_head_ = f;
    pending_tail_ = f;
}

void Endpoint::pop_pending() noexcept {
    Frag* f = pending_head_;
    pending_head_ = f->next;
    if (!pending_head_) pending_tail_ = nullptr;
    f->next = nullptr;
}

bool Endpoint::create_qp(wire::QpAddress& local) {
    const Config& c = module_.port().config;
    ibv_qp_init_attr init{};
    init.qp_context = this;
    init.send_cq = module_.port().send_cq.get();
    init.recv_cq = module_.port().recv_cq.get();
    init.srq = module_.port().srq.get();
    init.qp_type = IBV_QPT_RC;
    init.sq_sig_all = 0;
    init.cap.max_send_wr = c.sq_depth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_wr = 0;  // receives come from the SRQ
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = c.max_inline;
    qp_.reset(ibv_create_qp(module_.port().device.pd(), &init));
    if (!qp_) {
        module_.out().verbose(1, "peer {}: ibv_create_qp(RC) failed: {}", peer(),
                              std::strerror(errno));
        return false;
    }
    // The device may grant less inline room than asked; credit messages need 8 bytes.
    max_inline = std::min(c.max_inline, init.cap.max_inline_data);
    if (max_inline < wire::FragHeader::size) {
        module_.out().verbose(1, "peer {}: the device allows only {} inline bytes", peer(),
                              init.cap.max_inline_data);
        qp_.reset();
        return false;
    }
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = c.pkey_index;
    a.port_num = module_.port().number;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;
    if (int rc = ibv_modify_qp(
            qp_.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        module_.out().verbose(1, "peer {}: RC QP to INIT failed: {}", peer(), std::strerror(rc));
        qp_.reset();
        return false;
    }
    const wire::PortAddress& me = module_.port().address;
    local.qpn = qp_->qp_num;
    local.psn = module_.port().next_psn();
    local.lid = me.lid;
    local.mtu = me.mtu;
    local.rd_atomic =
        static_cast<std::uint8_t>(std::clamp(module_.port().device.attr().max_qp_rd_atom, 1, 255));
    local.gid = me.gid;
    module_.endpoints().qp_created(*this);
    return true;
}

bool Endpoint::connect_qp(const wire::QpAddress& remote) {
    const Config& c = module_.port().config;
    const ibv_device_attr& dev = module_.port().device.attr();
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(std::min<int>(remote.mtu, module_.port().attr.active_mtu));
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = static_cast<std::uint8_t>(std::clamp(dev.max_qp_rd_atom, 1, 255));
    a.min_rnr_timer = 12;  // 0.64 ms
    module_.port().fill_ah(a.ah_attr, remote_port_, remote.lid, remote.gid);
    if (int rc =
            ibv_modify_qp(qp_.get(), &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        module_.out().verbose(1, "peer {}: RC QP to RTR failed: {}", peer(), std::strerror(rc));
        return false;
    }
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = c.qp_timeout;
    s.retry_cnt = c.qp_retry_count;
    s.rnr_retry = c.rnr_retry;
    s.sq_psn = conn_.local().psn;
    // Never more reads and atomics in flight than the peer's QP accepts.
    const int peer_limit = remote.rd_atomic ? remote.rd_atomic : 1;
    s.max_rd_atomic = static_cast<std::uint8_t>(
        std::clamp(std::min(dev.max_qp_init_rd_atom, peer_limit), 1, 255));
    if (int rc = ibv_modify_qp(qp_.get(), &s,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
        module_.out().verbose(1, "peer {}: RC QP to RTS failed: {}", peer(), std::strerror(rc));
        return false;
    }
    module_.out().verbose(20, "peer {}: QP {:#x} connected to {:#x}, MTU {}", peer(), qp_->qp_num,
                          remote.qpn, verbs::mtu_bytes(a.path_mtu));
    return true;
}

std::uint16_t Endpoint::reserve_credits() {
    return module_.receive_queue().reserve(module_.port().config.credits_per_peer);
}

void Endpoint::release_credits(std::uint16_t granted) {
    module_.receive_queue().release(granted);
}

bool Endpoint::make_ud_ah() {
    if (ud_ah_) return true;
    ibv_ah_attr ah{};
    module_.port().fill_ah(ah, remote_port_, remote_port_.lid, remote_port_.gid);
    ud_ah_.reset(ibv_create_ah(module_.port().device.pd(), &ah));
    if (!ud_ah_)
        module_.out().verbose(1, "peer {}: ibv_create_ah failed: {}", peer(), std::strerror(errno));
    return static_cast<bool>(ud_ah_);
}

void Endpoint::send_cm(const wire::CmMessage& m) {
    // A lost message is resent by the connection timer, so failure here is not fatal.
    if (make_ud_ah()) module_.connections().send(*this, ud_ah_.get(), m);
}

void Endpoint::connected(std::uint16_t granted_to_us, std::uint16_t granted_to_peer) {
    credits.start(granted_to_us, granted_to_peer);
    module_.endpoint_connected(*this);
}

void Endpoint::failed(const char* reason) {
    if (qp_) {
        // Everything posted completes with a flush error, which fails its callback.
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        (void)ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE);
    }
    module_.endpoint_failed(*this, reason);
}

}  // namespace transit::openib
