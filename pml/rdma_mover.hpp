// The rdma of a rendezvous: the receiver's gets and the sender's puts of a
// split move [rdma_offset, rdma_end) of a request the same way, in pieces of
// the module's limit.  Each side passes the callback that ends its own half
// (Receiver::get_done, Sender::put_done); both start with rdma_piece_done.
#pragma once

#include <cstdint>

#include "pml/core.hpp"

namespace transit::pml {

enum class RdmaIssue : std::uint8_t {
    issued,   // every piece went (or the transfer ended with an error in r's status)
    blocked,  // the transport has no room: call again from progress
    refused,  // a get refused before anything moved: stream the data instead
};

// Issues r's pieces from rdma_offset on: gets for a receive, puts for a send.
// `done` runs with `context` for each piece the transport answers later.
RdmaIssue issue_rdma(Req* r, btl::RdmaCompletionFn done, void* context) noexcept;

// One piece of r answered with s: true when it was the last one and the
// issuing loop is over, so the caller ends its half.
inline bool rdma_piece_done(Req* r, Status s) noexcept {
    if (!ok(s)) [[unlikely]]
        Core::transfer_failed(r, s);
    else if (r->peer)
        r->peer->watch.heard = true;  // as a fragment taken (Sender::frag_done)
    return --r->rdma_pending == 0 && !r->issuing && r->rdma_offset >= r->rdma_end;
}

}  // namespace transit::pml
