// The keep-alive's decision for one peer (pml/peer_watch.hpp), driven with
// times of the test's own: a busy peer and an idle one are never probed, a
// silent one with work outstanding is probed after the period and failed
// after the timeout, and one that answers is not failed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "pml/peer_watch.hpp"

namespace {

using transit::pml::PeerWatch;
using Action = PeerWatch::Action;
using namespace std::chrono_literals;

constexpr auto period = 250ms;
constexpr auto timeout = 500ms;
constexpr auto look = 60ms;  // between looks, as KeepAlive::interval() would be

struct Watched : ::testing::Test {
    PeerWatch w;
    PeerWatch::Clock::time_point now{};
    // Looks every `look` for `span`; what each look decided, in order.
    std::vector<Action> run(std::chrono::milliseconds span, bool has_work, bool heard_each) {
        std::vector<Action> out;
        for (auto t = 0ms; t < span; t += look) {
            now += look;
            if (heard_each) w.heard = true;
            out.push_back(w.step(has_work, now, period, timeout));
        }
        return out;
    }
    static int count(const std::vector<Action>& v, Action a) {
        return static_cast<int>(std::count(v.begin(), v.end(), a));
    }
};

TEST_F(Watched, ABusyPeerIsNeverProbed) {
    const auto v = run(10s, true, true);
    EXPECT_EQ(count(v, Action::none), static_cast<int>(v.size()));
}

TEST_F(Watched, AnIdlePeerWithoutWorkIsNeverProbedEvenSilent) {
    const auto v = run(10s, false, false);
    EXPECT_EQ(count(v, Action::none), static_cast<int>(v.size()));
    EXPECT_FALSE(w.watching);
}

TEST_F(Watched, ASilentPeerIsProbedAfterThePeriodThenFailedAfterTheTimeout) {
    const auto start = now;
    PeerWatch::Clock::time_point probed{}, failed{};
    for (int i = 0; i < 100 && failed == PeerWatch::Clock::time_point{}; ++i) {
        now += look;
        const Action a = w.step(true, now, period, timeout);
        if (a == Action::probe) {
            EXPECT_EQ(probed, PeerWatch::Clock::time_point{}) << "one probe only";
            probed = now;
        }
        if (a == Action::fail) failed = now;
    }
    ASSERT_NE(probed, PeerWatch::Clock::time_point{});
    ASSERT_NE(failed, PeerWatch::Clock::time_point{});
    // The quiet time counts from the first look that saw the work.
    EXPECT_GE(probed - start, period);
    EXPECT_LE(probed - start, period + 2 * look);
    EXPECT_GE(failed - probed, timeout);
    EXPECT_LE(failed - probed, timeout + look);
}

TEST_F(Watched, APeerThatAnswersEveryProbeIsNotFailed) {
    int probes = 0;
    for (int i = 0; i < 200; ++i) {  // 12 s
        now += look;
        const Action a = w.step(true, now, period, timeout);
        ASSERT_NE(a, Action::fail) << "at look " << i;
        if (a == Action::probe) {
            ++probes;
            w.heard = true;  // its answer comes before the next look
        }
    }
    EXPECT_GT(probes, 10) << "a slow peer is probed about once per period and look";
}

TEST_F(Watched, AnAnswerJustBeforeTheDeadlineCounts) {
    Action a = Action::none;
    while (a != Action::probe) {
        now += look;
        a = w.step(true, now, period, timeout);
    }
    now += timeout - 1ms;
    w.heard = true;
    EXPECT_EQ(w.step(true, now, period, timeout), Action::none);
    EXPECT_FALSE(w.probed);
}

TEST_F(Watched, WorkThatEndsAndStartsAgainStartsANewQuietPeriod) {
    run(200ms, true, false);  // quiet, under the period
    EXPECT_EQ(count(run(1s, false, false), Action::none), 17);
    // New work: no probe before a full period of its own.
    const auto v = run(period - look, true, false);
    EXPECT_EQ(count(v, Action::probe), 0);
}

}  // namespace
