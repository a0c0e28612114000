// The completion queue of an ofi module.
#include "ofi_completions.hpp"

#include <rdma/fi_errno.h>

#include "ofi_module.hpp"
#include "ofi_status.hpp"

namespace transit::ofi {

// True when an abandoned send's completion came: it is only freed (if its
// owner gave it up or never owned it).
bool OfiCompletions::send_finished(OfiFrag* f) noexcept {
    f->posted = false;
    if (!f->abandoned) [[likely]]
        return false;
    f->abandoned = false;
    const bool owned_here =
        f->internal || f->freed_early || (f->flags & btl::des_flags::btl_ownership);
    f->freed_early = false;
    if (owned_here) m_.release_frag(f);
    return true;
}

int OfiCompletions::poll() noexcept {
    if (m_.repost_head_ != nullptr) [[unlikely]]
        retry_reposts();
    // Entries are taken from a member batch one at a time: a callback that
    // drives progress (nested poll) continues with the next entry instead of
    // reading newer ones, so deliveries keep the order of the queue.
    int events = 0;
    if (m_.batch_pos_ == m_.batch_len_) {
        const ssize_t n = fi_cq_read(m_.cq_.get(), m_.batch_.data(), m_.batch_.size());
        if (n == -FI_EAVAIL) {
            complete_error();
            return 1;
        }
        if (n <= 0) return 0;
        m_.batch_pos_ = 0;
        m_.batch_len_ = static_cast<std::size_t>(n);
    }
    while (m_.batch_pos_ < m_.batch_len_) {
        const fi_cq_msg_entry& e = m_.batch_[m_.batch_pos_++];
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
        case OpKind::send: {
            auto* f = static_cast<OfiFrag*>(ctx);
            --m_.sends_pending_;
            if (send_finished(f)) return;
            send_done(f, Status::success);
            return;
        }
        case OpKind::rdma: {
            auto* op = static_cast<OfiRdma*>(ctx);
            // Copied out first: the callback may start another operation.
            const OfiRdma done = *op;
            if (!retire_rdma(op)) return;
            call_back(done, Status::success);
            return;
        }
    }
}

// A one-sided operation the provider completed (or failed): its temporary
// registration and record go back.  False when its peer was lost before: the
// caller was called back then, and is not again.
bool OfiCompletions::retire_rdma(OfiRdma* op) noexcept {
    const bool abandoned = op->abandoned;
    if (op->temp_registration != nullptr)
        m_.rcache_.release(static_cast<CacheEntry*>(op->temp_registration));
    op->temp_registration = nullptr;
    if (!abandoned) m_.end_live(*op);
    m_.rdma_.put(op);
    --m_.rdma_pending_;
    return !abandoned;
}

// A user's send the provider completed (or failed) is called back, and freed
// when the module owns it; an internal one (sendi's copy, a hello) is freed.
void OfiCompletions::send_done(OfiFrag* f, Status status) noexcept {
    if (f->internal) {
        m_.release_frag(f);
        return;
    }
    const std::uint32_t flags = f->flags;  // the callback may reuse the descriptor
    if (f->cbfunc != nullptr) f->cbfunc(&m_, f->endpoint, f, status);
    if (flags & btl::des_flags::btl_ownership) m_.release_frag(f);
}

void OfiCompletions::call_back(const OfiRdma& op, Status status) noexcept {
    if (op.cbfunc != nullptr)
        op.cbfunc(&m_, op.endpoint, op.local_address, op.local_handle, op.cbcontext, op.cbdata,
                  status);
}

void OfiCompletions::complete_error() noexcept {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(m_.cq_.get(), &err, 0) <= 0) return;
    char text[256];
    const char* why = fi_cq_strerror(m_.cq_.get(), err.prov_errno, err.err_data, text, sizeof text);
    const Status status = status_of_fi_error(err.err);
    auto* ctx = static_cast<OpContext*>(err.op_context);
    if (ctx == nullptr) {
        m_.report_error(btl::error_flags::nonfatal, any_rank, why);
        return;
    }
    switch (ctx->kind) {
        case OpKind::recv:
            if (status == Status::cancelled) return;  // the endpoint is closing
            m_.report_error(btl::error_flags::nonfatal, any_rank, why);
            repost(static_cast<OfiRecv*>(ctx));
            return;
        case OpKind::send: {
            auto* f = static_cast<OfiFrag*>(ctx);
            --m_.sends_pending_;
            if (send_finished(f)) return;
            if (f->internal && f->endpoint == nullptr) {  // a goodbye or hello
                m_.release_frag(f);
                return;
            }
            const Rank peer = f->endpoint ? f->endpoint->peer() : any_rank;
            m_.report_error(btl::error_flags::nonfatal, peer, why);
            send_done(f, status);
            return;
        }
        case OpKind::rdma: {
            auto* op = static_cast<OfiRdma*>(ctx);
            const OfiRdma done = *op;
            if (!retire_rdma(op)) return;
            m_.out_.verbose(10, "{}: one-sided operation with rank {} failed (error {}): {}",
                            m_.name(), done.peer, err.err, why);
            call_back(done, status_of_rdma_failure(err.err));
            return;
        }
    }
}

