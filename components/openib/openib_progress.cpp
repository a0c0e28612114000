// Completions and events: the RC send and receive queues, the UD connection
// manager, the device's async events, and the endpoints that need attention
// (queued work, credits to return, a failure to report).
#include <cerrno>
#include <chrono>
#include <cstring>

#include "openib_module.hpp"

namespace transit::openib {

int Module::progress_rc(void* self) noexcept {
    auto* m = static_cast<Module*>(self);
    int n = m->completions_.poll_sends() + m->completions_.poll_receives();
    // During a handshake the connection manager runs at full rate too.
    if (m->waiting_endpoints_ > 0) {
        n += m->cm_.poll(m->job_key_, m->runtime_.rank());
        if (m->cm_.tick(m->endpoints_)) m->update_progress();
    }
    if (m->endpoints_.needs_attention()) m->service_attention();
    return n;
}

int Module::progress_cm(void* self) noexcept {
    auto* m = static_cast<Module*>(self);
    int n = m->cm_.poll(m->job_key_, m->runtime_.rank()) + m->device_->poll_events();
    if (m->waiting_endpoints_ > 0 && m->cm_.tick(m->endpoints_)) m->update_progress();
    if (m->endpoints_.needs_attention()) m->service_attention();
    return n;
}

bool Module::dispatch(Endpoint& ep, btl::Tag tag, std::span<const std::byte> payload) noexcept {
    btl::Segment seg{const_cast<std::byte*>(payload.data()), payload.size()};
    btl::ReceiveDescriptor d{&ep, &seg, 1, tag};
    if (am_table_.dispatch(this, d)) return true;
    out_.verbose(1, "{}: peer {} sent tag {:#x}, which nobody registered", name(), ep.peer(), tag);
    report_error(btl::error_flags::nonfatal, ep.peer(), "message for an unregistered tag");
    return false;
}

// --- RDMA completions (Completions, OneSided, RemoteAtomics) ------------------------

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

// --- connection manager ----------------------------------------------------------------

Endpoint* Module::cm_endpoint(Rank peer, bool request) noexcept {
    if (Endpoint* known = endpoints_.find(peer)) return known;
    if (!request) return nullptr;
    try {
        return endpoint_for(peer);
    } catch (const std::exception& e) {
        out_.verbose(1, "{}: no endpoint for connecting peer {}: {}", name(), peer, e.what());
        return nullptr;
    }
}

// --- endpoint state ----------------------------------------------------------------------

void Module::endpoint_connected(Endpoint& ep) noexcept {
    out_.verbose(10, "{}: peer {} connected (QP {:#x} <-> {:#x}, {} credits each way)", name(),
                 ep.peer(), ep.connection().local().qpn, ep.connection().remote().qpn,
                 ep.credits.send_credits());
    endpoints_.attention(ep);
    update_progress();
}

void Module::endpoint_failed(Endpoint& ep, const char* reason) noexcept {
    if (!ep.error_reported) out_.verbose(1, "{}: peer {}: {}", name(), ep.peer(), reason);
    endpoints_.attention(ep);
    update_progress();
}

void Module::fail_pending(Endpoint& ep) noexcept {
    while (ep.has_pending()) {
        Frag* f = ep.pending_front();
        ep.pop_pending();
        if (f->kind == FragKind::send)
            completions_.complete_send(static_cast<SendFrag*>(f), Status::peer_failed);
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
    Endpoint* list = endpoints_.take_attention();
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
            if (!completions_.answer_atomic(ep, r)) break;
            ep.deferred_head = r->next;
            if (!ep.deferred_head) ep.deferred_tail = nullptr;
        }
        send_queue_.drain(ep);
        // Still blocked on a shared resource (fragments, CQ room): look again next time.
        if (ep.usable() && (ep.has_pending() || ep.deferred_head)) endpoints_.attention(ep);
    }
    if (failures) update_progress();
}

// --- async events ----------------------------------------------------------------------

void Module::on_async_event(const ibv_async_event& e) noexcept {
    auto fail_all = [&](const char* why) {
        for (const auto& ep : endpoints_.all()) ep->connection().fail(why);
    };
    switch (e.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR:
        case IBV_EVENT_COMM_EST: {
            Endpoint* ep = endpoints_.on_qp(e.element.qp->qp_num);
            if (ep == nullptr) return;
            if (e.event_type == IBV_EVENT_COMM_EST)
                ep->connection().fragment_arrived();
            else
                ep->connection().fail(ibv_event_type_str(e.event_type));
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
