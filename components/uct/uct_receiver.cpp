// The receive side of a uct module (see uct_receiver.hpp): UCT's AM handler,
// the receive ring and the delivery of what waits in it.
#include "uct_receiver.hpp"

#include <span>

#include "uct_module.hpp"

namespace transit::uct {

// Inlined into am_cb: the header stays in registers on the way to the callback.
[[gnu::always_inline]] inline void UctReceiver::dispatch(const WireHeader& h, const std::byte* body,
                                                         std::size_t len) noexcept {
    UctEndpoint* from =
        h.source < by_rank_.size() ? by_rank_[h.source].get() : outside_.endpoint(h.source);
    const btl::Segment seg{const_cast<std::byte*>(body), len};
    const btl::ReceiveDescriptor d{from, &seg, 1, h.tag};
    if (!am_table_.dispatch(&module_, d)) [[unlikely]]
        drop_unregistered(h.source);
}

void UctReceiver::drop_unregistered(Rank source) noexcept {
    module_.report(btl::error_flags::nonfatal, source,
                   "uct: a message for an unregistered tag was dropped");
}

[[gnu::always_inline]] inline bool UctReceiver::deliver_now(const std::byte* data,
                                                            std::size_t length) noexcept {
    WireHeader h;
    std::span<const std::byte> body;
    // A peer outside the job names itself by a channel: handle() renames it.
    if (!read_message({data, length}, h, body) || static_cast<Kind>(h.kind) != Kind::message ||
        h.version != wire_version || h.source >= by_rank_.size()) [[unlikely]]
        return false;
    dispatch(h, body.data(), body.size());
    return true;
}

ucs_status_t UctReceiver::am_cb(void* arg, void* data, std::size_t length, unsigned) noexcept {
    auto* r = static_cast<UctReceiver*>(arg);
    // A message with nothing queued before it is delivered from UCT's own
    // buffer, saving a copy and a second pass.  Its handler cannot re-enter
    // UCT's progress (poll() refuses while the flag is up), as with vader's
    // boxes.  This is the one place UCT's progress runs code of ours that may
    // call back in (completions and errors are only noted, for attend()), so
    // the flag is raised here rather than around every poll of UCT.
    if (r->ring_.empty()) [[likely]] {
        r->in_callback_ = true;
        const bool delivered = r->deliver_now(static_cast<const std::byte*>(data), length);
        r->in_callback_ = false;
        if (delivered) [[likely]]
            return UCS_OK;
    }
    r->queue_reception(data, length);
    return UCS_OK;
}

void UctReceiver::queue_reception(const void* data, std::size_t length) noexcept {
    bool stored = false;
    try {
        stored = ring_.push(data, length);
    } catch (...) {
        stored = false;  // growing the ring failed: out of memory
    }
    if (!stored) [[unlikely]]
        ++dropped_;
    module_.attend_soon();
}

int UctReceiver::deliver() noexcept {
    int events = 0;
    while (!ring_.empty()) {
        std::size_t length = 0;
        const std::byte* data = ring_.front(length);
        ring_.enter();
        const bool consumed = handle(data, length);
        ring_.leave();
        if (!consumed) break;  // a request waits for a free reply slot
        ++events;
    }
    return events;
}

bool UctReceiver::handle(const std::byte* data, std::size_t length) noexcept {
    WireHeader h;
    std::span<const std::byte> message{data, length}, body;
    if (!read_message(message, h, body)) [[unlikely]] {
        ring_.pop();
        module_.report(btl::error_flags::nonfatal, any_rank,
                       "uct: a message shorter than a header");
        return true;
    }
    const auto kind = static_cast<Kind>(h.kind);
    if (h.version != wire_version) [[unlikely]] {
        ring_.pop();
        module_.report(btl::error_flags::nonfatal, h.source, "uct: a message of another version");
        return true;
    }
    if (h.source >= by_rank_.size()) [[unlikely]] {
        if (kind == Kind::join && h.source == join_source) {
            ring_.pop();
            outside_.handle_join(body);
            return true;
        }
        if (!outside_.rename_source(h)) {
            ring_.pop();
            return true;
        }
        if (kind == Kind::welcome) {
            ring_.pop();
            outside_.handle_welcome(h, body);
            return true;
        }
    }
    switch (kind) {
        case Kind::message: {
            ring_.pop();  // before the callback: a nested delivery takes the next one
            dispatch(h, body.data(), body.size());
            return true;
        }
        case Kind::put:
        case Kind::get_req:
        case Kind::amo_req: {
            if (!target_.can_answer()) return false;
            ring_.pop();
            target_.serve(kind, h.source, body);
            return true;
        }
        case Kind::put_ack:
        case Kind::get_rep:
            ring_.pop();
            ops_.on_rdma_reply(kind, h.source, body);
            return true;
        case Kind::amo_rep:
            ring_.pop();
            ops_.on_atomic_reply(h.source, body);
            return true;
        case Kind::goodbye:
            ring_.pop();
            if (h.source >= by_rank_.size()) {
                outside_.goodbye(h.source);
                return true;
            }
            // Unless its hello came first (over another connection).
            if (h.source < by_rank_.size() && by_rank_[h.source] &&
                farewells_.goodbye_counts(h.source, h.tag))
                by_rank_[h.source]->goodbye = true;
            return true;
        case Kind::hello:
            ring_.pop();
            if (h.source < by_rank_.size()) {
                farewells_.heard_hello(h.source, h.tag);
                if (by_rank_[h.source]) by_rank_[h.source]->goodbye = false;
            }
            return true;
        case Kind::join:
        case Kind::welcome:
            break;  // from a job peer, or a join naming a source: not ours to take
    }
    ring_.pop();
    module_.report(btl::error_flags::nonfatal, h.source, "uct: a message of an unknown kind");
    return true;
}

void UctReceiver::report_dropped() noexcept {
    if (dropped_ == 0) return;
    dropped_ = 0;
    module_.report(btl::error_flags::nonfatal, any_rank,
                   "uct: a message larger than the transport's limit was dropped");
}

}  // namespace transit::uct
