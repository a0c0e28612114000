// The full FIFO: descriptors the peer's FIFO had no room for wait in their
// endpoint's queue, and UCT's pending queue says when they can go.
//
// UCT's shared-memory transports refuse an active message when the peer's
// FIFO is full after re-reading its tail (a cache line the receiver writes).
// Retrying every message from the upper layer's queue re-reads that line each
// time and, when a later sendi finds room first, sends it ahead of the
// waiting ones.  Here the first refusal parks the endpoint with
// uct_ep_pending_add: from then on sendi refuses at once without asking UCT
// (the queue is not empty), send() appends, and UCT calls pending_cb from
// its own progress once the FIFO has room, which sends the queue in order.
#include "uct_module.hpp"

namespace transit::uct {

Status UctModule::enqueue(UctEndpoint* ep, UctFrag* f, btl::Tag tag) noexcept {
    f->queued_tag = tag;
    f->queued_status = Status::success;
    f->queued_ep = ep;
    ep->queued.push(f);
    ++frags_queued_;
    ++sends_queued_;
    ep->pending.module = this;
    ep->pending.req.func = &UctModule::pending_cb;
    while (!ep->pending_added) {
        const ucs_status_t s = uct_ep_pending_add(ep->ep, &ep->pending.req, 0);
        if (s == UCS_OK) {
            ep->pending_added = true;
            break;
        }
        // UCS_ERR_BUSY: room came meanwhile, so UCT will not call back: send
        // now.  Anything else (no pending queue): progress retries it.
        if (s != UCS_ERR_BUSY) {
            unparked_ = true;
            attention_ = true;
            break;
        }
        if (send_queued(*ep)) break;
    }
    return Status::success;
}

ucs_status_t UctModule::pending_cb(uct_pending_req_t* req) noexcept {
    auto* slot = reinterpret_cast<PendingSlot*>(req);
    auto* self = static_cast<UctModule*>(slot->module);
    UctEndpoint& ep = *slot->endpoint;
    const std::size_t before = self->frags_queued_;
    if (self->send_queued(ep)) {
        ep.pending_added = false;  // UCT drops the request on UCS_OK
        return UCS_OK;
    }
    // Some went: UCT keeps the request and calls again; none: it waits.
    return self->frags_queued_ < before ? UCS_INPROGRESS : UCS_ERR_NO_RESOURCE;
}

bool UctModule::send_queued(UctEndpoint& ep) noexcept {
    while (UctFrag* f = ep.queued.front()) {
        Gather g{wire(Kind::message, f->queued_tag), f->seg.addr,
                 static_cast<std::size_t>(f->seg.len)};
        const Status s = transmit(&ep, g);
        if (s == Status::out_of_resource) return false;
        ep.queued.pop();
        --frags_queued_;
        f->queued_status = s == Status::completed ? Status::success : s;
        done_frags_.push(f);
        attention_ = true;  // the callbacks run from attend(), outside UCT's progress
    }
    return true;
}

int UctModule::finish_queued() noexcept {
    int events = 0;
    while (!done_frags_.empty()) {
        UctFrag* f = done_frags_.pop();
        // Accepted with success: the callback comes, whatever the flags.
        if (f->cbfunc != nullptr) f->cbfunc(this, f->queued_ep, f, f->queued_status);
        if (f->flags & btl::des_flags::btl_ownership) frags_.put(f);
        ++events;
    }
    return events;
}

// Queues UCT took no pending request for (its pending_add failed): retried
// from attend() until they go.
int UctModule::retry_unparked() noexcept {
    unparked_ = false;
    int events = 0;
    const auto retry = [&](UctEndpoint* e) {
        if (e == nullptr || e->queued.empty() || e->pending_added || e->failed) return;
        const std::size_t before = frags_queued_;
        if (!send_queued(*e)) unparked_ = true;
        events += static_cast<int>(before - frags_queued_);
    };
    for (auto& e : by_rank_) retry(e.get());
    for (auto& e : dynamic_) retry(e.get());
    return events;
}

void UctModule::drop_queued(UctEndpoint& ep, Status status) noexcept {
    if (ep.pending_added && ep.ep != nullptr) uct_ep_pending_purge(ep.ep, forget_pending, nullptr);
    ep.pending_added = false;
    while (!ep.queued.empty()) {
        UctFrag* f = ep.queued.pop();
        --frags_queued_;
        f->queued_status = status;
        f->queued_ep = nullptr;  // it is going away
        done_frags_.push(f);
    }
    attention_ = true;
}

}  // namespace transit::uct
