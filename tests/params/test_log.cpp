// transit::log::write: one whole line on stderr, saying who wrote it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "transit/log.hpp"

namespace transit::log {
namespace {

TEST(Log, OneLineWithHostPidAndPrefix) {
    char host[256] = {};
    ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
    testing::internal::CaptureStderr();
    write("btl", "hello 42");
    std::string out = testing::internal::GetCapturedStderr();
    std::string head = "[transit " + std::string(host) + ":" + std::to_string(getpid());
    EXPECT_EQ(out.rfind(head, 0), 0u) << out;
    EXPECT_NE(out.find("] btl: hello 42\n"), std::string::npos) << out;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << out;
}

TEST(Log, WarnUsesWarningPrefixAndFormats) {
    testing::internal::CaptureStderr();
    warn("{} is {}", "x", 3);
    std::string out = testing::internal::GetCapturedStderr();
    EXPECT_NE(out.find("] warning: x is 3\n"), std::string::npos) << out;
}

TEST(Log, StreamHonoursVerbosity) {
    Stream s("btl", 10);
    testing::internal::CaptureStderr();
    s.verbose(20, "hidden");
    s.verbose(5, "shown {}", 1);
    std::string out = testing::internal::GetCapturedStderr();
    EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
    EXPECT_NE(out.find("btl: shown 1"), std::string::npos) << out;
}

// The rank comes from the launcher's PMIX_RANK; a forked child (new pid) reads it afresh.
TEST(Log, RankFromPmixRankInAChild) {
    ::setenv("PMIX_RANK", "3", 1);
    testing::internal::CaptureStderr();
    pid_t child = fork();
    if (child == 0) {
        write("pml", "from the child");
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::string out = testing::internal::GetCapturedStderr();
    ::unsetenv("PMIX_RANK");
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(out.find(":" + std::to_string(child) + " r3] pml: from the child\n"),
              std::string::npos)
        << out;
}

// A component closed by a static object's destructor logs as the program
// exits, after the main thread's thread_local objects are destroyed.
struct LogsWhenDestroyed {
    ~LogsWhenDestroyed() { write("btl", "closing at exit"); }
};

TEST(Log, WritesFromAStaticDestructorAtExit) {
    testing::internal::CaptureStderr();
    pid_t child = fork();
    if (child == 0) {
        write("pml", "first");  // fills the cache the destructor then reads
        static LogsWhenDestroyed closes_at_exit;
        std::exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    std::string out = testing::internal::GetCapturedStderr();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    EXPECT_NE(out.find(":" + std::to_string(child) + "] btl: closing at exit\n"), std::string::npos)
        << out;
}

}  // namespace
}  // namespace transit::log
