// What a libfabric error means to the pml: a connection that went away is the
// peer's failure (the pml promises peer_failed for every request with a lost
// peer), a refusal by the target keeps its own meaning, and anything else is a
// plain error, never success.
#include <gtest/gtest.h>

#include "components/ofi/ofi_status.hpp"

namespace {

using transit::Status;
using transit::ofi::status_of_fi_error;
using transit::ofi::status_of_rdma_failure;

TEST(OfiStatus, AConnectionThatWentAwayIsThePeersFailure) {
    for (int err : {FI_ECONNRESET, FI_ECONNABORTED, FI_ECONNREFUSED, FI_ENOTCONN, FI_ESHUTDOWN,
                    FI_EHOSTDOWN, FI_EHOSTUNREACH, FI_ENETUNREACH, FI_ENETDOWN})
        EXPECT_EQ(status_of_fi_error(err), Status::peer_failed) << fi_strerror(err);
}

TEST(OfiStatus, TheTargetsRefusalKeepsItsMeaning) {
    EXPECT_EQ(status_of_fi_error(FI_EACCES), Status::access_denied);
    EXPECT_EQ(status_of_fi_error(FI_EKEYREJECTED), Status::access_denied);
    EXPECT_EQ(status_of_fi_error(FI_EINVAL), Status::bad_param);
    EXPECT_EQ(status_of_fi_error(FI_ETRUNC), Status::truncated);
    EXPECT_EQ(status_of_fi_error(FI_EOPNOTSUPP), Status::not_supported);
    EXPECT_EQ(status_of_fi_error(FI_EAGAIN), Status::out_of_resource);
}

TEST(OfiStatus, AnythingElseIsAnErrorNeverSuccess) {
    for (int err : {0, FI_EIO, FI_ENOMEM, static_cast<int>(FI_EOTHER), 12345})
        EXPECT_EQ(status_of_fi_error(err), Status::error) << err;
    EXPECT_EQ(status_of_rdma_failure(0), Status::error);
}

// The module never cancels a one-sided operation; the provider flushes the
// ones in flight when the connection closes under them.
TEST(OfiStatus, AOneSidedOperationFlushedByTheProviderIsThePeersFailure) {
    EXPECT_EQ(status_of_rdma_failure(FI_ECANCELED), Status::peer_failed);
    EXPECT_EQ(status_of_fi_error(FI_ECANCELED), Status::cancelled);  // a receive: closing
    EXPECT_EQ(status_of_rdma_failure(FI_EACCES), Status::access_denied);
}

}  // namespace
