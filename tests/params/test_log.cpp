// transit::log::write: one whole line on stderr, saying who wrote it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tests/params/error_line_regex.hpp"
#include "transit/log.hpp"

namespace transit::log {
namespace {

// A call's mark (taken when it begins) sees this thread's error lines since,
// not another thread's: a failed call's reason is its own.
TEST(Log, ErrorMarkSeesOnlyThisThreadsLinesSinceIt) {
    note_error("before the mark");
    const std::uint64_t mark = error_mark();
    EXPECT_FALSE(wrote_error_since(mark));
    std::thread([] { note_error("another thread's"); }).join();
    EXPECT_FALSE(wrote_error_since(mark));
    EXPECT_EQ(last_error_line(), "before the mark");
    note_error("this thread's");
    EXPECT_TRUE(wrote_error_since(mark));
    EXPECT_EQ(last_error_line(), "this thread's");
    EXPECT_FALSE(wrote_error_since(error_mark()));
}

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

// The suite fails an entry whose output has an error line, found with the
// expression of cmake/TransitTesting.cmake: it must match what error()
// writes, with a rank and without, and nothing else the log writes.
TEST(Log, SuiteErrorLineExpressionMatchesErrorLinesOnly) {
    const std::regex error_line(transit_test::error_line_regex);
    testing::internal::CaptureStderr();
    error("nothing reaches {}", 1);
    std::string out = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(std::regex_search(out, error_line)) << out;

    ::setenv("PMIX_RANK", "12", 1);
    testing::internal::CaptureStderr();
    if (pid_t child = fork(); child == 0) {
        error("from rank {}", 12);
        _exit(0);
    } else {
        int status = 0;
        waitpid(child, &status, 0);
    }
    out = testing::internal::GetCapturedStderr();
    ::unsetenv("PMIX_RANK");
    EXPECT_NE(out.find(" r12] error: from rank 12"), std::string::npos) << out;
    EXPECT_TRUE(std::regex_search(out, error_line)) << out;

    testing::internal::CaptureStderr();
    warn("slow");
    write("btl", "error: quoted in a verbose line");
    Stream("pml", 1).verbose(1, "an error: described");
    out = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(std::regex_search(out, error_line)) << out;
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

struct Captured {
    std::vector<std::string> lines;  // "<severity>/<verbosity>/<source>/<text>"
};

void capture(const Line& line, void* arg) {
    static_cast<Captured*>(arg)->lines.push_back(fmt::format(
        "{}/{}/{}/{}", static_cast<int>(line.severity), line.verbosity, line.source, line.text));
}

// An embedding library takes every line, with its severity, verbosity and
// source, and nothing reaches stderr; nullptr gives stderr back.
TEST(Log, SinkReceivesEveryLineAndStderrNone) {
    Captured c;
    set_sink(capture, &c);
    testing::internal::CaptureStderr();
    error("bad {}", 1);
    warn("odd");
    write("btl:tcp", "plain\n");
    Stream("pml", 20).verbose(15, "detail {}", 2);
    std::string out = testing::internal::GetCapturedStderr();
    set_sink(nullptr, nullptr);
    EXPECT_EQ(out, "");
    ASSERT_EQ(c.lines.size(), 4u);
    EXPECT_EQ(c.lines[0], "0/0/error/bad 1");
    EXPECT_EQ(c.lines[1], "1/0/warning/odd");
    EXPECT_EQ(c.lines[2], "2/0/btl:tcp/plain");
    EXPECT_EQ(c.lines[3], "3/15/pml/detail 2");

    testing::internal::CaptureStderr();
    warn("back on stderr");
    out = testing::internal::GetCapturedStderr();
    EXPECT_NE(out.find("] warning: back on stderr\n"), std::string::npos) << out;
    EXPECT_EQ(c.lines.size(), 4u);
}

// A sink that logs through Transit itself gets that line on stderr instead
// of deadlocking on its own lock.
TEST(Log, SinkThatLogsDoesNotDeadlock) {
    int calls = 0;
    set_sink(
        [](const Line& line, void* arg) {
            ++*static_cast<int*>(arg);
            write("sink", fmt::format("saw {}", line.text));
        },
        &calls);
    testing::internal::CaptureStderr();
    warn("first");
    std::string out = testing::internal::GetCapturedStderr();
    set_sink(nullptr, nullptr);
    EXPECT_EQ(calls, 1);
    EXPECT_NE(out.find("] sink: saw first\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace transit::log
