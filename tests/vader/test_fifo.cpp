#include "components/vader/vader_fifo.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <array>
#include <cstdint>
#include <vector>

#include "tests/vader/fork_util.hpp"

namespace transit::vader {
namespace {

TEST(VaderFifo, PushPopInOrderAndReportsFull) {
    test::SharedArea area(Fifo::bytes(8));
    Fifo fifo = Fifo::create(area.get(), 8);
    std::uint64_t head = 0;
    std::uint64_t v = 0;
    EXPECT_FALSE(fifo.pop(head, v));
    for (int round = 0; round < 5; ++round) {  // several laps of the ring
        for (std::uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(fifo.push(100 * round + i));
        EXPECT_FALSE(fifo.push(999)) << "a full FIFO must refuse, not overwrite";
        for (std::uint64_t i = 0; i < 8; ++i) {
            ASSERT_TRUE(fifo.pop(head, v));
            EXPECT_EQ(v, 100 * round + i);
        }
        EXPECT_FALSE(fifo.pop(head, v));
        EXPECT_TRUE(fifo.empty_at(head));
    }
}

TEST(VaderFifo, ThreeProcessesToOneKeepPerSenderOrder) {
    constexpr int senders = 3;
    constexpr std::uint64_t per_sender = 100000;
    test::SharedArea area(Fifo::bytes(256));
    Fifo fifo = Fifo::create(area.get(), 256);
    std::vector<pid_t> pids;
    for (std::uint64_t s = 0; s < senders; ++s) {
        pids.push_back(test::spawn([&, s] {
            Fifo f = Fifo::attach(area.get());
            for (std::uint64_t i = 0; i < per_sender; ++i)
                while (!f.push((s << 32) | i)) sched_yield();
            return true;
        }));
    }
    std::array<std::uint64_t, senders> next{};
    std::uint64_t head = 0;
    std::uint64_t received = 0;
    while (received < senders * per_sender) {
        std::uint64_t v = 0;
        if (!fifo.pop(head, v)) {
            sched_yield();
            continue;
        }
        const std::uint64_t s = v >> 32;
        ASSERT_LT(s, senders);
        ASSERT_EQ(v & 0xffffffffu, next[s]) << "out of order from sender " << s;
        ++next[s];
        ++received;
    }
    for (pid_t p : pids) EXPECT_EQ(test::join(p), 0);
    std::uint64_t v = 0;
    EXPECT_FALSE(fifo.pop(head, v));
}

}  // namespace
}  // namespace transit::vader
