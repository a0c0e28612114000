// When a waiting caller stops spinning (pml/idle_wait.hpp): after
// wait_spin_count idle polls, or once wait_spin_time has passed, whichever
// comes first; a poll that did something starts the spin again.
#include "pml/idle_wait.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>

namespace {

using transit::pml::IdleWait;
using transit::pml::Settings;
using namespace std::chrono_literals;

constexpr std::uint64_t stride = IdleWait::clock_stride;

// Settings that end the spin after `count` idle polls or `time`.
Settings spin(std::uint64_t count, std::chrono::microseconds time) {
    Settings s;
    s.wait_spin_count = count;
    s.wait_spin_time = time;
    return s;
}
constexpr std::uint64_t uncounted = 1'000'000'000;

// Idle polls until napping() says so, at most `limit`; limit + 1 if never.
std::uint64_t polls_until_nap(IdleWait& w, std::uint64_t limit) {
    for (std::uint64_t n = 1; n <= limit; ++n)
        if (w.napping()) return n;
    return limit + 1;
}

TEST(IdleWait, NapsAfterTheSpinCountWhateverTheClock) {
    const Settings s = spin(10, 60s);
    IdleWait w(s);
    EXPECT_EQ(polls_until_nap(w, 1000), 11u);
    EXPECT_TRUE(w.napping());  // and stays so until reset
}

TEST(IdleWait, NapsOnceTheSpinTimeHasPassed) {
    const Settings s = spin(uncounted, 2ms);
    IdleWait w(s);
    // The spin's time starts at the stride-th idle poll.
    EXPECT_EQ(polls_until_nap(w, stride), stride + 1);
    std::this_thread::sleep_for(3ms);
    // The clock is read again at the next multiple of the stride.
    EXPECT_EQ(polls_until_nap(w, 2 * stride), stride);
}

TEST(IdleWait, ASpinTimeOfZeroNapsAtTheFirstClockRead) {
    const Settings s = spin(uncounted, 0us);
    IdleWait w(s);
    EXPECT_EQ(polls_until_nap(w, 4 * stride), stride);
}

TEST(IdleWait, APollThatDidSomethingStartsTheSpinAgain) {
    const Settings s = spin(uncounted, 5ms);
    IdleWait w(s);
    // Short idle spells between busy polls, longer together than the spin
    // time: none of them is long enough to nap.
    const auto end = std::chrono::steady_clock::now() + 20ms;
    while (std::chrono::steady_clock::now() < end) {
        EXPECT_FALSE(w.napping());
        w.reset();
    }
    // A long spell naps after the spin time, counted from its own start.
    const auto began = std::chrono::steady_clock::now();
    std::uint64_t n = 0;
    while (!w.napping()) ++n;
    EXPECT_GE(std::chrono::steady_clock::now() - began, 5ms);
    EXPECT_GT(n, stride);
}

}  // namespace
