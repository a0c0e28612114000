// The uct module's receive ring (components/uct/uct_frag.hpp): messages wait
// there, in arrival order, while UCT's progress runs, and stay readable until
// the outermost delivery returns, including the ones larger than a slot
// (UCT tcp's 64 KiB messages) and across the ring doubling under a burst.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "components/uct/uct_frag.hpp"

namespace {

using transit::uct::RecvRing;

std::vector<std::byte> message(std::size_t length, std::uint8_t seed) {
    std::vector<std::byte> m(length);
    for (std::size_t i = 0; i < length; ++i) m[i] = std::byte(static_cast<std::uint8_t>(seed + i));
    return m;
}

bool holds(const std::byte* data, std::size_t length, const std::vector<std::byte>& m) {
    return length == m.size() && std::equal(m.begin(), m.end(), data);
}

TEST(UctRecvRing, MessagesLargerThanASlotComeOutWholeAndInOrder) {
    RecvRing ring;
    ring.setup(4, 256);
    const std::vector<std::vector<std::byte>> sent = {message(100, 1), message(65600, 2),
                                                      message(256, 3), message(257, 4)};
    for (const auto& m : sent) ASSERT_TRUE(ring.push(m.data(), m.size()));
    for (const auto& m : sent) {
        std::size_t length = 0;
        const std::byte* data = ring.front(length);
        ring.enter();
        EXPECT_TRUE(holds(data, length, m)) << "message of " << m.size() << " bytes";
        ring.pop();
        ring.leave();
    }
    EXPECT_TRUE(ring.empty());
}

// A delivery that drives progress (nested) while a burst doubles the ring: the
// large message the outer delivery reads stays where it was, and every queued
// one, large or small, comes out intact after the growth.
TEST(UctRecvRing, ALargeMessageStaysReadableWhileANestedBurstGrowsTheRing) {
    RecvRing ring;
    ring.setup(2, 128);
    const auto outer = message(4096, 7);
    ASSERT_TRUE(ring.push(outer.data(), outer.size()));
    std::size_t length = 0;
    const std::byte* data = ring.front(length);
    ring.enter();
    ring.pop();
    std::vector<std::vector<std::byte>> burst;
    for (std::uint8_t k = 0; k < 9; ++k) burst.push_back(message(k % 2 ? 3000 : 60, k));
    for (const auto& m : burst) ASSERT_TRUE(ring.push(m.data(), m.size()));
    EXPECT_GT(ring.grown(), 0u);
    EXPECT_TRUE(holds(data, length, outer)) << "the outer delivery's message moved";
    for (const auto& m : burst) {
        std::size_t n = 0;
        const std::byte* d = ring.front(n);
        EXPECT_TRUE(holds(d, n, m)) << "message of " << m.size() << " bytes";
        ring.pop();
    }
    ring.leave();
    EXPECT_TRUE(ring.empty());
}

// A slot's large buffer is reused: a smaller large message after a bigger
// one in the same slot reads back with its own length and bytes.
TEST(UctRecvRing, AReusedSlotGivesTheLatestMessage) {
    RecvRing ring;
    ring.setup(1, 64);
    for (std::size_t length : {5000u, 70u, 3000u, 10u}) {
        const auto m = message(length, static_cast<std::uint8_t>(length));
        ASSERT_TRUE(ring.push(m.data(), m.size()));
        std::size_t n = 0;
        const std::byte* d = ring.front(n);
        ring.enter();
        EXPECT_TRUE(holds(d, n, m)) << "message of " << length << " bytes";
        ring.pop();
        ring.leave();
    }
}

// Large buffers are freed with their slots: a stream of large messages
// through every slot of the ring leaves none behind.
TEST(UctRecvRing, LargeBuffersAreFreedWithTheirSlots) {
    RecvRing ring;
    ring.setup(64, 64);
    for (int round = 0; round < 200; ++round) {
        const auto a = message(1000, static_cast<std::uint8_t>(round));
        const auto b = message(2000, static_cast<std::uint8_t>(round + 1));
        ASSERT_TRUE(ring.push(a.data(), a.size()));
        ASSERT_TRUE(ring.push(b.data(), b.size()));
        for (const auto* m : {&a, &b}) {
            std::size_t n = 0;
            const std::byte* d = ring.front(n);
            ring.enter();
            EXPECT_TRUE(holds(d, n, *m));
            ring.leave();
            ring.pop();
        }
    }
    EXPECT_LE(ring.large_buffers(), 1u);  // the last one's slot is freed at the next leave
    ring.enter();
    ring.leave();
    EXPECT_EQ(ring.large_buffers(), 0u);
}

}  // namespace
