// What the ofi tests that drive a module against their own process share: the
// btl selection, the module's name for the provider the ctest entry chose
// (btl_ofi_provider_include), a fixture with the module reaching this process,
// and waiting for a one-sided operation to end.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/fixtures/rdma_outcome.hpp"
#include "tests/fixtures/two_rank_runtime.hpp"

namespace transit::test::ofi_loopback {

// Set before any test opens the framework.
[[maybe_unused]] inline const bool ofi_selected = [] {
    ::setenv("TRANSIT_MCA_btl", "self,ofi", 1);
    return true;
}();

inline std::string module_name() {
    const char* p = std::getenv("TRANSIT_MCA_btl_ofi_provider_include");
    const std::string provider = p != nullptr ? p : "shm";
    return "ofi:" + (provider == "tcp" ? std::string("tcp;ofi_rxm") : provider);
}

// The module of the chosen provider, which reaches this process as rank 0;
// the test skips when there is none.  A derived fixture calls SetUp() first
// and returns when it skipped or failed, and TearDown() last.
class LoopbackTest : public ::testing::Test {
  protected:
    void SetUp() override {
        opened_ = std::make_unique<Opened>(runtime_, module_name());
        if (opened_->module == nullptr) GTEST_SKIP() << "no " << module_name() << " module here";
        module_ = opened_->module;
        btl::Reachability reachable(1);
        ASSERT_EQ(module_->add_procs(self_, self_ep_, reachable), Status::success);
        if (!reachable.test(0)) GTEST_SKIP() << module_name() << " does not reach its own process";
    }
    void TearDown() override {
        if (module_ != nullptr) {
            EXPECT_TRUE(ok(module_->del_procs(self_, self_ep_)));
        }
    }
    bool ready() const { return module_ != nullptr && !IsSkipped() && !HasFailure(); }

    TwoRankRuntime runtime_;
    std::unique_ptr<Opened> opened_;
    btl::Module* module_ = nullptr;
    const std::vector<Rank> self_{0};
    std::vector<btl::Endpoint*> self_ep_ = std::vector<btl::Endpoint*>(1, nullptr);
};

// How an operation ended: started by `start` (again while the module has no
// room), its own status when refused at once, else the callback's; timeout
// when no callback came within `limit`.
template <typename Start>
Status ended(Start start, RdmaOutcome& o, ProgressEngine& progress,
             std::chrono::seconds limit = std::chrono::seconds(5)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    Status s;
    while ((s = start()) == Status::out_of_resource) {
        if (std::chrono::steady_clock::now() > end) return Status::timeout;
        progress.progress();
    }
    if (s == Status::completed) return Status::success;
    if (s != Status::success) return s;
    while (o.calls == 0) {
        if (std::chrono::steady_clock::now() > end) return Status::timeout;
        progress.progress();
    }
    EXPECT_EQ(o.calls, 1);
    return o.status;
}

}  // namespace transit::test::ofi_loopback
