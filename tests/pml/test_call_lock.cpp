// transit::CallLock: the lock a layer holds around calls at ThreadLevel::multiple.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "transit/call_lock.hpp"

namespace transit {
namespace {

TEST(CallLock, SwitchedOffTakesNothing) {
    CallLock lock;
    auto held = lock.hold();
    EXPECT_FALSE(held.owns_lock());
}

TEST(CallLock, SwitchedOnIsRecursive) {
    CallLock lock;
    lock.enable(true);
    auto outer = lock.hold();
    auto inner = lock.hold();  // a handler calling in again
    EXPECT_TRUE(outer.owns_lock());
    EXPECT_TRUE(inner.owns_lock());
}

// A holder that polls without letting go (as a waiting caller does) must let
// a thread blocked on the lock in when it asks: the poller hands it over, and
// the blocked thread's calls all get through while the poller keeps polling.
TEST(CallLock, PollerHandsTheLockToABlockedThread) {
    CallLock lock;
    lock.enable(true);
    std::atomic<bool> started{false};
    std::atomic<int> calls{0};
    constexpr int wanted_calls = 2000;
    std::thread poller([&] {
        auto held = lock.hold();
        started = true;
        while (calls.load() < wanted_calls)
            if (lock.wanted()) lock.hand_over();
    });
    while (!started) std::this_thread::yield();
    std::thread caller([&] {
        for (int i = 0; i < wanted_calls; ++i) {
            auto held = lock.hold();
            calls.fetch_add(1);
        }
    });
    caller.join();
    poller.join();
    EXPECT_EQ(calls.load(), wanted_calls);
    EXPECT_FALSE(lock.wanted());
}

TEST(CallLock, WantedOnlyWhileAThreadWaits) {
    CallLock lock;
    lock.enable(true);
    lock.acquire();
    EXPECT_FALSE(lock.wanted());
    std::thread waiter([&] { auto held = lock.hold(); });
    while (!lock.wanted()) std::this_thread::yield();
    lock.release();
    waiter.join();
    EXPECT_FALSE(lock.wanted());
    EXPECT_TRUE(lock.try_acquire());
    lock.release();
}

}  // namespace
}  // namespace transit
