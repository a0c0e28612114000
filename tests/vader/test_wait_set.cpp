// WaitSet: what a sleeping vader module waits on.  The doorbell rings it, the
// light sleep's timer ends it and reports itself once, a watched process's
// exit is reported; nothing is reported twice.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "components/vader/vader_doorbell.hpp"
#include "components/vader/vader_wait_set.hpp"

namespace transit::vader {
namespace {

// Whether `fd` turns readable within `ms` (a bound, not a timing).
bool readable_within(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

struct Sleeper {
    Sleeper() {
        EXPECT_TRUE(bell.open(static_cast<std::uint32_t>(::getpid()), 0x5eed));
        EXPECT_TRUE(waits.open(bell.fd()));
    }
    Doorbell bell;
    WaitSet waits;
};

TEST(WaitSet, TheLightSleepTimerEndsASleepAndIsReportedOnce) {
    Sleeper s;
    EXPECT_FALSE(readable_within(s.waits.fd(), 0));
    ASSERT_TRUE(s.waits.arm_timer(2000));
    EXPECT_TRUE(readable_within(s.waits.fd(), 10000));
    const WaitSet::Fired f = s.waits.fired();
    EXPECT_TRUE(f.timer);
    EXPECT_FALSE(f.exit);
    // Consumed: the next sleep is not ended by the same expiry.
    EXPECT_FALSE(readable_within(s.waits.fd(), 0));
    EXPECT_FALSE(s.waits.fired().timer);
}

TEST(WaitSet, NoTimerForALightSleepOfZero) {
    Sleeper s;
    EXPECT_FALSE(s.waits.arm_timer(0));
    EXPECT_FALSE(readable_within(s.waits.fd(), 20));
}

TEST(WaitSet, ATimerThatHasLongToRunIsKept) {
    Sleeper s;
    ASSERT_TRUE(s.waits.arm_timer(60'000'000));  // a minute
    ASSERT_TRUE(s.waits.arm_timer(2000));        // more than half of 2 ms is left: kept
    EXPECT_FALSE(readable_within(s.waits.fd(), 50));
}

TEST(WaitSet, AnExpiredTimerIsSetAgain) {
    Sleeper s;
    ASSERT_TRUE(s.waits.arm_timer(1000));
    ASSERT_TRUE(readable_within(s.waits.fd(), 10000));
    // Not read: arming again forgets the expiry, and the new one comes.
    ASSERT_TRUE(s.waits.arm_timer(60'000'000));
    EXPECT_FALSE(readable_within(s.waits.fd(), 0));
}

TEST(WaitSet, ARingMakesTheSetReadableAndIsLeftToTheDoorbell) {
    Sleeper s;
    Doorbell sender;
    ASSERT_TRUE(sender.open(static_cast<std::uint32_t>(::getpid()), 0xfeed));
    sender.ring(s.bell.name());
    EXPECT_TRUE(readable_within(s.waits.fd(), 10000));
    const WaitSet::Fired f = s.waits.fired();
    EXPECT_FALSE(f.timer);
    EXPECT_FALSE(f.exit);
    s.bell.take_ring();
    EXPECT_FALSE(readable_within(s.waits.fd(), 0));
    EXPECT_FALSE(s.bell.drain());
}

TEST(WaitSet, AWatchedProcessExitIsReported) {
    Sleeper s;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(0);
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
    ASSERT_GE(pidfd, 0);
    ASSERT_TRUE(s.waits.watch(pidfd));
    EXPECT_TRUE(readable_within(s.waits.fd(), 10000));
    EXPECT_TRUE(s.waits.fired().exit);
    // One shot: reported once.
    EXPECT_FALSE(s.waits.fired().exit);
    ::waitpid(child, nullptr, 0);
    ::close(pidfd);
}

}  // namespace
}  // namespace transit::vader
