// Issuing a request's rdma in pieces (rdma_mover.hpp).
#include "pml/rdma_mover.hpp"

#include <algorithm>

namespace transit::pml {

// Moves [rdma_offset, rdma_end) of r by gets (the receiver) or puts (the
// sender's half of a split), in pieces of the module's limit.  An error ends
// the transfer with that status, except a get the transport refuses before
// anything moved: the caller then streams the data instead.
RdmaIssue issue_rdma(Req* r, btl::RdmaCompletionFn done, void* context) noexcept {
    const bool put = r->kind == Req::Kind::send;
    const auto& a = r->rdma.module->attributes();
    const std::size_t cap = put ? a.put_limit : a.get_limit;
    const std::size_t limit = cap ? cap : r->rdma_end;
    auto* rh = reinterpret_cast<const btl::RegistrationHandle*>(r->remote_handle.data());
    RdmaIssue result = RdmaIssue::issued;
    r->issuing = true;
    while (r->rdma_offset < r->rdma_end) {
        const std::size_t chunk = std::min(r->rdma_end - r->rdma_offset, limit);
        void* local = static_cast<std::byte*>(r->buf) + r->rdma_offset;
        const std::uint64_t remote = r->remote_addr + r->rdma_offset;
        ++r->rdma_pending;
        const btl::RdmaRequest req{.endpoint = r->rdma.endpoint,
                                   .local = local,
                                   .remote = remote,
                                   .local_handle = r->local_handle,
                                   .remote_handle = rh,
                                   .size = chunk,
                                   .cb = done,
                                   .cbcontext = context,
                                   .cbdata = r};
        const Status s = put ? r->rdma.rdma->put(req) : r->rdma.rdma->get(req);
        if (s != Status::success) --r->rdma_pending;  // no callback will come
        if (s == Status::success || s == Status::completed) {
            r->rdma_offset += chunk;
            continue;
        }
        if (s == Status::out_of_resource) {
            result = RdmaIssue::blocked;
            break;
        }
        // Not once the sender was asked to put half: it is already doing so.
        if (!put && r->rdma_offset == 0 && r->rdma_pending == 0 && r->rdma_end == r->st().length) {
            result = RdmaIssue::refused;
            break;
        }
        r->st().status = s;  // a sender's failed put reaches the receiver in split_fin
        r->rdma_offset = r->rdma_end;
    }
    r->issuing = false;
    return result;
}

}  // namespace transit::pml