void OfiCompletions::on_receive(OfiRecv* r, std::size_t len) noexcept {
    WireHeader h;
    std::span<const std::byte> body;
    const Received what = read_message({r->buffer, r->size}, len, h, body);
    if (what != Received::message) [[unlikely]] {
        if (what == Received::join)
            m_.outside_.on_join(h, body);
        else if ((h.flags & from_dynamic) && what != Received::too_short)
            m_.outside_.on_dynamic_control(what, h);
        else
            on_control(what, h);
        repost(r);
        return;
    }
    OfiEndpoint* from;
    if (h.flags & from_dynamic) [[unlikely]] {
        // Named by its channel: a message on none we know (a refused client's,
        // or one sent before its goodbye was taken) is nobody's.
        const auto it = m_.channels_.find(h.source);
        if (it == m_.channels_.end() || it->second->failed) {
            m_.out_.verbose(10, "{}: a message on an unknown channel dropped", m_.name());
            repost(r);
            return;
        }
        from = it->second;
    } else {
        from = h.source < m_.by_rank_.size() ? m_.by_rank_[h.source].get() : nullptr;
    }
    const btl::Segment seg{const_cast<std::byte*>(body.data()), body.size()};
    const btl::ReceiveDescriptor d{from, &seg, 1, h.tag};
    if (!m_.am_table_.dispatch(&m_, d)) [[unlikely]]
        m_.report_error(btl::error_flags::nonfatal, h.source,
                        "ofi: a message for an unregistered tag was dropped");
    repost(r);
}

// Anything but a message of this version: goodbye, hello, or dropped.
// (`h` is unread when the message was too short.)
void OfiCompletions::on_control(Received what, const WireHeader& h) noexcept {
    switch (what) {
        case Received::goodbye:
        case Received::hello:
            if (h.source < m_.by_rank_.size() && m_.by_rank_[h.source])
                m_.by_rank_[h.source]->goodbye = what == Received::goodbye;
            return;
        case Received::too_short:
            m_.report_error(btl::error_flags::nonfatal, any_rank,
                            "ofi: a message shorter than its header");
            return;
        case Received::other_version:
            m_.report_error(btl::error_flags::nonfatal, h.source,
                            "ofi: a message of another wire version was dropped");
            return;
        case Received::join:
        case Received::welcome:
        case Received::refuse:
        case Received::unknown_kind:
        case Received::message:
            break;
    }
    m_.report_error(btl::error_flags::nonfatal, h.source,
                    "ofi: a message of an unknown kind was dropped");
}

void OfiCompletions::repost(OfiRecv* r) noexcept {
    const ssize_t rc = fi_recv(m_.ep_.get(), r->buffer, r->size, m_.recv_desc_, FI_ADDR_UNSPEC,
                               static_cast<OpContext*>(r));
    if (rc == 0) return;
    if (rc != -FI_EAGAIN)
        m_.report_error(btl::error_flags::nonfatal, any_rank, "ofi: reposting a receive failed");
    // Retried from the next poll, so no receive buffer is lost.
    r->next_repost = m_.repost_head_;
    m_.repost_head_ = r;
}

void OfiCompletions::retry_reposts() noexcept {
    OfiRecv* list = m_.repost_head_;
    m_.repost_head_ = nullptr;
    while (list != nullptr) {
        OfiRecv* r = list;
        list = r->next_repost;
        r->next_repost = nullptr;
        repost(r);
    }
}

}  // namespace transit::ofi
