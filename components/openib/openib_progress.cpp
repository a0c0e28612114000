// Completions and events: the RC send and receive queues, the UD connection
// manager, the device's async events, and the endpoints that need attention
// (queued work, credits to return, a failure to report).
#include <cerrno>
#include <chrono>
#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

namespace {

constexpr int poll_batch = 16;

Status wc_status(ibv_wc_status s) noexcept {
    switch (s) {
        case IBV_WC_SUCCESS:
            return Status::success;
        case IBV_WC_REM_ACCESS_ERR:
            return Status::access_denied;
        case IBV_WC_LOC_PROT_ERR:
        case IBV_WC_LOC_LEN_ERR:
        case IBV_WC_REM_INV_REQ_ERR:
            return Status::bad_param;
        default:
            return Status::peer_failed;
    }
}

}  // namespace

int Module::progress_rc(void* self) noexcept {
    auto* m = static_cast<Module*>(self);
    int n = m->poll_send_cq() + m->poll_recv_cq();
    // During a handshake the connection manager runs at full rate too.
    if (m->waiting_endpoints_ > 0) {
        n += m->cm_.poll(m->job_key_, m->runtime_.rank());
        m->tick_connections();
    }
    if (m->attention_head_) m->service_attention();
    return n;
}

int Module::progress_cm(void* self) noexcept {
    auto* m = static_cast<Module*>(self);
    int n = m->cm_.poll(m->job_key_, m->runtime_.rank()) + m->device_->poll_events();
    m->tick_connections();
    if (m->attention_head_) m->service_attention();
    return n;
}

// --- sends ---------------------------------------------------------------------------

int Module::poll_send_cq() noexcept {
    ibv_wc wc[poll_batch];
    int n = ibv_poll_cq(port_.send_cq.get(), poll_batch, wc);
    for (int i = 0; i < n; ++i) {
        auto* f = reinterpret_cast<Frag*>(wc[i].wr_id);
        Endpoint* ep = f->endpoint;
        send_queue_.release(*ep);
        const Status s = wc_status(wc[i].status);
        if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR) {
            out_.verbose(1, "{}: peer {}: {}", name(), ep->peer(), ibv_wc_status_str(wc[i].status));
            ep->connection().fail(ibv_wc_status_str(wc[i].status));
        }
        switch (f->kind) {
            case FragKind::send:
                complete_send(static_cast<SendFrag*>(f), s);
                break;
            case FragKind::rdma:
                complete_rdma(static_cast<RdmaFrag*>(f), s);
                break;
            case FragKind::control:
            case FragKind::ud:
                break;
        }
        if (ep->has_pending() || ep->credits.credit_message_due() || ep->failed()) attention(*ep);
        // The last flushed request of a dead QP: nothing left to poll for it.
        if (ep->failed() && ep->posted == 0) update_progress();
    }
    return n > 0 ? n : 0;
}

void Module::complete_send(SendFrag* f, Status s) noexcept {
    if (f->inline_done) {
        frags_.put(f);
        return;
    }
    const bool owned = (f->flags & btl::des_flags::btl_ownership) != 0;
    if (f->cbfunc) f->cbfunc(this, f->endpoint, f, s);
    if (owned) frags_.put(f);
}

void Module::complete_rdma(RdmaFrag* f, Status s) noexcept {
    Endpoint* ep = f->endpoint;
    if (ep && ep->rdma_in_flight > 0) --ep->rdma_in_flight;
    btl::RdmaCompletionFn cb = f->cbfunc;
    void* local = f->op == RdmaOp::hw_fetch_add && atomics_.is_scratch(f->local_address)
                      ? nullptr
                      : f->local_address;
    btl::RegistrationHandle* handle = f->local_handle;
    void* cbcontext = f->cbcontext;
    void* cbdata = f->user_cbdata;
    // Back to the pool first: the callback may start the next operation.
    frags_.put(f);
    if (cb) cb(this, ep, local, handle, cbcontext, cbdata, s);
}

// --- receives ------------------------------------------------------------------------

int Module::poll_recv_cq() noexcept {
    ibv_wc wc[poll_batch];
    int n = ibv_poll_cq(port_.recv_cq.get(), poll_batch, wc);
    for (int i = 0; i < n; ++i) handle_receive(wc[i]);
    return n > 0 ? n : 0;
}

void Module::release_receive(Endpoint& ep, RecvFrag* r) noexcept {
    // The buffer goes back before the credit is owed: the peer may use the
    // credit as soon as it sees it.
    if (receive_queue_.repost(r)) ep.credits.on_buffer_reposted(false);
}

