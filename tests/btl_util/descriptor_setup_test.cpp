// hand_out leaves a reused descriptor in the state a fresh one has (no last
// user's callback), and alloc_whole gives only a descriptor that holds all the
// bytes asked for, returning a short one to the module.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>

#include "transit/btl/util/descriptor_setup.hpp"

namespace transit::test {
namespace {

using btl::util::alloc_whole;
using btl::util::hand_out;

void some_completion(btl::Module*, btl::Endpoint*, btl::Descriptor*, Status) noexcept {}

TEST(HandOut, ClearsTheLastUsersCallback) {
    std::array<std::byte, 64> buffer{};
    btl::Segment segs[2] = {{buffer.data(), 16}, {buffer.data() + 16, 48}};
    btl::Descriptor d;
    int last_user = 0;
    d.cbfunc = &some_completion;
    d.cbdata = &last_user;
    d.context = &last_user;
    hand_out(d, segs, 2, btl::des_flags::btl_ownership, 3);
    EXPECT_EQ(d.segments, segs);
    EXPECT_EQ(d.segment_count, 2u);
    EXPECT_EQ(d.flags, btl::des_flags::btl_ownership);
    EXPECT_EQ(d.order, 3);
    EXPECT_EQ(d.cbfunc, nullptr);
    EXPECT_EQ(d.cbdata, nullptr);
    EXPECT_EQ(d.context, nullptr);
}

// A module whose alloc gives at most `room` bytes, and counts what it frees.
struct ShortModule {
    std::array<std::byte, 64> buffer{};
    btl::Segment seg{};
    btl::Descriptor d;
    std::size_t room = 32;
    int freed = 0;
    btl::Descriptor* alloc(btl::Endpoint*, std::uint8_t order, std::size_t size,
                           std::uint32_t flags) noexcept {
        seg = {buffer.data(), size < room ? size : room};
        hand_out(d, &seg, 1, flags, order);
        return &d;
    }
    Status free(btl::Descriptor*) noexcept {
        ++freed;
        return Status::success;
    }
};

TEST(AllocWhole, GivesOnlyADescriptorThatHoldsItAll) {
    ShortModule m;
    btl::Descriptor* d = alloc_whole(m, nullptr, 0, 32, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->segments[0].len, 32u);
    EXPECT_EQ(m.freed, 0);
    EXPECT_EQ(alloc_whole(m, nullptr, 0, 33, 0), nullptr);
    EXPECT_EQ(m.freed, 1);  // the short one went back
}

}  // namespace
}  // namespace transit::test
