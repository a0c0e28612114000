// The full FIFO: messages the peer's FIFO (or UCT's socket) had no room for
// wait in their endpoint's queue and go in order.
//
// UCT's shared-memory transports refuse an active message when the peer's
// FIFO is full after re-reading its tail (a cache line the receiver writes).
// The queue is tried once per send or sendi to that peer (its head first:
// one read of the tail when the FIFO is still full) and once per progress
// pass, so a message goes as soon as there is room, never ahead of one that
// waits; and the upper layer never sees the full FIFO while a fragment is
// free (sendi copies the message into the queue).
#include "uct_send_queue.hpp"

#include "uct_module.hpp"

namespace transit::uct {

Status UctSendQueue::enqueue(UctEndpoint* ep, UctFrag* f, btl::Tag tag) noexcept {
    f->queued_tag = tag;
    f->queued_status = Status::success;
    f->queued_ep = ep;
    if (!ep->waiting) {
        ep->waiting = true;
        ep->next_waiting = waiting_eps_;
        waiting_eps_ = ep;
    }
    ep->queued.push(f);
    ++frags_queued_;
    ++sends_queued_;
    module_.attend_soon();  // progress retries the queue
    return Status::success;
}

bool UctSendQueue::send_queued(UctEndpoint& ep) noexcept {
    while (UctFrag* f = ep.queued.front()) {
        Gather g{module_.wire(Kind::message, f->queued_tag), f->seg.addr,
                 static_cast<std::size_t>(f->seg.len)};
        const Status s = sender_.transmit(&ep, g);
        if (s == Status::out_of_resource) {
            ++queue_retries_;
            return false;
        }
        ep.queued.pop();
        --frags_queued_;
        f->queued_status = s == Status::completed ? Status::success : s;
        done_frags_.push(f);
        module_.attend_soon();  // the callbacks run from attend(), never inside a send
    }
    return true;
}

// From attend(): every endpoint with messages waiting, once; an endpoint
// whose queue emptied leaves the list.
int UctSendQueue::retry() noexcept {
    const std::size_t before = frags_queued_;
    UctEndpoint** link = &waiting_eps_;
    while (UctEndpoint* e = *link) {
        if (!e->queued.empty() && !e->failed) send_queued(*e);
        if (e->queued.empty()) {
            *link = e->next_waiting;
            e->next_waiting = nullptr;
            e->waiting = false;
        } else {
            link = &e->next_waiting;
        }
    }
    return static_cast<int>(before - frags_queued_);
}

int UctSendQueue::finish() noexcept {
    int events = 0;
    while (!done_frags_.empty()) {
        UctFrag* f = done_frags_.pop();
        // Accepted with success: the callback comes, whatever the flags.
        if (f->cbfunc != nullptr) f->cbfunc(&module_, f->queued_ep, f, f->queued_status);
        if (f->flags & btl::des_flags::btl_ownership) frags_.put(f);
        ++events;
    }
    return events;
}

void UctSendQueue::drop(UctEndpoint& ep, Status status) noexcept {
    while (!ep.queued.empty()) {
        UctFrag* f = ep.queued.pop();
        --frags_queued_;
        f->queued_status = status;
        f->queued_ep = nullptr;  // it is going away
        done_frags_.push(f);
    }
    // Off the waiting list now: the endpoint may be freed before the next pass.
    for (UctEndpoint** link = &waiting_eps_; *link != nullptr; link = &(*link)->next_waiting)
        if (*link == &ep) {
            *link = ep.next_waiting;
            ep.next_waiting = nullptr;
            ep.waiting = false;
            break;
        }
    module_.attend_soon();
}

void UctSendQueue::discard_done() noexcept {
    while (!done_frags_.empty()) {
        UctFrag* f = done_frags_.pop();
        if (f->flags & btl::des_flags::btl_ownership) frags_.put(f);
    }
}

}  // namespace transit::uct
