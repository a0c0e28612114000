// SegmentHeap: mem_alloc's page allocator inside a vader segment.
#include <gtest/gtest.h>

#include "components/vader/vader_heap.hpp"

namespace transit::vader {
namespace {

constexpr std::size_t page = SegmentHeap::page;

TEST(SegmentHeap, HandsOutWholePagesFromTheStart) {
    SegmentHeap h(10 * page, 8 * page);
    EXPECT_EQ(h.take(1), std::optional<std::size_t>(10 * page));
    EXPECT_EQ(h.take(page + 1), std::optional<std::size_t>(11 * page));  // two pages
    EXPECT_EQ(h.take(0), std::optional<std::size_t>(13 * page));         // zero is one page
    EXPECT_EQ(h.in_use(), 4 * page);
    EXPECT_EQ(h.blocks(), 3u);
}

TEST(SegmentHeap, RefusesWhatDoesNotFit) {
    SegmentHeap h(0, 4 * page);
    EXPECT_FALSE(h.take(5 * page));
    ASSERT_TRUE(h.take(4 * page));
    EXPECT_FALSE(h.take(1));
    EXPECT_FALSE(h.take(~std::size_t{0}));  // no overflow into a small request
    EXPECT_FALSE(SegmentHeap(0, 0).take(1));
}

TEST(SegmentHeap, ReleasedNeighboursMergeIntoOneGap) {
    SegmentHeap h(0, 4 * page);
    const auto a = h.take(page), b = h.take(page), c = h.take(page), d = h.take(page);
    ASSERT_TRUE(a && b && c && d);
    EXPECT_EQ(h.give(*b), page);
    EXPECT_EQ(h.give(*d), page);
    EXPECT_FALSE(h.take(2 * page)) << "two separate one-page gaps are not one gap";
    EXPECT_EQ(h.give(*c), page);  // b, c and d are now one gap
    EXPECT_EQ(h.take(3 * page), b);
    EXPECT_EQ(h.give(*a), page);
    EXPECT_EQ(h.in_use(), 3 * page);
}

TEST(SegmentHeap, ForeignAndRepeatedReleasesAreRefused) {
    SegmentHeap h(0, 4 * page);
    const auto a = h.take(2 * page);
    ASSERT_TRUE(a);
    EXPECT_EQ(h.give(*a + page), 0u) << "the middle of a block is not a block";
    EXPECT_EQ(h.give(12345), 0u);
    EXPECT_TRUE(h.owns(*a));
    EXPECT_EQ(h.give(*a), 2 * page);
    EXPECT_FALSE(h.owns(*a));
    EXPECT_EQ(h.give(*a), 0u) << "released twice";
    EXPECT_EQ(h.in_use(), 0u);
    EXPECT_EQ(h.take(4 * page), std::optional<std::size_t>(0)) << "everything is free again";
}

TEST(SegmentHeap, FirstFitReusesTheEarliestGap) {
    SegmentHeap h(0, 8 * page);
    const auto a = h.take(3 * page), b = h.take(page), c = h.take(page);
    ASSERT_TRUE(a && b && c);
    h.give(*a);
    EXPECT_EQ(h.take(page), a);
    EXPECT_EQ(h.take(2 * page), std::optional<std::size_t>(*a + page));
    EXPECT_EQ(h.take(3 * page), std::optional<std::size_t>(5 * page));
}

}  // namespace
}  // namespace transit::vader
