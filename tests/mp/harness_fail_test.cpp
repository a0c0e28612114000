// A job in which one rank fails one case: registered with WILL_FAIL, so ctest
// passes only if the harness turns that single failure into a failed job.
#include <gtest/gtest.h>

#include "tests/mp/mp.hpp"

namespace {

TEST(Harness, FailsOnRankOneOnly) {
    EXPECT_NE(transit::mp::rank(), 1u) << "deliberate failure";
}

TEST(Harness, LaterTestsStillRun) {
    EXPECT_TRUE(transit::mp::barrier());
}

}  // namespace
