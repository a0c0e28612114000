// What a libfabric error number means to the layer above: the Status an ofi
// module reports for a failed call or completion.  Needs only fi_errno.h, so
// the mapping is tested without a provider (tests/ofi/test_ofi_status.cpp).
#pragma once

#include <rdma/fi_errno.h>

#include "transit/status.hpp"

namespace transit::ofi {

// err is positive (a completion's fi_cq_err_entry::err, or -rc of a call).
constexpr Status status_of_fi_error(int err) noexcept {
    switch (err) {
        case FI_EAGAIN:
            return Status::out_of_resource;
        case FI_ECANCELED:
            return Status::cancelled;
        case FI_EACCES:
        case FI_EPERM:
        case FI_EKEYREJECTED:
            return Status::access_denied;
        case FI_EINVAL:
            return Status::bad_param;
        case FI_ETRUNC:
            return Status::truncated;
        case FI_ENOSYS:
        case FI_EOPNOTSUPP:
            return Status::not_supported;
        // The connection to the peer is gone, and what it carried with it: the
        // peer died or cannot be reached, which the caller must hear as such.
        case FI_ECONNRESET:
        case FI_ECONNABORTED:
        case FI_ECONNREFUSED:
        case FI_ENOTCONN:
        case FI_ESHUTDOWN:
        case FI_EHOSTDOWN:
        case FI_EHOSTUNREACH:
        case FI_ENETUNREACH:
        case FI_ENETDOWN:
            return Status::peer_failed;
        default:
            return Status::error;
    }
}

// A one-sided operation's failed completion.  The module never cancels one, so
// a cancelled one was flushed by the provider when its connection closed (the
// tcp provider does so when the peer's socket goes away): the peer is lost.
constexpr Status status_of_rdma_failure(int err) noexcept {
    const Status s = status_of_fi_error(err);
    if (s == Status::cancelled) return Status::peer_failed;
    return ok(s) ? Status::error : s;
}

}  // namespace transit::ofi
