// The RC completion queues of an openib module (openib_completions.hpp).
#include "openib_completions.hpp"

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

// --- sends and RDMA operations --------------------------------------------------------

int Completions::poll_sends() noexcept {
    ibv_wc wc[poll_batch];
    int n = ibv_poll_cq(module_.port().send_cq.get(), poll_batch, wc);
    for (int i = 0; i < n; ++i) {
        auto* f = reinterpret_cast<Frag*>(wc[i].wr_id);
        Endpoint* ep = f->endpoint;
        module_.send_queue().release(*ep);
        const Status s = wc_status(wc[i].status);
        if (wc[i].status != IBV_WC_SUCCESS && wc[i].status != IBV_WC_WR_FLUSH_ERR) {
            module_.out().verbose(1, "{}: peer {}: {}", module_.name(), ep->peer(),
                                  ibv_wc_status_str(wc[i].status));
            ep->connection().fail(ibv_wc_status_str(wc[i].status));
        }
        switch (f->kind) {
            case FragKind::send:
                complete_send(static_cast<SendFrag*>(f), s);
                break;
            case FragKind::rdma:
                module_.complete_rdma(static_cast<RdmaFrag*>(f), s);
                break;
            case FragKind::control:
            case FragKind::ud:
                break;
        }
        if (ep->has_pending() || ep->credits.credit_message_due() || ep->failed())
            module_.endpoints().attention(*ep);
        // The last flushed request of a dead QP: nothing left to poll for it.
        if (ep->failed() && ep->posted == 0) module_.update_progress();
    }
    return n > 0 ? n : 0;
}

void Completions::complete_send(SendFrag* f, Status s) noexcept {
    if (f->inline_done) {
        module_.fragments().put(f);
        return;
    }
    const bool owned = (f->flags & btl::des_flags::btl_ownership) != 0;
    if (f->cbfunc) f->cbfunc(&module_, f->endpoint, f, s);
    if (owned) module_.fragments().put(f);
}

// --- receives ------------------------------------------------------------------------

int Completions::poll_receives() noexcept {
    ibv_wc wc[poll_batch];
    int n = ibv_poll_cq(module_.port().recv_cq.get(), poll_batch, wc);
    for (int i = 0; i < n; ++i) handle_receive(wc[i]);
    return n > 0 ? n : 0;
}

void Completions::release_receive(Endpoint& ep, RecvFrag* r) noexcept {
    // The buffer goes back before the credit is owed: the peer may use the
    // credit as soon as it sees it.
    if (module_.receive_queue().repost(r)) ep.credits.on_buffer_reposted(false);
}

void Completions::handle_receive(const ibv_wc& wc) noexcept {
    auto* r = reinterpret_cast<RecvFrag*>(wc.wr_id);
    Endpoint* ep = module_.endpoints().on_qp(wc.qp_num);
    if (wc.status != IBV_WC_SUCCESS || ep == nullptr || ep->failed()) {
        if (ep && wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)
            ep->connection().fail(ibv_wc_status_str(wc.status));
        (void)module_.receive_queue().repost(r);
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
        module_.out().verbose(1, "{}: peer {}: {}", module_.name(), ep->peer(), violation);
        (void)module_.receive_queue().repost(r);
        ep->connection().fail(violation);
        return;
    }
    if (h->type == wire::FragType::credit) {
        if (module_.receive_queue().repost(r)) ep->credits.on_buffer_reposted(true);
        module_.endpoints().attention(*ep);
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
        module_.endpoints().attention(*ep);
        return;
    }
    deliver(*ep, *h, payload);
    release_receive(*ep, r);
    module_.endpoints().attention(*ep);
}

bool Completions::deliver(Endpoint& ep, const wire::FragHeader& h,
                          std::span<const std::byte> payload) noexcept {
    if (h.type == wire::FragType::atomic_reply) {
        auto reply = wire::decode_atomic_reply(payload);
        if (!reply) {
            ep.connection().fail("malformed atomic reply");
            return false;
        }
        module_.remote_atomics().finish(ep, *reply);
        return true;
    }
    return module_.dispatch(ep, h.tag, payload);
}

// Performs a peer's atomic and queues the answer; false when no fragment is free
// for the answer (the request waits, nothing is performed yet).
bool Completions::answer_atomic(Endpoint& ep, RecvFrag* r) noexcept {
    SendFrag* s = module_.fragments().take_send();
    if (!s) return false;
    wire::AtomicReply reply;
    auto req = wire::decode_atomic_request(
        std::span<const std::byte>(r->buffer, r->length).subspan(wire::FragHeader::size));
    if (req) {
        reply.request_id = req->request_id;
        module_.remote_atomics().perform(ep, *req, reply);
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
    if (!ok(module_.submit(ep, s))) module_.fragments().put(s);
    if (!req) ep.connection().fail("malformed atomic request");
    return true;
}

}  // namespace transit::openib
