// The segment helpers the upper layers use on a message a btl split: its
// length over all segments and one contiguous copy of it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transit/btl/types.hpp"

namespace transit::btl {
namespace {

TEST(Segments, NoSegmentsHaveNoLength) {
    const Descriptor d{};
    EXPECT_TRUE(segments_of(d).empty());
    EXPECT_EQ(total_length(segments_of(d)), 0u);
}

TEST(Segments, LengthAndCopyOfASplitSendDescriptor) {
    std::string head = "head:", body = "the body", tail = "!";
    std::vector<Segment> segs{
        {head.data(), head.size()}, {body.data(), body.size()}, {tail.data(), tail.size()}};
    Descriptor d{};
    d.segments = segs.data();
    d.segment_count = 3;
    ASSERT_EQ(total_length(segments_of(d)), 14u);
    std::string out(14, '?');
    gather_segments(segments_of(d), reinterpret_cast<std::byte*>(out.data()));
    EXPECT_EQ(out, "head:the body!");
}

// An empty segment in the middle (a zero-length header or payload) adds
// nothing and moves nothing.
TEST(Segments, EmptySegmentOfAReceiveDescriptor) {
    std::string a = "ab", b = "cd";
    const Segment segs[] = {{a.data(), 2}, {nullptr, 0}, {b.data(), 2}};
    const ReceiveDescriptor r{nullptr, segs, 3, 0};
    ASSERT_EQ(total_length(segments_of(r)), 4u);
    std::string out(4, '?');
    gather_segments(segments_of(r), reinterpret_cast<std::byte*>(out.data()));
    EXPECT_EQ(out, "abcd");
}

}  // namespace
}  // namespace transit::btl
