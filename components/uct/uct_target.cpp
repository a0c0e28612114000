// The target side of the uct module's one-sided operations: requests checked
// against the registrations, performed, and answered (see uct_target.hpp).
#include "uct_target.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "uct_module.hpp"

namespace transit::uct {

void UctTarget::setup(std::size_t max_rdma_ops, std::size_t chunk) {
    chunk_ = chunk;
    // Replies outnumber operations only when a peer floods: twice is plenty,
    // and a full pool only delays reading requests.
    const std::size_t replies = std::max<std::size_t>(2 * max_rdma_ops, 16);
    replies_.setup({.initial = replies, .max = replies});
}

void UctTarget::serve(Kind kind, Rank source, std::span<const std::byte> body) noexcept {
    if (!answerable(body)) [[unlikely]] {
        module_.report(btl::error_flags::nonfatal, source,
                       "uct: a one-sided request too short to name its operation");
        return;
    }
    if (kind == Kind::put)
        on_put(source, body);
    else if (kind == Kind::get_req)
        on_get(source, body);
    else
        on_atomic(source, body);
}

void UctTarget::forget(Rank peer) noexcept {
    for (PendingReply* r = waiting_replies_.front(); r != nullptr; r = r->next_queued)
        if (r->peer == peer) r->peer = any_rank;  // dropped by the next retry
}

Status UctTarget::permits(const btl::util::RegistrationKey& key, std::uint64_t address,
                          std::uint64_t length, std::uint32_t access) const noexcept {
    const std::optional<Region> r = regions_.find(key);
    if (!r) return Status::not_found;
    return btl::range_permits(r->base, r->len, r->access, address, length, access);
}

// Each handler below answers every request long enough to name its
// operation (answerable), with the refusal's status when it is refused, so the
// initiator's operation ends with that error instead of waiting for good.

void UctTarget::refused(const char* what, Rank source, std::uint64_t address, Status why) noexcept {
    rdma_refusals_.refused(out_, module_.name(), to_string(why), "{} at 0x{:x} from rank {}", what,
                           address, source);
}

void UctTarget::on_put(Rank source, std::span<const std::byte> body) noexcept {
    RdmaRequest req;
    std::span<const std::byte> data;
    Status s = read_put(body, req, data);
    if (ok(s))
        s = permits({req.key, req.secret}, req.address, data.size(), btl::reg_flags::remote_write);
    if (ok(s) && !data.empty())
        std::memcpy(reinterpret_cast<void*>(static_cast<std::uintptr_t>(req.address)), data.data(),
                    data.size());
    if (!ok(s)) refused("a put", source, req.address, s);
    PendingReply* r = replies_.get();  // handle() checked that one is free
    r->kind = Kind::put_ack;
    r->peer = source;
    r->rdma = RdmaReply{req.op, req.generation, static_cast<std::int32_t>(s), 0, req.offset, 0};
    r->data = nullptr;
    reply(*r);
}

void UctTarget::on_get(Rank source, std::span<const std::byte> body) noexcept {
    RdmaRequest req;
    Status s = read_get(body, chunk_, req);
    if (ok(s))
        s = permits({req.key, req.secret}, req.address, req.length, btl::reg_flags::remote_read);
    if (!ok(s)) refused("a get", source, req.address, s);
    PendingReply* r = replies_.get();
    r->kind = Kind::get_rep;
    r->peer = source;
    r->rdma = RdmaReply{req.op, req.generation, static_cast<std::int32_t>(s),
                        0,      req.offset,     ok(s) ? req.length : 0};
    r->data =
        ok(s) ? reinterpret_cast<const void*>(static_cast<std::uintptr_t>(req.address)) : nullptr;
    reply(*r);
}

void UctTarget::on_atomic(Rank source, std::span<const std::byte> body) noexcept {
    AtomicRequest req;
    Status s = read_atomic(body, req);
    std::uint64_t old = 0;
    if (ok(s))
        s = permits({req.key, req.secret}, req.address, atomic_width(req),
                    btl::reg_flags::remote_atomic);
    if (ok(s)) {
        void* target = reinterpret_cast<void*>(static_cast<std::uintptr_t>(req.address));
        const int flags = req.bits32 ? btl::atomic_flags::bits32 : 0;
        old = static_cast<AtomicMode>(req.mode) == AtomicMode::cswap
                  ? btl::apply_cswap(target, req.compare, req.operand, flags)
                  : btl::apply_atomic(target, static_cast<btl::AtomicOp>(req.amo), req.operand,
                                      flags);
    }
    if (!ok(s)) refused("an atomic", source, req.address, s);
    PendingReply* r = replies_.get();
    r->kind = Kind::amo_rep;
    r->peer = source;
    r->atomic = AtomicReply{req.op, req.generation, static_cast<std::int32_t>(s), 0, old};
    r->data = nullptr;
    reply(*r);
}

Status UctTarget::send_reply(PendingReply& r) noexcept {
    UctEndpoint* ep = r.peer == any_rank ? nullptr : module_.peer_endpoint(r.peer);
    if (ep == nullptr) return Status::unreachable;
    switch (r.kind) {
        case Kind::get_rep: {
            Gather g{module_.wire(Kind::get_rep), &r.rdma, sizeof r.rdma, r.data,
                     static_cast<std::size_t>(r.rdma.length)};
            return sender_.transmit(ep, g);
        }
        case Kind::amo_rep: {
            Gather g{module_.wire(Kind::amo_rep), &r.atomic, sizeof r.atomic};
            return sender_.transmit(ep, g);
        }
        default: {
            Gather g{module_.wire(Kind::put_ack), &r.rdma, sizeof r.rdma};
            return sender_.transmit(ep, g);
        }
    }
}

void UctTarget::reply(PendingReply& r) noexcept {
    // Behind earlier replies waiting for room, so the peer's queue is not overtaken.
    const Status s = waiting_replies_.empty() ? send_reply(r) : Status::out_of_resource;
    if (s == Status::out_of_resource) {
        waiting_replies_.push(&r);
        module_.attend_soon();
        module_.update_progress();
        return;
    }
    if (s != Status::completed)
        out_.verbose(10, "{}: a reply to rank {} was not sent: {}", module_.name(), r.peer,
                     to_string(s));
    replies_.put(&r);
}

int UctTarget::retry() noexcept {
    int events = 0;
    while (!waiting_replies_.empty()) {
        PendingReply* r = waiting_replies_.front();
        const Status s = send_reply(*r);
        if (s == Status::out_of_resource) break;
        waiting_replies_.pop();
        if (s != Status::completed)
            out_.verbose(10, "{}: a reply to rank {} was not sent: {}", module_.name(), r->peer,
                         to_string(s));
        replies_.put(r);
        ++events;
    }
    return events;
}

}  // namespace transit::uct
