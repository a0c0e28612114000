// A uct module that cannot reach a peer says why (btl::UnreachedReason), so
// the bml's explanation names the cause and not only the failure: a peer
// that published no address, one whose address is malformed; and the reason
// goes once the peer is reached.
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/fixtures/two_rank_runtime.hpp"

namespace {

using namespace transit;
using transit::test::Opened;
using transit::test::TwoRankRuntime;

// The selection must be in the environment before the registry first reads it.
[[maybe_unused]] const bool posix_selected = [] {
    ::setenv("TRANSIT_MCA_btl", "self,uct", 1);
    ::setenv("TRANSIT_MCA_btl_uct_transports", "posix", 1);
    return true;
}();

class UctUnreached : public ::testing::Test {
  protected:
    void SetUp() override {
        opened_ = std::make_unique<Opened>(runtime_, "uct:posix/memory");
        if (opened_->module == nullptr) GTEST_SKIP() << "no uct:posix/memory module here";
        reasons_ = btl::capability<btl::UnreachedReason>(*opened_->module);
        ASSERT_NE(reasons_, nullptr) << "the module gives no reasons";
    }
    void TearDown() override {
        if (opened_ && opened_->module) (void)opened_->module->del_procs(peers_, endpoints_);
    }
    // Adds both ranks; whether rank 1 was reached.
    bool add_rank1() {
        btl::Reachability reachable(peers_.size());
        EXPECT_EQ(opened_->module->add_procs(peers_, endpoints_, reachable), Status::success);
        return reachable.test(1);
    }

    TwoRankRuntime runtime_;
    std::unique_ptr<Opened> opened_;
    btl::UnreachedReason* reasons_ = nullptr;
    const std::vector<Rank> peers_{0, 1};
    std::vector<btl::Endpoint*> endpoints_ = std::vector<btl::Endpoint*>(2, nullptr);
};

TEST_F(UctUnreached, PeerWithoutAddressSaysSo) {
    ASSERT_FALSE(add_rank1());
    const std::string why = reasons_->unreached_reason(1);
    EXPECT_NE(why.find("published no posix address"), std::string::npos) << why;
    EXPECT_EQ(reasons_->unreached_reason(0), "") << "rank 0 (itself) was reached";
}

TEST_F(UctUnreached, MalformedAddressSaysSoAndTheReasonGoesOnceReached) {
    runtime_.modex_[{1, "btl.uct.posix"}] = std::vector<std::byte>(3, std::byte{0x7f});
    ASSERT_FALSE(add_rank1());
    const std::string why = reasons_->unreached_reason(1);
    EXPECT_NE(why.find("its address (3 bytes)"), std::string::npos) << why;
    // Rank 1 publishes a real address (our own: the same transport) and is
    // reached: nothing is left to explain.
    runtime_.modex_[{1, "btl.uct.posix"}] = runtime_.modex_.at({0, "btl.uct.posix"});
    ASSERT_TRUE(add_rank1());
    EXPECT_EQ(reasons_->unreached_reason(1), "");
}

}  // namespace
