// The connection manager's UD queue pair (openib_connection_manager.hpp).
#include "openib_connection_manager.hpp"

#include <cerrno>
#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

void ConnectionManager::open(Port& port, std::uint64_t job_key, std::byte* memory,
                             std::uint32_t lkey) {
    cq_.reset(ibv_create_cq(port.device.context(), 2 * depth, nullptr, nullptr, 0));
    if (!cq_) verbs::fail("ibv_create_cq (connection manager)", errno);
    ibv_qp_init_attr ui{};
    ui.send_cq = cq_.get();
    ui.recv_cq = cq_.get();
    ui.qp_type = IBV_QPT_UD;
    ui.sq_sig_all = 1;
    ui.cap.max_send_wr = depth;
    ui.cap.max_recv_wr = depth;
    ui.cap.max_send_sge = 1;
    ui.cap.max_recv_sge = 1;
    qp_.reset(ibv_create_qp(port.device.pd(), &ui));
    if (!qp_) verbs::fail("ibv_create_qp (UD)", errno);
    qkey_ = static_cast<std::uint32_t>(job_key & 0x7fffffff) | 1;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = port.config.pkey_index;
    a.port_num = port.number;
    a.qkey = qkey_;
    if (int rc = ibv_modify_qp(qp_.get(), &a,
                               IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        verbs::fail("UD QP to INIT", rc);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    if (int rc = ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE)) verbs::fail("UD QP to RTR", rc);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = port.next_psn();
    if (int rc = ibv_modify_qp(qp_.get(), &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
        verbs::fail("UD QP to RTS", rc);
    recv_ = memory;
    send_ = memory + depth * recv_size;
    lkey_ = lkey;
    send_free_ = depth;
    slots_.resize(2 * depth);
    for (Frag& f : slots_) f.kind = FragKind::ud;
    for (std::uint32_t i = 0; i < depth; ++i)
        if (int rc = post_receive(i)) verbs::fail("posting UD receives", rc);
}

int ConnectionManager::post_receive(std::uint32_t slot) noexcept {
    ibv_sge sge{reinterpret_cast<std::uint64_t>(recv_ + slot * recv_size),
                static_cast<std::uint32_t>(recv_size), lkey_};
    ibv_recv_wr wr{};
    wr.wr_id = reinterpret_cast<std::uint64_t>(&slots_[slot]);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp_.get(), &wr, &bad);
}

void ConnectionManager::send(const Endpoint& ep, ibv_ah* ah, const wire::CmMessage& m) noexcept {
    if (send_free_ == 0) return;  // UD is lossy anyway; the timer resends
    const std::uint32_t slot = send_next_++ % depth;
    std::byte* buf = send_ + slot * wire::CmMessage::size;
    wire::encode(m, buf);
    ibv_sge sge{reinterpret_cast<std::uint64_t>(buf), wire::CmMessage::size, lkey_};
    ibv_send_wr wr{};
    wr.wr_id = reinterpret_cast<std::uint64_t>(&slots_[depth + slot]);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = ep.remote_port().ud_qpn;
    wr.wr.ud.remote_qkey = ep.remote_port().qkey;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_.get(), &wr, &bad)) {
        module_.out().verbose(10, "{}: connection message to peer {} not sent: {}", module_.name(),
                              ep.peer(), std::strerror(rc));
        return;
    }
    --send_free_;
}

int ConnectionManager::poll(std::uint64_t job_key, Rank me) noexcept {
    ibv_wc wc[batch];
    int n = ibv_poll_cq(cq_.get(), batch, wc);
    const std::uint64_t now = n > 0 ? now_ms() : 0;
    for (int i = 0; i < n; ++i) {
        auto* f = reinterpret_cast<Frag*>(wc[i].wr_id);
        const auto idx = static_cast<std::uint32_t>(f - slots_.data());
        if (idx >= depth) {  // a send slot
            ++send_free_;
            continue;
        }
        std::byte* buf = recv_ + idx * recv_size;
        if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= grh_size) {
            auto m = wire::decode_cm({buf + grh_size, wc[i].byte_len - grh_size});
            if (m && m->job_key == job_key && m->dst_rank == me) {
                // A request may come from a peer the upper layer has not added
                // yet (it adds peers at their first send): accept it anyway.
                const bool request = m->type == wire::CmType::request;
                if (Endpoint* ep = module_.cm_endpoint(m->src_rank, request)) {
                    ConnState before = ep->connection().state();
                    ep->connection().receive(*m, now);
                    if (ep->connection().state() != before) module_.update_progress();
                }
            } else {
                module_.out().verbose(
                    20, "{}: dropped a connection message (malformed or not ours)", module_.name());
            }
        }
        (void)post_receive(idx);  // a slot short: the timers resend
    }
    return n > 0 ? n : 0;
}

bool ConnectionManager::tick(const EndpointTable& endpoints) noexcept {
    const std::uint64_t now = now_ms();
    bool changed = false;
    for (const auto& ep : endpoints.all()) {
        if (!ep->connection().waiting()) continue;
        ep->connection().tick(now);
        changed = changed || !ep->connection().waiting();
    }
    return changed;
}

}  // namespace transit::openib
