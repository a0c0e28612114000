// btl::util::Leftovers: the named objects a plugin listed (a POSIX message
// queue, a file in /dev/shm) are removed once their process was killed (kill
// -9), by the next process that opens the btl framework; those of a process
// that still runs never are, nor those listed under a live pid with its true
// start time, while a list whose pid came round to another process is taken
// for the dead process's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mqueue.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>

#include "framework/btl_framework.hpp"
#include "params/registry_impl.hpp"
#include "tests/fixtures/two_rank_runtime.hpp"
#include "transit/btl/util/leftovers.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/params.hpp"

namespace transit::test {
namespace {

using btl::util::LeftoverKind;
using btl::util::Leftovers;

bool queue_exists(const std::string& name) {
    const mqd_t q = ::mq_open(name.c_str(), O_RDONLY);
    if (q == static_cast<mqd_t>(-1)) return false;
    ::mq_close(q);
    return true;
}

bool file_exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

// Makes a queue and a file named after `tag`, listed first; false on failure.
bool make_objects(Leftovers& list, const std::string& queue, const std::string& file) {
    list.add(LeftoverKind::posix_mq, queue);
    mq_attr attr{};
    attr.mq_maxmsg = 1;
    attr.mq_msgsize = 8;
    const mqd_t q = ::mq_open(queue.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
    if (q == static_cast<mqd_t>(-1)) return false;
    ::mq_close(q);
    list.add(LeftoverKind::file, file);
    std::ofstream(file) << "x\n";
    return file_exists(file);
}

// The next start: a btl framework opened in this process (no component is
// selected that exists, so it only sweeps).
void open_a_framework() {
    params::reset_for_testing();
    params::registry().set("btl", "self", params::Source{params::Origin::api, "", 0});
    TwoRankRuntime runtime;
    ProgressEngine progress;
    btl::AmTable am;
    btl::Framework fw(runtime, progress, am);
    fw.open();
}

TEST(Leftovers, AKilledProcessObjectsGoAtTheNextStartALiveOnesStay) {
    const std::string tag = std::to_string(::getpid());
    const std::string dead_queue = "/transit-test-dead-" + tag;
    const std::string dead_file = "/dev/shm/transit-test-dead-" + tag;
    const std::string live_queue = "/transit-test-live-" + tag;
    const std::string live_file = "/dev/shm/transit-test-live-" + tag;
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(ready[0]);
        try {
            Leftovers list("test");
            if (!make_objects(list, dead_queue, dead_file)) ::_exit(2);
            if (::write(ready[1], "r", 1) != 1) ::_exit(3);
            for (;;) ::pause();
        } catch (...) {
            ::_exit(4);
        }
    }
    ::close(ready[1]);
    char c = 0;
    const bool made = ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(made) << "the child could not make its objects";
    ASSERT_TRUE(queue_exists(dead_queue));
    ASSERT_TRUE(file_exists(dead_file));

    {
        Leftovers mine("test");
        ASSERT_TRUE(make_objects(mine, live_queue, live_file));
        open_a_framework();
        EXPECT_FALSE(queue_exists(dead_queue)) << "the killed process's queue was left";
        EXPECT_FALSE(file_exists(dead_file)) << "the killed process's file was left";
        EXPECT_TRUE(queue_exists(live_queue)) << "a live process's queue was removed";
        EXPECT_TRUE(file_exists(live_file)) << "a live process's file was removed";
        EXPECT_TRUE(file_exists(mine.path()));
        ::mq_unlink(live_queue.c_str());
        mine.forget(LeftoverKind::posix_mq, live_queue);
        ::unlink(live_file.c_str());
        mine.forget(LeftoverKind::file, live_file);
        EXPECT_FALSE(file_exists(mine.path())) << "an emptied list stays";
    }
    ::mq_unlink(dead_queue.c_str());
    ::unlink(dead_file.c_str());
}

// A list naming this (live) process's pid: kept with its true start time,
// removed (with its objects) with another one, as when the pid came round.
TEST(Leftovers, APidReusedIsNotTakenForTheProcessThatListed) {
    const std::string dir = btl::util::leftovers_directory();
    { Leftovers make_the_directory("test"); }
    const pid_t me = ::getpid();
    const std::uint64_t start = btl::util::process_start_time(me);
    ASSERT_NE(start, 0u);
    const std::string tag = std::to_string(me);
    const std::string kept = "/dev/shm/transit-test-kept-" + tag;
    const std::string reused = "/dev/shm/transit-test-reused-" + tag;
    const std::string kept_list = dir + "/" + tag + "-" + std::to_string(start) + "-other";
    const std::string reused_list = dir + "/" + tag + "-" + std::to_string(start + 1) + "-other";
    std::ofstream(kept) << "x\n";
    std::ofstream(reused) << "x\n";
    std::ofstream(kept_list) << "file " << kept << "\n";
    std::ofstream(reused_list) << "file " << reused << "\n";
    btl::util::remove_leftovers_of_gone_processes();
    EXPECT_TRUE(file_exists(kept)) << "a live process's object was removed";
    EXPECT_TRUE(file_exists(kept_list));
    EXPECT_FALSE(file_exists(reused)) << "an object of the pid's earlier process was left";
    EXPECT_FALSE(file_exists(reused_list));
    ::unlink(kept.c_str());
    ::unlink(kept_list.c_str());
}

TEST(Leftovers, NamesAreChecked) {
    Leftovers list("test");
    EXPECT_THROW(list.add(LeftoverKind::file, "relative/path"), std::invalid_argument);
    EXPECT_THROW(list.add(LeftoverKind::posix_mq, "/a/b"), std::invalid_argument);
    EXPECT_THROW(list.add(LeftoverKind::posix_shm, "/a\nb"), std::invalid_argument);
}

}  // namespace
}  // namespace transit::test