void Module::handle_receive(const ibv_wc& wc) noexcept {
    auto* r = reinterpret_cast<RecvFrag*>(wc.wr_id);
    auto it = by_qpn_.find(wc.qp_num);
    Endpoint* ep = it == by_qpn_.end() ? nullptr : it->second;
    if (wc.status != IBV_WC_SUCCESS || ep == nullptr || ep->failed()) {
        if (ep && wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)
            ep->connection().fail(ibv_wc_status_str(wc.status));
        (void)receive_queue_.repost(r);
        return;
    }
    const std::span<const std::byte> data(r->buffer, wc.byte_len);
    auto h = wire::decode_frag(data);
    const char* violation = nullptr;
    ep->connection().fragment_arrived();
    if (!h) {
        violation = "malformed fragment header";
    } else {
        const bool credit_only = h->type == wire::FragType::credit;
        if (!ep->credits.on_arrival(credit_only))
            violation = "peer sent beyond its credits";
        else if (!ep->credits.on_header(h->credits,
                                        (h->flags & wire::frag_flags::returns_control) != 0))
            violation = "peer returned credits it never had";
    }
    if (violation) {
        out_.verbose(1, "{}: peer {}: {}", name(), ep->peer(), violation);
        (void)receive_queue_.repost(r);
        ep->connection().fail(violation);
        return;
    }
    if (h->type == wire::FragType::credit) {
        if (receive_queue_.repost(r)) ep->credits.on_buffer_reposted(true);
        attention(*ep);
        return;
    }
    const auto payload = data.subspan(wire::FragHeader::size);
    if (h->type == wire::FragType::atomic_request) {
        r->length = wc.byte_len;
        if (ep->deferred_head || !answer_atomic(*ep, r)) {
            r->next = nullptr;
            if (ep->deferred_tail)
                ep->deferred_tail->next = r;
            else
                ep->deferred_head = r;
            ep->deferred_tail = r;
        }
        attention(*ep);
        return;
    }
    deliver(*ep, *h, payload);
    release_receive(*ep, r);
    attention(*ep);
}

bool Module::deliver(Endpoint& ep, const wire::FragHeader& h,
                     std::span<const std::byte> payload) noexcept {
    if (h.type == wire::FragType::atomic_reply) {
        auto reply = wire::decode_atomic_reply(payload);
        if (!reply) {
            ep.connection().fail("malformed atomic reply");
            return false;
        }
        atomics_.finish(ep, *reply);
        return true;
    }
    btl::Segment seg{const_cast<std::byte*>(payload.data()), payload.size()};
    btl::ReceiveDescriptor d{&ep, &seg, 1, h.tag};
    if (!am_table_.dispatch(this, d)) {
        out_.verbose(1, "{}: peer {} sent tag {:#x}, which nobody registered", name(), ep.peer(),
                     h.tag);
        report_error(btl::error_flags::nonfatal, ep.peer(), "message for an unregistered tag");
        return false;
    }
    return true;
}

// Performs a peer's atomic and queues the answer; false when no fragment is free
// for the answer (the request waits, nothing is performed yet).
bool Module::answer_atomic(Endpoint& ep, RecvFrag* r) noexcept {
    SendFrag* s = frags_.take_send();
    if (!s) return false;
    wire::AtomicReply reply;
    auto req = wire::decode_atomic_request(
        std::span<const std::byte>(r->buffer, r->length).subspan(wire::FragHeader::size));
    if (req) {
        reply.request_id = req->request_id;
        atomics_.perform(ep, *req, reply);
    } else {
        reply.status = static_cast<std::int32_t>(Status::protocol_error);
    }
    release_receive(ep, r);
    wire::encode(reply, s->buffer + wire::FragHeader::size);
    s->segment.addr = s->buffer + wire::FragHeader::size;
    s->segment.len = wire::AtomicReply::size;
    s->type = wire::FragType::atomic_reply;
    s->tag = 0;
    s->flags = btl::des_flags::btl_ownership;
    s->inline_done = true;
    if (!ok(submit(ep, s))) frags_.put(s);
    if (!req) ep.connection().fail("malformed atomic request");
    return true;
}

// --- connection manager ----------------------------------------------------------------

Endpoint* Module::cm_endpoint(Rank peer, bool request) noexcept {
    if (auto it = by_rank_.find(peer); it != by_rank_.end()) return it->second;
    if (!request) return nullptr;
    try {
        return endpoint_for(peer);
    } catch (const std::exception& e) {
        out_.verbose(1, "{}: no endpoint for connecting peer {}: {}", name(), peer, e.what());
        return nullptr;
    }
}

void Module::tick_connections() noexcept {
    if (waiting_endpoints_ == 0) return;
    const std::uint64_t now = now_ms();
    bool changed = false;
    for (auto& ep : endpoints_) {
        if (!ep->connection().waiting()) continue;
        ep->connection().tick(now);
        changed = changed || !ep->connection().waiting();
    }
    if (changed) update_progress();
}

