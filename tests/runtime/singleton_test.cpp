// A process started with no launcher is a job of one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/runtime.hpp"

namespace {

using namespace transit;

// ctest may itself run under a launcher: forget it, as a process started by
// hand would not have it.
class Singleton : public ::testing::Test {
  protected:
    void SetUp() override {
        std::vector<std::string> names;
        for (char** e = environ; *e; ++e)
            if (std::strncmp(*e, "PMIX_", 5) == 0)
                names.emplace_back(*e, std::strchr(*e, '=') - *e);
        for (const std::string& n : names) ::unsetenv(n.c_str());
    }
    void TearDown() override { SetUp(); }
};

std::span<const std::byte> bytes_of(const char* s) {
    return {reinterpret_cast<const std::byte*>(s), std::strlen(s)};
}

void expect_job_of_one(rt::Runtime& rt) {
    EXPECT_TRUE(rt.is_singleton());
    EXPECT_EQ(rt.rank(), 0u);
    EXPECT_EQ(rt.size(), 1u);
    EXPECT_EQ(rt.local_rank(), 0u);
    EXPECT_EQ(rt.local_size(), 1u);
    ASSERT_EQ(rt.local_peers().size(), 1u);
    EXPECT_EQ(rt.local_peers()[0], 0u);
    EXPECT_TRUE(rt.on_this_node(0));
    EXPECT_FALSE(rt.on_this_node(1));
    EXPECT_FALSE(rt.job_id().empty());
    EXPECT_EQ(rt.job_id().find('/'), std::string::npos);
    EXPECT_FALSE(rt.node_id().empty());
    EXPECT_NE(rt.job_secret(), rt::Secret{});
}

TEST_F(Singleton, OpenRuntimeWithoutLauncherIsAJobOfOne) {
    auto rt = rt::open_runtime();
    expect_job_of_one(*rt);
}

TEST_F(Singleton, StrayPmixNamespaceWithoutServerIsAJobOfOne) {
    ::setenv("PMIX_NAMESPACE", "no-such-job", 1);
    auto rt = rt::open_runtime();
    expect_job_of_one(*rt);
}

// A launcher that is gone: PMIx_Init answers PMIX_ERR_UNREACH, which means
// "alone", not "broken".
TEST_F(Singleton, UnreachableLauncherIsAJobOfOne) {
    ::setenv("PMIX_NAMESPACE", "gone-job", 1);
    ::setenv("PMIX_RANK", "0", 1);
    ::setenv("PMIX_SERVER_URI41", "gone-server.0;tcp4://127.0.0.1:1", 1);
    auto rt = rt::open_runtime();
    expect_job_of_one(*rt);
}

TEST_F(Singleton, ModexWorksForRankZeroAfterAFence) {
    auto rt = rt::singleton_runtime();
    expect_job_of_one(*rt);
    std::vector<std::byte> blob;
    ASSERT_EQ(rt->modex_send("btl.self.1", bytes_of("me")), Status::success);
    EXPECT_EQ(rt->modex_recv(0, "btl.self.1", blob), Status::not_found) << "before the fence";
    ASSERT_EQ(rt->fence(), Status::success);
    ASSERT_EQ(rt->modex_recv(0, "btl.self.1", blob), Status::success);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(blob.data()), blob.size()), "me");
    ASSERT_EQ(rt->modex_send("btl.empty.1", {}), Status::success);
    ASSERT_EQ(rt->fence(), Status::success);
    ASSERT_EQ(rt->modex_recv(0, "btl.empty.1", blob), Status::success);
    EXPECT_TRUE(blob.empty());
    EXPECT_EQ(rt->modex_recv(0, "btl.never.1", blob), Status::not_found);
    EXPECT_EQ(rt->modex_recv(1, "btl.self.1", blob), Status::bad_param);
    EXPECT_EQ(rt->modex_send("", bytes_of("x")), Status::bad_param);
}

TEST_F(Singleton, TwoSingletonsAreTwoJobs) {
    auto a = rt::singleton_runtime();
    auto b = rt::singleton_runtime();
    EXPECT_NE(a->job_secret(), b->job_secret());
    EXPECT_NE(a->job_id(), b->job_id());
    EXPECT_EQ(a->node_id(), b->node_id());
}

}  // namespace
