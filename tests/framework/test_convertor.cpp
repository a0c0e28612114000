// The convertor: the position in a send's source that prepare_src and sendi
// consume, over one buffer (the fast path) or a list of pieces.
#include <gtest/gtest.h>

#include <array>
#include <numeric>
#include <string>

#include "transit/btl/types.hpp"

namespace transit::btl {
namespace {

std::array<char, 16> numbered() {
    std::array<char, 16> a{};
    std::iota(a.begin(), a.end(), 'a');
    return a;
}

TEST(Convertor, OneBufferSkipThenPack) {
    const auto src = numbered();
    Convertor c(src.data(), src.size());
    ASSERT_EQ(c.contiguous_at(4), src.data());
    c.skip(4);
    EXPECT_EQ(c.position(), 4u);
    EXPECT_EQ(c.remaining(), 12u);
    EXPECT_EQ(c.contiguous_at(12), src.data() + 4);
    EXPECT_EQ(c.contiguous_at(13), nullptr);
    char out[8]{};
    EXPECT_EQ(c.pack(out, 8), 8u);
    EXPECT_EQ(std::string(out, 8), "efghijkl");
    c.skip(4);
    EXPECT_EQ(c.remaining(), 0u);
    // At the end: nothing contiguous but the empty range, nothing to pack.
    EXPECT_EQ(c.contiguous_at(1), nullptr);
    EXPECT_NE(c.contiguous_at(0), nullptr);
    EXPECT_EQ(c.pack(out, 8), 0u);
}

TEST(Convertor, SkipToTheEndThenSeekBack) {
    const auto src = numbered();
    Convertor c(src.data(), src.size());
    c.skip(16);
    EXPECT_EQ(c.remaining(), 0u);
    EXPECT_EQ(c.contiguous_at(1), nullptr);
    c.seek(10);
    EXPECT_EQ(c.position(), 10u);
    EXPECT_EQ(c.contiguous_at(6), src.data() + 10);
}

TEST(Convertor, EmptyBuffer) {
    const char byte = 'x';
    Convertor c(&byte, 0);
    EXPECT_EQ(c.total(), 0u);
    EXPECT_EQ(c.contiguous_at(0), &byte);
    c.skip(0);
    EXPECT_EQ(c.remaining(), 0u);
    EXPECT_EQ(c.contiguous_at(1), nullptr);
}

TEST(Convertor, PiecesSkipAcrossABoundary) {
    const auto src = numbered();
    const std::array<iovec, 4> pieces{{{const_cast<char*>(src.data()), 3},
                                       {nullptr, 0},
                                       {const_cast<char*>(src.data() + 3), 5},
                                       {const_cast<char*>(src.data() + 8), 8}}};
    Convertor c(pieces);
    EXPECT_FALSE(c.contiguous());
    EXPECT_EQ(c.total(), 16u);
    EXPECT_EQ(c.contiguous_at(4), nullptr);  // only 3 bytes in the first piece
    c.skip(3);
    // The empty piece is stepped over.
    EXPECT_EQ(c.contiguous_at(5), src.data() + 3);
    c.skip(6);  // into the last piece
    EXPECT_EQ(c.position(), 9u);
    EXPECT_EQ(c.contiguous_at(7), src.data() + 9);
    char out[16]{};
    EXPECT_EQ(c.pack(out, 16), 7u);
    EXPECT_EQ(std::string(out, 7), "jklmnop");
}

TEST(Convertor, PiecesPackGathers) {
    const auto src = numbered();
    const std::array<iovec, 2> pieces{
        {{const_cast<char*>(src.data() + 8), 8}, {const_cast<char*>(src.data()), 8}}};
    Convertor c(pieces);
    char out[16]{};
    EXPECT_EQ(c.pack(out, 12), 12u);
    EXPECT_EQ(std::string(out, 12), "ijklmnopabcd");
    c.seek(2);
    EXPECT_EQ(c.pack(out, 16), 14u);
    EXPECT_EQ(std::string(out, 14), "klmnopabcdefgh");
}

}  // namespace
}  // namespace transit::btl
