// IdlePacer: every call polls until idle_polls empty polls in a row; then one
// call in `stride`; work found, work in flight or a send restores every call.
#include <gtest/gtest.h>

#include "transit/btl/util/idle_pacer.hpp"

namespace transit::test {
namespace {

using btl::util::IdlePacer;

// Runs `calls` calls that find nothing; returns how many polled.
int empty_calls(IdlePacer& p, int calls, bool in_flight = false) {
    int polled = 0;
    for (int i = 0; i < calls; ++i) {
        if (!p.due(in_flight)) continue;
        ++polled;
        p.found(0, in_flight);
    }
    return polled;
}

void make_idle(IdlePacer& p) {
    ASSERT_EQ(empty_calls(p, IdlePacer::idle_polls), static_cast<int>(IdlePacer::idle_polls));
    ASSERT_TRUE(p.idle());
}

TEST(IdlePacer, PollsEveryCallUntilIdle) {
    IdlePacer p;
    EXPECT_EQ(empty_calls(p, IdlePacer::idle_polls - 1),
              static_cast<int>(IdlePacer::idle_polls - 1));
    EXPECT_FALSE(p.idle());
    EXPECT_TRUE(p.due(false));
}

TEST(IdlePacer, IdlePollsOneCallInStride) {
    IdlePacer p;
    make_idle(p);
    EXPECT_EQ(empty_calls(p, 16 * IdlePacer::stride), 16);
}

TEST(IdlePacer, WorkFoundRestoresEveryCall) {
    IdlePacer p;
    make_idle(p);
    while (!p.due(false)) {
    }
    p.found(1, false);
    EXPECT_FALSE(p.idle());
    EXPECT_EQ(empty_calls(p, 100), 100);
}

TEST(IdlePacer, WorkInFlightIsPolledEveryCall) {
    IdlePacer p;
    make_idle(p);
    EXPECT_EQ(empty_calls(p, 100, true), 100);
    EXPECT_FALSE(p.idle());  // and stays so after: the in-flight work may answer soon
    EXPECT_EQ(empty_calls(p, 100), 100);
}

TEST(IdlePacer, InFlightWorkNeverLetsItIdle) {
    IdlePacer p;
    EXPECT_EQ(empty_calls(p, 3 * IdlePacer::idle_polls, true),
              static_cast<int>(3 * IdlePacer::idle_polls));
    EXPECT_FALSE(p.idle());
}

TEST(IdlePacer, SendWakesIt) {
    IdlePacer p;
    make_idle(p);
    p.wake();
    EXPECT_FALSE(p.idle());
    EXPECT_EQ(empty_calls(p, 100), 100);
}

}  // namespace
}  // namespace transit::test
