// read_join: the server's reading of a client's join fragment, in a segment the
// client laid out (and may have laid out to harm the server).
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <new>

#include "components/vader/vader_dynamic.hpp"

namespace transit::vader {
namespace {

struct Segment {
    // `frags` fragments of `stride` bytes, last in the mapping.
    Segment(std::uint32_t frags, std::uint64_t stride)
        : size(frag_offset + frags * stride),
          bytes(new (std::align_val_t{cache_line}) std::byte[size]()) {
        auto& h = *new (bytes.get()) SegmentHeader{};
        h.frag_offset = frag_offset;
        h.frag_stride = stride;
        h.frag_count = frags;
        h.size = size;
    }
    FragHeader& frag(std::uint32_t i) {
        return *reinterpret_cast<FragHeader*>(
            bytes.get() + frag_offset +
            i * reinterpret_cast<SegmentHeader*>(bytes.get())->frag_stride);
    }
    std::span<std::byte> view() { return {bytes.get(), size}; }

    struct Free {
        void operator()(std::byte* p) const {
            ::operator delete[](p, std::align_val_t{cache_line});
        }
    };
    static constexpr std::uint64_t frag_offset = 256;
    std::size_t size;
    std::unique_ptr<std::byte[], Free> bytes;
};

TEST(VaderJoin, AJoinFragmentIsRead) {
    Segment s(4, 128);
    FragHeader& f = s.frag(3);
    f.kind = FragKind::join;
    f.size = sizeof(JoinPayload);
    JoinPayload p;
    p.channel = 77;
    p.fast_box = 5;
    std::memcpy(reinterpret_cast<std::byte*>(&f) + frag_header_size, &p, sizeof p);
    const JoinFragment j = read_join(s.view(), 3);
    ASSERT_EQ(j.header, &f);
    ASSERT_TRUE(j.payload);
    EXPECT_EQ(j.payload->channel, 77u);
    EXPECT_EQ(j.payload->fast_box, 5u);
}

TEST(VaderJoin, AnIndexOutsideTheSegmentHasNothingToAnswer) {
    Segment s(4, 128);
    EXPECT_EQ(read_join(s.view(), 4).header, nullptr);
    EXPECT_EQ(read_join(s.view(), ~0u).header, nullptr);
}

TEST(VaderJoin, AFragmentThatIsNoJoinIsAnsweredWithoutAPayload) {
    Segment s(4, 128);
    s.frag(0).kind = FragKind::data;
    s.frag(0).size = sizeof(JoinPayload);
    s.frag(1).kind = FragKind::join;
    s.frag(1).size = sizeof(JoinPayload) - 1;
    EXPECT_FALSE(read_join(s.view(), 0).payload);
    EXPECT_FALSE(read_join(s.view(), 1).payload);
    EXPECT_NE(read_join(s.view(), 1).header, nullptr);
}

// Fragments of a header alone (64 bytes, which segment_usable allows): a
// payload would lie in the next fragment, or past the end of the mapping for
// the last one (found by fuzz_vader_dynamic).
TEST(VaderJoin, FragmentsTooSmallForAPayloadAreRefused) {
    Segment s(2, frag_header_size);
    for (std::uint32_t i = 0; i < 2; ++i) {
        s.frag(i).kind = FragKind::join;
        s.frag(i).size = sizeof(JoinPayload);
    }
    for (std::uint32_t i = 0; i < 2; ++i) {
        const JoinFragment j = read_join(s.view(), i);
        EXPECT_NE(j.header, nullptr);
        EXPECT_FALSE(j.payload) << "fragment " << i;
    }
}

}  // namespace
}  // namespace transit::vader