// --- endpoint state ----------------------------------------------------------------------

void Module::endpoint_connected(Endpoint& ep) noexcept {
    out_.verbose(10, "{}: peer {} connected (QP {:#x} <-> {:#x}, {} credits each way)", name(),
                 ep.peer(), ep.connection().local().qpn, ep.connection().remote().qpn,
                 ep.credits.send_credits());
    attention(ep);
    update_progress();
}

void Module::endpoint_failed(Endpoint& ep, const char* reason) noexcept {
    if (!ep.error_reported) out_.verbose(1, "{}: peer {}: {}", name(), ep.peer(), reason);
    attention(ep);
    update_progress();
}

void Module::fail_pending(Endpoint& ep) noexcept {
    while (ep.has_pending()) {
        Frag* f = ep.pending_front();
        ep.pop_pending();
        if (f->kind == FragKind::send)
            complete_send(static_cast<SendFrag*>(f), Status::peer_failed);
        else
            complete_rdma(static_cast<RdmaFrag*>(f), Status::peer_failed);
    }
    // Emulated atomics whose reply will never come.
    for (RdmaFrag& f : frags_.rdma_items())
        if (f.in_use && f.endpoint == &ep && f.op == RdmaOp::emulated_atomic)
            complete_rdma(&f, Status::peer_failed);
    while (RecvFrag* r = ep.deferred_head) {
        ep.deferred_head = r->next;
        (void)receive_queue_.repost(r);
    }
    ep.deferred_tail = nullptr;
}

void Module::service_attention() noexcept {
    Endpoint* list = attention_head_;
    attention_head_ = nullptr;
    bool failures = false;
    while (list) {
        Endpoint& ep = *list;
        list = ep.attention_next;
        ep.on_attention = false;
        ep.attention_next = nullptr;
        if (ep.failed()) {
            failures = true;
            fail_pending(ep);
            if (!ep.error_reported) {
                ep.error_reported = true;
                report_error(btl::error_flags::nonfatal, ep.peer(), ep.connection().failure());
            }
            continue;
        }
        while (RecvFrag* r = ep.deferred_head) {
            if (!answer_atomic(ep, r)) break;
            ep.deferred_head = r->next;
            if (!ep.deferred_head) ep.deferred_tail = nullptr;
        }
        send_queue_.drain(ep);
        // Still blocked on a shared resource (fragments, CQ room): look again next time.
        if (ep.usable() && (ep.has_pending() || ep.deferred_head)) attention(ep);
    }
    if (failures) update_progress();
}

// --- async events ----------------------------------------------------------------------

void Module::on_async_event(const ibv_async_event& e) noexcept {
    auto fail_all = [&](const char* why) {
        for (auto& ep : endpoints_) ep->connection().fail(why);
    };
    switch (e.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_COMM_EST: {
            auto it = by_qpn_.find(e.element.qp->qp_num);
            if (it == by_qpn_.end()) return;
            if (e.event_type == IBV_EVENT_COMM_EST)
                it->second->connection().fragment_arrived();
            else
                it->second->connection().fail(ibv_event_type_str(e.event_type));
            return;
        }
        case IBV_EVENT_PORT_ERR:
            if (e.element.port_num != port_.number) return;
            port_down_ = true;
            out_.verbose(1, "{}: port went down", name());
            fail_all("the local port went down");
            report_error(btl::error_flags::fatal, any_rank, "InfiniBand/RoCE port went down");
            return;
        case IBV_EVENT_PORT_ACTIVE:
            if (e.element.port_num == port_.number)
                out_.verbose(1, "{}: port is active again", name());
            return;
        case IBV_EVENT_SRQ_LIMIT_REACHED:
            if (e.element.srq == port_.srq.get()) receive_queue_.refill();
            return;
        case IBV_EVENT_SRQ_ERR:
            if (e.element.srq != port_.srq.get()) return;
            [[fallthrough]];
        case IBV_EVENT_CQ_ERR:
            if (e.event_type == IBV_EVENT_CQ_ERR && e.element.cq != port_.send_cq.get() &&
                e.element.cq != port_.recv_cq.get() && !cm_.owns(e.element.cq))
                return;
            [[fallthrough]];
        case IBV_EVENT_DEVICE_FATAL:
            port_down_ = true;
            out_.verbose(1, "{}: {}", name(), ibv_event_type_str(e.event_type));
            fail_all(ibv_event_type_str(e.event_type));
            report_error(btl::error_flags::fatal, any_rank, ibv_event_type_str(e.event_type));
            return;
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
            if (e.element.port_num == port_.number)
                out_.verbose(10, "{}: {}", name(), ibv_event_type_str(e.event_type));
            return;
        default:
            return;
    }
}

}  // namespace transit::openib
