// ProcessWatch with real processes: a forked child that exits or is killed is
// seen as exited, through the pidfd and through the kill(pid, 0) fallback; a
// live one is not.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "transit/btl/util/process_watch.hpp"

namespace transit::test {
namespace {

using namespace std::chrono_literals;
using btl::util::BasicWatchPace;
using btl::util::ProcessWatch;
using btl::util::WatchPace;
using Probe = ProcessWatch::Probe;

// A child that waits for the parent to close the pipe (or to be killed),
// then exits with status 3.
class Child {
  public:
    Child() {
        int fds[2];
        if (::pipe(fds) != 0) return;
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(fds[1]);
            char c;
            while (::read(fds[0], &c, 1) > 0) {
            }
            ::_exit(3);
        }
        ::close(fds[0]);
        release_ = fds[1];
    }
    ~Child() {
        if (release_ >= 0) ::close(release_);
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            reap();
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    pid_t pid() const { return pid_; }
    void let_exit() {
        ::close(release_);
        release_ = -1;
    }
    int reap() {
        int status = 0;
        ::waitpid(pid_, &status, 0);
        reaped_ = true;
        return status;
    }

  private:
    pid_t pid_ = -1;
    int release_ = -1;
    bool reaped_ = false;
};

// exited() within a few seconds: the child needs a moment to be scheduled.
bool becomes_exited(const ProcessWatch& w) {
    for (auto end = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(5ms))
        if (w.exited()) return true;
    return false;
}

TEST(ProcessWatch, NothingWatchedNeverExits) {
    ProcessWatch w;
    EXPECT_FALSE(w.watching());
    EXPECT_FALSE(w.exited());
}

TEST(ProcessWatch, LiveProcessHasNotExited) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    ProcessWatch w(child.pid());
    EXPECT_TRUE(w.watching());
    EXPECT_EQ(w.pid(), child.pid());
    EXPECT_FALSE(w.exited());
    ProcessWatch fallback(child.pid(), Probe::signal_only);
    EXPECT_FALSE(fallback.has_pidfd());
    EXPECT_FALSE(fallback.exited());
}

TEST(ProcessWatch, ExitIsSeenThroughThePidfdBeforeTheReap) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    ProcessWatch w(child.pid());
    if (!w.has_pidfd()) GTEST_SKIP() << "this kernel has no pidfd_open";
    child.let_exit();
    EXPECT_TRUE(becomes_exited(w)) << "a zombie has exited too";
    const int status = child.reap();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    EXPECT_TRUE(w.exited());
}

TEST(ProcessWatch, KilledProcessIsSeen) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    ProcessWatch w(child.pid());
    ASSERT_FALSE(w.exited());
    ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
    const int status = child.reap();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    EXPECT_TRUE(becomes_exited(w));
}

TEST(ProcessWatch, FallbackSeesTheExitOnceReaped) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    ProcessWatch w(child.pid(), Probe::signal_only);
    child.let_exit();
    child.reap();
    EXPECT_TRUE(becomes_exited(w));
}

TEST(ProcessWatch, MovedWatchKeepsWatching) {
    Child child;
    ASSERT_GT(child.pid(), 0);
    ProcessWatch a(child.pid());
    const bool pidfd = a.has_pidfd();
    ProcessWatch b(std::move(a));
    EXPECT_FALSE(a.watching());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(b.has_pidfd(), pidfd);
    ProcessWatch c;
    c = std::move(b);
    EXPECT_EQ(c.pid(), child.pid());
    ::kill(child.pid(), SIGKILL);
    child.reap();
    EXPECT_TRUE(becomes_exited(c));
}

// A clock the test moves by hand: the pace's decisions depend on the time
// that passed, never on how fast the machine ran the test.
struct ManualClock {
    using duration = std::chrono::steady_clock::duration;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<ManualClock>;
    static constexpr bool is_steady = true;
    static inline time_point current{std::chrono::hours(1)};
    static time_point now() noexcept { return current; }
};

// The pace a transport's peer watch keeps: every `every`-th call, and no
// sooner than the interval after the last look; hurry() makes the next due.
TEST(WatchPace, EveryNthCallAndNoSoonerThanTheInterval) {
    BasicWatchPace<ManualClock> pace(200ms, 4);
    int due = 0;
    for (int i = 0; i < 3; ++i) due += pace.due();
    EXPECT_EQ(due, 0) << "the clock is not read before the 4th call";
    EXPECT_TRUE(pace.due()) << "the first look is due at once";
    ManualClock::current += 199ms;
    for (int i = 0; i < 40; ++i) due += pace.due();
    EXPECT_EQ(due, 0) << "within the interval nothing more is due";
    pace.hurry();
    EXPECT_TRUE(pace.due()) << "hurry() makes the next call look";
    ManualClock::current += 200ms;
    for (int i = 0; i < 3; ++i) due += pace.due();
    EXPECT_EQ(due, 0) << "the interval has passed, but only every 4th call reads the clock";
    EXPECT_TRUE(pace.due()) << "after the interval, the next 4th call looks";
}

// What a module's look at its peers does: only an endpoint not yet given up
// whose process exited is lost, once; null entries are passed over; nothing
// is looked at before the pace says so.
TEST(LoseExited, LosesEachExitedPeerOnce) {
    struct Peer {
        ProcessWatch process;
        bool gone = false;
    };
    // Each child exits before the next is forked: a later child would hold an
    // earlier one's pipe open and keep it from exiting.
    auto exited_peer = [](bool given_up) {
        Child child;
        auto peer = std::make_unique<Peer>(Peer{ProcessWatch(child.pid()), given_up});
        child.let_exit();
        child.reap();
        return peer;
    };
    std::vector<std::unique_ptr<Peer>> peers;
    peers.push_back(exited_peer(false));
    peers.push_back(exited_peer(true));
    peers.push_back(nullptr);
    Child live;
    ASSERT_GT(live.pid(), 0);
    peers.push_back(std::make_unique<Peer>(Peer{ProcessWatch(live.pid())}));
    ASSERT_TRUE(becomes_exited(peers[0]->process));
    ASSERT_TRUE(becomes_exited(peers[1]->process));

    std::vector<Peer*> lost;
    auto given_up = [](const Peer& p) { return p.gone; };
    auto lose = [&](Peer& p) {
        p.gone = true;
        lost.push_back(&p);
    };
    WatchPace pace(std::chrono::milliseconds(0), 2);
    EXPECT_EQ(btl::util::lose_exited(pace, peers, given_up, lose), 0) << "not due yet";
    EXPECT_TRUE(lost.empty());
    EXPECT_EQ(btl::util::lose_exited(pace, peers, given_up, lose), 1);
    ASSERT_EQ(lost.size(), 1u);
    EXPECT_EQ(lost[0], peers[0].get());
    pace.hurry();
    EXPECT_EQ(btl::util::lose_exited(pace, peers, given_up, lose), 0) << "lost once only";
    EXPECT_FALSE(peers[3]->gone);
}

}  // namespace
}  // namespace transit::test
