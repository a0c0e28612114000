// One-sided operations of the uct module, performed by the target: the
// initiator sends requests in pieces that fit one active message, the target
// checks the registration (key, bounds, access), reads, writes or applies the
// atomic, and answers; the operation completes when every piece is answered.
#include <fmt/format.h>

#include <cstring>

#include "transit/btl/util/atomic_width.hpp"
#include "uct_module.hpp"

namespace transit::uct {

// --- initiator -------------------------------------------------------------------

Status UctModule::check_remote(const btl::RegistrationHandle* handle, std::uint64_t address,
                               std::size_t size, std::uint32_t access,
                               PackedHandle& p) const noexcept {
    if (handle == nullptr) [[unlikely]]
        return Status::bad_param;
    std::memcpy(&p, handle, sizeof p);
    if (p.magic != handle_magic && p.magic != native_handle_magic) [[unlikely]]
        return Status::bad_param;
    return btl::range_permits(p.base, p.len, p.access, address, size, access);
}

template <typename Request>
RdmaOp* UctModule::start_op(OpKind kind, const Request& req) noexcept {
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

template RdmaOp* UctModule::start_op(OpKind, const btl::RdmaRequest&) noexcept;
template RdmaOp* UctModule::start_op(OpKind, const btl::AtomicRequest&) noexcept;

// Sends the pieces not sent yet, until all are out or UCT has no room.
Status UctModule::advance(RdmaOp* op) noexcept {
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
            Gather g{wire(Kind::amo_req), &req, sizeof req};
            s = transmit(op->endpoint, g);
        } else {
            n = std::min<std::uint64_t>(chunk_, op->size - op->sent);
            const RdmaRequest req{
                index, op->generation, op->key, op->secret, op->remote_address + op->sent,
                n,     op->sent};
            if (op->kind == OpKind::put) {
                Gather g{wire(Kind::put), &req, sizeof req,
                         static_cast<const std::byte*>(op->local_address) + op->sent, n};
                s = transmit(op->endpoint, g);
            } else {
                Gather g{wire(Kind::get_req), &req, sizeof req};
                s = transmit(op->endpoint, g);
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
Status UctModule::launch(RdmaOp* op) noexcept {
    const Status s = advance(op);
    if (s == Status::success) {
        ++ops_pending_;
        update_progress();
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
        attention_ = true;
    } else {
        op->status = s;
        op->pieces = op->issued;  // complete once the pieces already sent are answered
    }
    update_progress();
    return Status::success;
}

int UctModule::retry_ops() noexcept {
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

void UctModule::answered(RdmaOp* op, Status s) noexcept {
    ++op->answered;
    if (!ok(s) && ok(op->status)) op->status = s;
    if (op->answered >= op->pieces && !op->queued) complete_op(op);
}

void UctModule::complete_op(RdmaOp* op) noexcept {
    // Copied out first: the callback may start another operation.
    const RdmaOp done = *op;
    release_op(op);
    if (--ops_pending_ == 0) set_cma_progress(false);
    if (done.cbfunc != nullptr)
        done.cbfunc(this, done.endpoint, done.local_address, done.local_handle, done.cbcontext,
                    done.cbdata, ok(done.status) ? Status::success : done.status);
}

RdmaOp* UctModule::find_op(std::uint32_t index, std::uint32_t generation, Rank peer) noexcept {
    if (index >= ops_.size()) return nullptr;
    RdmaOp& op = ops_.at(index);
    if (!op.in_use || op.generation != generation || op.peer != peer) return nullptr;
    return &op;
}

// Put and get differ only in the size limit, the access the remote
// registration must grant, and (in advance) which way the data goes.
Status UctModule::transfer(OpKind kind, const btl::RdmaRequest& req) noexcept {
    const bool put = kind == OpKind::put;
    const std::size_t limit = put ? attr_.put_limit : attr_.get_limit;
    if (!valid(req.endpoint) || (req.size > 0 && req.local == nullptr) || req.size > limit)
        [[unlikely]]
        return Status::bad_param;
    PackedHandle p;
    const std::uint32_t access = put ? btl::reg_flags::remote_write : btl::reg_flags::remote_read;
    if (Status s = check_remote(req.remote_handle, req.remote, req.size, access, p);
        s != Status::success) [[unlikely]]
        return s;
    if ((put ? native_put_ : native_get_) && req.size >= native_min_ &&
        p.magic == native_handle_magic) {
        if (req.size == 0) return Status::completed;
        const Status s = native_transfer(kind, req, p.key);
        if (s != Status::not_available) return s;
    }
    RdmaOp* op = start_op(kind, req);
    if (op == nullptr) return Status::out_of_resource;
    op->key = p.key;
    op->secret = p.secret;
    op->remote_address = req.remote;
    op->size = req.size;
    op->pieces = req.size == 0 ? 1 : static_cast<std::uint32_t>((req.size + chunk_ - 1) / chunk_);
    return launch(op);
}

Status UctModule::put(const btl::RdmaRequest& req) noexcept {
    return transfer(OpKind::put, req);
}

Status UctModule::get(const btl::RdmaRequest& req) noexcept {
    return transfer(OpKind::get, req);
}

Status UctModule::atomic_common(const btl::AtomicRequest& req, AtomicMode mode) noexcept {
    if (!valid(req.endpoint) || (mode != AtomicMode::post && req.local == nullptr) ||
        (mode != AtomicMode::cswap && !btl::is_atomic_op(static_cast<std::uint16_t>(req.op))))
        [[unlikely]]
        return Status::bad_param;
    const bool bits32 = (req.flags & btl::atomic_flags::bits32) != 0;
    const std::size_t width = btl::util::atomic_width(req.flags);
    if (req.remote % width != 0) [[unlikely]]
        return Status::bad_param;
    PackedHandle p;
    if (Status s =
            check_remote(req.remote_handle, req.remote, width, btl::reg_flags::remote_atomic, p);
        s != Status::success) [[unlikely]]
        return s;
    if (native_amo_ && p.magic == native_handle_magic) {
        const Status s = native_atomic(req, p.key, mode);
        if (s != Status::not_available) return s;
    }
    RdmaOp* op = start_op(OpKind::atomic, req);
    if (op == nullptr) return Status::out_of_resource;
    op->key = p.key;
    op->secret = p.secret;
    op->remote_address = req.remote;
    op->size = 0;
    op->mode = mode;
    op->bits32 = bits32;
    op->amo = static_cast<std::uint16_t>(req.op);
    op->operand = req.operand;
    op->compare = req.compare;
    return launch(op);
}

Status UctModule::atomic_op(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_op(req), AtomicMode::post);
}

Status UctModule::atomic_fop(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_fop(req), AtomicMode::fetch);
}

Status UctModule::atomic_cswap(const btl::AtomicRequest& req) noexcept {
    return atomic_common(btl::as_atomic_cswap(req), AtomicMode::cswap);
}

void UctModule::on_rdma_reply(Kind kind, Rank source, std::span<const std::byte> body) noexcept {
    RdmaReply r;
    std::span<const std::byte> data;
    if (!read_rdma_reply(body, r, data)) [[unlikely]] {
        report_error(btl::error_flags::nonfatal, source, "uct: a short one-sided reply");
        return;
    }
    RdmaOp* op = find_op(r.op, r.generation, source);
    const OpKind want = kind == Kind::put_ack ? OpKind::put : OpKind::get;
    if (op == nullptr || op->kind != want) [[unlikely]] {
        out_.verbose(10, "{}: a reply from rank {} matches no operation (cancelled?)", name(),
                     source);
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

void UctModule::on_atomic_reply(Rank source, std::span<const std::byte> body) noexcept {
    AtomicReply r;
    if (!read_atomic_reply(body, r)) [[unlikely]] {
        report_error(btl::error_flags::nonfatal, source, "uct: a short atomic reply");
        return;
    }
    RdmaOp* op = find_op(r.op, r.generation, source);
    if (op == nullptr || op->kind != OpKind::atomic) [[unlikely]] {
        out_.verbose(10, "{}: an atomic reply from rank {} matches no operation", name(), source);
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

// --- registration ----------------------------------------------------------------

btl::RegistrationHandle* UctModule::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                 std::uint32_t flags) {
    if (base == nullptr && size > 0) return nullptr;
    const auto addr = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base));
    Registration* reg = regions_->add({addr, size, flags});
    if (reg == nullptr) {
        out_.verbose(5, "{}: register_mem: no room for another registration ({} live)", name(),
                     regions_->live_count());
        return nullptr;
    }
    register_native(*reg, base, size);
    return reinterpret_cast<btl::RegistrationHandle*>(reg->packed.data());
}

Status UctModule::deregister_mem(btl::RegistrationHandle* handle) {
    Registration* reg = regions_->live(handle);
    if (reg == nullptr) return Status::not_found;
    regions_->remove(*reg);
    return Status::success;
}

}  // namespace transit::uct
