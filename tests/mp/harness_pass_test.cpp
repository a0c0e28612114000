// The harness's own checks: every rank runs every case, in step.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/mp/mp.hpp"

namespace {

using namespace transit;

TEST(Harness, EveryRankHasItsOwnRank) {
    const Rank me = mp::rank();
    const auto* bytes = reinterpret_cast<const std::byte*>(&me);
    const auto all = mp::all_gather("mp.test.rank", std::span(bytes, sizeof me));
    ASSERT_EQ(all.size(), mp::size());
    for (Rank r = 0; r < mp::size(); ++r) {
        ASSERT_EQ(all[r].size(), sizeof(Rank)) << "rank " << r;
        Rank got = 0;
        std::memcpy(&got, all[r].data(), sizeof got);
        EXPECT_EQ(got, r);
    }
}

TEST(Harness, BarrierReturnsOnEveryRank) {
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(mp::barrier());
}

}  // namespace
