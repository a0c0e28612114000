// btl::apply_atomic / apply_cswap: every operation at 32 and 64 bits returns the
// old value and leaves the right new one; 32-bit operations touch only 4 bytes.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <thread>
#include <vector>

#include "transit/btl/types.hpp"

namespace transit::btl {
namespace {

template <typename T>
class Atomics : public ::testing::Test {
  protected:
    static constexpr int flags = sizeof(T) == 4 ? atomic_flags::bits32 : 0;
    using S = std::make_signed_t<T>;

    // Applies op to `start` with `operand`; checks the returned old value and
    // returns the new one.
    T run(AtomicOp op, T start, T operand) {
        // The word sits between two guards so a too-wide write shows.
        alignas(8) std::array<T, 3> words{T(0x5a5a5a5a), start, T(0xa5a5a5a5)};
        const std::uint64_t old = apply_atomic(&words[1], op, operand, flags);
        EXPECT_EQ(old, static_cast<std::uint64_t>(start));
        EXPECT_EQ(words[0], T(0x5a5a5a5a));
        EXPECT_EQ(words[2], T(0xa5a5a5a5));
        return words[1];
    }
};

using Widths = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(Atomics, Widths);

TYPED_TEST(Atomics, Add) {
    using T = TypeParam;
    EXPECT_EQ(this->run(AtomicOp::add, 40, 2), T(42));
    EXPECT_EQ(this->run(AtomicOp::add, T(~T(0)), 1), T(0));  // wraps at the width
}

TYPED_TEST(Atomics, BitwiseOps) {
    using T = TypeParam;
    EXPECT_EQ(this->run(AtomicOp::and_, 0b1100, 0b1010), T(0b1000));
    EXPECT_EQ(this->run(AtomicOp::or_, 0b1100, 0b1010), T(0b1110));
    EXPECT_EQ(this->run(AtomicOp::xor_, 0b1100, 0b1010), T(0b0110));
}

TYPED_TEST(Atomics, LogicalOps) {
    using T = TypeParam;
    EXPECT_EQ(this->run(AtomicOp::land, 7, 5), T(1));
    EXPECT_EQ(this->run(AtomicOp::land, 7, 0), T(0));
    EXPECT_EQ(this->run(AtomicOp::lor, 0, 0), T(0));
    EXPECT_EQ(this->run(AtomicOp::lor, 0, 9), T(1));
    EXPECT_EQ(this->run(AtomicOp::lxor, 3, 4), T(0));
    EXPECT_EQ(this->run(AtomicOp::lxor, 0, 4), T(1));
    EXPECT_EQ(this->run(AtomicOp::lxor, 0, 0), T(0));
}

TYPED_TEST(Atomics, Swap) {
    using T = TypeParam;
    EXPECT_EQ(this->run(AtomicOp::swap, 11, 22), T(22));
}

TYPED_TEST(Atomics, MinAndMaxAreSigned) {
    using T = TypeParam;
    using S = typename TestFixture::S;
    const T minus_one = T(S(-1));
    EXPECT_EQ(this->run(AtomicOp::min, 5, 3), T(3));
    EXPECT_EQ(this->run(AtomicOp::min, 3, 5), T(3));
    EXPECT_EQ(this->run(AtomicOp::min, 5, minus_one), minus_one);
    EXPECT_EQ(this->run(AtomicOp::max, 5, 3), T(5));
    EXPECT_EQ(this->run(AtomicOp::max, minus_one, 3), T(3));
    EXPECT_EQ(this->run(AtomicOp::max, minus_one, T(S(-7))), minus_one);
}

TYPED_TEST(Atomics, CompareAndSwap) {
    using T = TypeParam;
    alignas(8) T word = 10;
    EXPECT_EQ(apply_cswap(&word, 10, 20, this->flags), 10u);  // matched: swapped
    EXPECT_EQ(word, T(20));
    EXPECT_EQ(apply_cswap(&word, 10, 30, this->flags), 20u);  // no match: unchanged
    EXPECT_EQ(word, T(20));
}

TYPED_TEST(Atomics, ConcurrentAddsAreNotLost) {
    using T = TypeParam;
    alignas(8) T word = 0;
    constexpr int threads = 4, each = 20000;
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
        pool.emplace_back([&] {
            for (int n = 0; n < each; ++n) apply_atomic(&word, AtomicOp::add, 1, this->flags);
        });
    for (auto& t : pool) t.join();
    EXPECT_EQ(word, T(threads * each));
}

TEST(Atomics32, OperandIsTruncatedToThirtyTwoBits) {
    alignas(8) std::uint32_t word = 1;
    EXPECT_EQ(apply_atomic(&word, AtomicOp::add, 0x1'0000'0002ull, atomic_flags::bits32), 1u);
    EXPECT_EQ(word, 3u);
}

TEST(Atomics64, UsesAllSixtyFourBits) {
    alignas(8) std::uint64_t word = 0xffff'ffffull;
    EXPECT_EQ(apply_atomic(&word, AtomicOp::add, 1, 0), 0xffff'ffffull);
    EXPECT_EQ(word, 0x1'0000'0000ull);
}

// Targets refuse an operation code they do not know before touching memory.
TEST(AtomicOps, EveryOperationIsKnownAndNothingElse) {
    for (AtomicOp op :
         {AtomicOp::add, AtomicOp::and_, AtomicOp::or_, AtomicOp::xor_, AtomicOp::land,
          AtomicOp::lor, AtomicOp::lxor, AtomicOp::swap, AtomicOp::min, AtomicOp::max})
        EXPECT_TRUE(is_atomic_op(op)) << static_cast<int>(op);
    int known = 0;
    for (std::uint32_t v = 0; v <= 0xffff; ++v) known += is_atomic_op(std::uint16_t(v));
    EXPECT_EQ(known, 10);
    EXPECT_FALSE(is_atomic_op(std::uint16_t{0}));
    EXPECT_FALSE(is_atomic_op(std::uint16_t{0x0013}));
    EXPECT_FALSE(is_atomic_op(std::uint16_t{0xffff}));
}

}  // namespace
}  // namespace transit::btl
