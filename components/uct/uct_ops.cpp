// The one-sided operations of a uct module in flight (see uct_ops.hpp): by
// active messages, the initiator sends requests in pieces that fit one
// active message and the operation completes when every piece is answered;
// native ones complete by UCT's callback, or by the flush after a remote write.
#include "uct_ops.hpp"

#include <fmt/format.h>

#include <cstring>

#include "uct_module.hpp"
#include "uct_one_sided.hpp"

namespace transit::uct {

void UctOps::setup(std::size_t max_ops, std::size_t chunk) {
    chunk_ = chunk;
    ops_.setup({.initial = max_ops, .max = max_ops});
}

template <typename Request>
RdmaOp* UctOps::start_op(OpKind kind, const Request& req) noexcept {
    RdmaOp* op = ops_.get();
    if (op == nullptr) return nullptr;
    op->kind = kind;
    op->status = Status::success;
    op->endpoint = static_cast<UctEndpoint*>(req.endpoint);
    op->peer = req.endpoint->peer();
    op->local_address = req.local;
    op->local_handle = req.local_handle;
    op->cbfunc = req.cb;
    op->cbcontext = req.cbcontext;
    op->cbdata = req.cbdata;
    op->native = false;
    op->next_done = nullptr;
    op->sent = 0;
    op->issued = 0;
    op->answered = 0;
    op->pieces = 1;
    op->queued = false;
    op->next_queued = nullptr;
    return op;
}

// Sends the pieces not sent yet, until all are out or UCT has no room.
Status UctOps::advance(RdmaOp* op) noexcept {
    if (op->endpoint == nullptr) [[unlikely]]
        return Status::cancelled;
    while (op->issued < op->pieces) {
        Status s;
        std::uint64_t n = 0;
        const auto index = static_cast<std::uint32_t>(ops_.index(op));
        if (op->kind == OpKind::atomic) {
            const AtomicRequest req{index,
                                    op->generation,
                                    op->key,
                                    op->secret,
                                    op->remote_address,
                                    op->operand,
                                    op->compare,
                                    op->amo,
                                    static_cast<std::uint8_t>(op->mode),
                                    static_cast<std::uint8_t>(op->bits32 ? 1 : 0),
                                    0};
            Gather g{module_.wire(Kind::amo_req), &req, sizeof req};
            s = sender_.transmit(op->endpoint, g);
        } else {
            n = std::min<std::uint64_t>(chunk_, op->size - op->sent);
            const RdmaRequest req{
                index, op->generation, op->key, op->secret, op->remote_address + op->sent,
                n,     op->sent};
            if (op->kind == OpKind::put) {
                Gather g{module_.wire(Kind::put), &req, sizeof req,
                         static_cast<const std::byte*>(op->local_address) + op->sent, n};
                s = sender_.transmit(op->endpoint, g);
            } else {
                Gather g{module_.wire(Kind::get_req), &req, sizeof req};
                s = sender_.transmit(op->endpoint, g);
            }
        }
        if (s != Status::completed) return s;
        ++op->issued;
        op->sent += n;
    }
    return Status::success;
}

// Starts an operation: success (the callback comes from progress) or
// nothing happened (out_of_resource, errors).
Status UctOps::launch(RdmaOp* op) noexcept {
    const Status s = advance(op);
    if (s == Status::success) {
        ++ops_pending_;
        module_.update_progress();
        return Status::success;
    }
    if (op->issued == 0) {
        release_op(op);
        return s;
    }
    ++ops_pending_;
    if (s == Status::out_of_resource) {
        // Part of it is out: the rest goes from progress, in order.
        op->queued = true;
        waiting_ops_.push(op);
        module_.attend_soon();
    } else {
        op->status = s;
        op->pieces = op->issued;  // complete once the pieces already sent are answered
    }
    module_.update_progress();
    return Status::success;
}

int UctOps::retry() noexcept {
    int events = 0;
    while (!waiting_ops_.empty()) {
        RdmaOp* op = waiting_ops_.front();
        Status s = ok(op->status) ? advance(op) : op->status;
        if (s == Status::out_of_resource) break;
        waiting_ops_.pop();
        op->queued = false;
        ++events;
        if (s != Status::success) {
            if (ok(op->status)) op->status = s;
            op->pieces = op->issued;
            if (op->answered >= op->pieces) complete_op(op);
        }
    }
    return events;
}

void UctOps::answered(RdmaOp* op, Status s) noexcept {
    ++op->answered;
    if (!ok(s) && ok(op->status)) op->status = s;
    if (op->answered >= op->pieces && !op->queued) complete_op(op);
}

void UctOps::complete_op(RdmaOp* op) noexcept {
    // Copied out first: the callback may start another operation.
    const RdmaOp done = *op;
    release_op(op);
    if (--ops_pending_ == 0) one_sided_.set_cma_progress(false);
    if (done.cbfunc != nullptr)
        done.cbfunc(&module_, done.endpoint, done.local_address, done.local_handle, done.cbcontext,
                    done.cbdata, ok(done.status) ? Status::success : done.status);
}

RdmaOp* UctOps::find_op(std::uint32_t index, std::uint32_t generation, Rank peer) noexcept {
    if (index >= ops_.size()) return nullptr;
    RdmaOp& op = ops_.at(index);
    if (!op.in_use || op.generation != generation || op.peer != peer) return nullptr;
    return &op;
}

void UctOps::on_rdma_reply(Kind kind, Rank source, std::span<const std::byte> body) noexcept {
    RdmaReply r;
    std::span<const std::byte> data;
    if (!read_rdma_reply(body, r, data)) [[unlikely]] {
        module_.report(btl::error_flags::nonfatal, source, "uct: a short one-sided reply");
        return;
    }
    RdmaOp* op = find_op(r.op, r.generation, source);
    const OpKind want = kind == Kind::put_ack ? OpKind::put : OpKind::get;
    if (op == nullptr || op->kind != want) [[unlikely]] {
        out_.verbose(10, "{}: a reply from rank {} matches no operation (cancelled?)",
                     module_.name(), source);
        return;
    }
    auto status = status_from_wire(r.status);
    if (kind == Kind::get_rep && ok(status)) {
        if (!reply_fits(r, data.size(), op->size)) [[unlikely]]
            status = Status::protocol_error;
        else if (!data.empty())
            std::memcpy(static_cast<std::byte*>(op->local_address) + r.offset, data.data(),
                        data.size());
    }
    answered(op, status);
}

void UctOps::on_atomic_reply(Rank source, std::span<const std::byte> body) noexcept {
    AtomicReply r;
    if (!read_atomic_reply(body, r)) [[unlikely]] {
        module_.report(btl::error_flags::nonfatal, source, "uct: a short atomic reply");
        return;
    }
    RdmaOp* op = find_op(r.op, r.generation, source);
    if (op == nullptr || op->kind != OpKind::atomic) [[unlikely]] {
        out_.verbose(10, "{}: an atomic reply from rank {} matches no operation", module_.name(),
                     source);
        return;
    }
    const auto status = status_from_wire(r.status);
    if (ok(status) && op->mode != AtomicMode::post) {
        if (op->bits32) {
            const auto v = static_cast<std::uint32_t>(r.value);
            std::memcpy(op->local_address, &v, sizeof v);
        } else {
            std::memcpy(op->local_address, &r.value, sizeof r.value);
        }
    }
    answered(op, status);
}

// A slot for an operation UCT carries itself: it completes through `comp`.
template <typename Request>
RdmaOp* UctOps::start_native(OpKind kind, const Request& req) noexcept {
    RdmaOp* op = start_op(kind, req);
    if (op == nullptr) return nullptr;
    op->native = true;
    op->owner = this;
    op->comp.func = &UctOps::native_done_cb;
    op->comp.count = 1;
    op->comp.status = UCS_OK;
    return op;
}

void UctOps::release_op(RdmaOp* op) noexcept {
    ++op->generation;  // late completions for this slot no longer match
    ops_.put(op);
}

// An operation UCT reported in progress: its callback completes it
// (finish_native).
Status UctOps::in_flight() noexcept {
    ++ops_pending_;
    module_.update_progress();
    return Status::success;
}

// A remote write UCT accepted (a put, a posted atomic) is complete for the
// upper layer once it is at the target: when the flush after it says so (at
// once for cma, whose put is a system call, and for shared-memory atomics).
Status UctOps::complete_after_flush(RdmaOp* op) noexcept {
    ++ops_pending_;
    const Status f = native_flush(op);
    if (f == Status::completed) {
        release_op(op);
        if (--ops_pending_ == 0) one_sided_.set_cma_progress(false);
    }
    module_.update_progress();
    return f;
}

// The endpoint an operation went out on: atomics use the module's own
// interface, put/get the RDMA one (cma beside posix or sysv).
uct_ep_h UctOps::native_ep(const RdmaOp* op) noexcept {
    if (op->endpoint == nullptr) return nullptr;
    return op->kind == OpKind::atomic ? op->endpoint->ep : op->endpoint->rdma_ep;
}

// Flushes the operation's endpoint: completed (nothing outstanding), success
// (the callback comes), or queued for a retry from progress.  ops_pending_
// counts the operation already.
Status UctOps::native_flush(RdmaOp* op) noexcept {
    const ucs_status_t s = uct_ep_flush(native_ep(op), 0, &op->comp);
    if (s == UCS_OK) return Status::completed;
    if (s == UCS_INPROGRESS) return Status::success;
    if (s == UCS_ERR_NO_RESOURCE) {
        flushes_.push(op);
        module_.attend_soon();
        return Status::success;
    }
    // The put went out but cannot be confirmed: it ends with the error.
    op->status = module_.from_ucs(s, op->endpoint);
    mark_done(op);
    return Status::success;
}

int UctOps::retry_flushes() noexcept {
    int events = 0;
    while (!flushes_.empty()) {
        RdmaOp* op = flushes_.front();
        ucs_status_t s = UCS_ERR_CANCELED;
        if (uct_ep_h ep = native_ep(op)) s = uct_ep_flush(ep, 0, &op->comp);
        if (s == UCS_ERR_NO_RESOURCE) break;
        flushes_.pop();
        ++events;
        if (s == UCS_INPROGRESS) continue;  // the callback comes
        if (s != UCS_OK)
            op->status = op->endpoint ? module_.from_ucs(s, op->endpoint) : Status::cancelled;
        mark_done(op);
    }
    return events;
}

// From UCT's progress: noted, and reported once it returns (a callback may
// start operations or drive progress).
void UctOps::native_done_cb(uct_completion_t* comp) noexcept {
    auto* op = reinterpret_cast<RdmaOp*>(comp);  // comp is its first member
    auto* ops = static_cast<UctOps*>(op->owner);
    if (comp->status != UCS_OK) op->status = ops->module_.native_error(comp->status, op->endpoint);
    ops->mark_done(op);
}

void UctOps::mark_done(RdmaOp* op) noexcept {
    op->next_done = done_head_;
    done_head_ = op;
    module_.attend_soon();
}

int UctOps::finish_native() noexcept {
    int events = 0;
    while (done_head_ != nullptr) {
        RdmaOp* op = done_head_;
        done_head_ = op->next_done;
        op->next_done = nullptr;
        op->native = false;
        if (op->kind == OpKind::atomic && op->mode != AtomicMode::post && ok(op->status))
            std::memcpy(op->local_address, &op->result, op->bits32 ? 4 : 8);
        complete_op(op);
        ++events;
    }
    return events;
}

// The one-sided operations with `peer` end with `status` (a native one is
// UCT's until it calls back, with an error).
void UctOps::end_ops(Rank peer, Status status) noexcept {
    for (std::size_t k = 0; k < ops_.size(); ++k) {
        RdmaOp& op = ops_.at(k);
        if (op.in_use && op.peer == peer && !op.native) {
            op.status = status;
            op.answered = op.pieces;
            op.sent = op.size;
            op.issued = op.pieces;
            if (!op.queued) complete_op(&op);
        }
    }
}

template RdmaOp* UctOps::start_op(OpKind, const btl::RdmaRequest&) noexcept;
template RdmaOp* UctOps::start_op(OpKind, const btl::AtomicRequest&) noexcept;
template RdmaOp* UctOps::start_native(OpKind, const btl::RdmaRequest&) noexcept;
template RdmaOp* UctOps::start_native(OpKind, const btl::AtomicRequest&) noexcept;

bool UctOps::involves(Rank peer) const noexcept {
    for (std::size_t k = 0; k < ops_.size(); ++k)
        if (ops_.at(k).in_use && ops_.at(k).peer == peer) return true;
    return false;
}

void UctOps::forget(const UctEndpoint* e) noexcept {
    for (RdmaOp* op = waiting_ops_.front(); op != nullptr; op = op->next_queued)
        if (op->endpoint == e) op->status = Status::cancelled;
    for (std::size_t k = 0; k < ops_.size(); ++k)
        if (ops_.at(k).in_use && ops_.at(k).endpoint == e) ops_.at(k).endpoint = nullptr;
}

}  // namespace transit::uct
