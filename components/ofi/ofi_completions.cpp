// The completion queue of an ofi module.
#include "ofi_completions.hpp"

#include <rdma/fi_errno.h>

#include "ofi_fabric.hpp"
#include "ofi_module.hpp"
#include "ofi_one_sided.hpp"
#include "ofi_outside.hpp"
#include "ofi_status.hpp"

namespace transit::ofi {

int OfiCompletions::poll() noexcept {
    if (repost_head_ != nullptr) [[unlikely]]
        retry_reposts();
    // Entries are taken from a member batch one at a time: a callback that
    // drives progress (nested poll) continues with the next entry instead of
    // reading newer ones, so deliveries keep the order of the queue.
    int events = 0;
    if (batch_pos_ == batch_len_) {
        const ssize_t n = fi_cq_read(f_.cq.get(), batch_.data(), batch_.size());
        if (n == -FI_EAVAIL) {
            complete_error();
            return 1;
        }
        if (n <= 0) return 0;
        batch_pos_ = 0;
        batch_len_ = static_cast<std::size_t>(n);
    }
    while (batch_pos_ < batch_len_) {
        const fi_cq_msg_entry& e = batch_[batch_pos_++];
        complete(static_cast<OpContext*>(e.op_context), e.len);
        ++events;
    }
    return events;
}

void OfiCompletions::complete(OpContext* ctx, std::size_t len) noexcept {
    switch (ctx->kind) {
        case OpKind::recv:
            on_receive(static_cast<OfiRecv*>(ctx), len);
            return;
        case OpKind::send:
            m_.end_send(static_cast<OfiFrag*>(ctx), Status::success, nullptr);
            return;
        case OpKind::rdma:
            one_sided_.complete(static_cast<OfiRdma*>(ctx));
            return;
    }
}

void OfiCompletions::complete_error() noexcept {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(f_.cq.get(), &err, 0) <= 0) return;
    char text[256];
    const char* why = fi_cq_strerror(f_.cq.get(), err.prov_errno, err.err_data, text, sizeof text);
    const Status status = status_of_fi_error(err.err);
    auto* ctx = static_cast<OpContext*>(err.op_context);
    if (ctx == nullptr) {
        m_.report(btl::error_flags::nonfatal, any_rank, why);
        return;
    }
    switch (ctx->kind) {
        case OpKind::recv:
            if (status == Status::cancelled) return;  // the endpoint is closing
            m_.report(btl::error_flags::nonfatal, any_rank, why);
            repost(static_cast<OfiRecv*>(ctx));
            return;
        case OpKind::send:
            m_.end_send(static_cast<OfiFrag*>(ctx), status, why);
            return;
        case OpKind::rdma:
            one_sided_.fail(static_cast<OfiRdma*>(ctx), err.err, why);
            return;
    }
}

void OfiCompletions::on_receive(OfiRecv* r, std::size_t len) noexcept {
    WireHeader h;
    std::span<const std::byte> body;
    const Received what = read_message({r->buffer, r->size}, len, h, body);
    if (what != Received::message) [[unlikely]] {
        if (what == Received::join)
            outside_.on_join(h, body);
        else if ((h.flags & from_dynamic) && what != Received::too_short)
            outside_.on_dynamic_control(what, h);
        else
            on_control(what, h);
        repost(r);
        return;
    }
    OfiEndpoint* from;
    if (h.flags & from_dynamic) [[unlikely]] {
        // Named by its channel: a message on none we know (a refused client's,
        // or one sent before its goodbye was taken) is nobody's.
        from = outside_.by_channel(h.source);
        if (from == nullptr || from->failed) {
            out_.verbose(10, "{}: a message on an unknown channel dropped", m_.name());
            repost(r);
            return;
        }
    } else {
        from = m_.job_endpoint(h.source);
    }
    const btl::Segment seg{const_cast<std::byte*>(body.data()), body.size()};
    const btl::ReceiveDescriptor d{from, &seg, 1, h.tag};
    if (!am_table_.dispatch(&m_, d)) [[unlikely]]
        m_.report(btl::error_flags::nonfatal, h.source,
                  "ofi: a message for an unregistered tag was dropped");
    repost(r);
}

// Anything but a message of this version: goodbye, hello, or dropped.
// (`h` is unread when the message was too short.)
void OfiCompletions::on_control(Received what, const WireHeader& h) noexcept {
    switch (what) {
        case Received::goodbye:
        case Received::hello:
            if (OfiEndpoint* ep = m_.job_endpoint(h.source))
                ep->goodbye = what == Received::goodbye;
            return;
        case Received::too_short:
            m_.report(btl::error_flags::nonfatal, any_rank,
                      "ofi: a message shorter than its header");
            return;
        case Received::other_version:
            m_.report(btl::error_flags::nonfatal, h.source,
                      "ofi: a message of another wire version was dropped");
            return;
        case Received::join:
        case Received::welcome:
        case Received::refuse:
        case Received::unknown_kind:
        case Received::message:
            break;
    }
    m_.report(btl::error_flags::nonfatal, h.source,
              "ofi: a message of an unknown kind was dropped");
}

void OfiCompletions::repost(OfiRecv* r) noexcept {
    const ssize_t rc = fi_recv(f_.ep.get(), r->buffer, r->size, f_.recv_desc, FI_ADDR_UNSPEC,
                               static_cast<OpContext*>(r));
    if (rc == 0) return;
    if (rc != -FI_EAGAIN)
        m_.report(btl::error_flags::nonfatal, any_rank, "ofi: reposting a receive failed");
    // Retried from the next poll, so no receive buffer is lost.
    r->next_repost = repost_head_;
    repost_head_ = r;
}

void OfiCompletions::retry_reposts() noexcept {
    OfiRecv* list = repost_head_;
    repost_head_ = nullptr;
    while (list != nullptr) {
        OfiRecv* r = list;
        list = r->next_repost;
        r->next_repost = nullptr;
        repost(r);
    }
}

}  // namespace transit::ofi
