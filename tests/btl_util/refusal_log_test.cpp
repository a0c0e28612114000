// RefusalLog: the first refusals of a window are warnings with who and why,
// the last of them says that the rest are counted, the rest go to verbose
// level 1 only, and the count is said once, when the window is over.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transit/btl/util/refusal_log.hpp"

namespace transit::test {
namespace {

using btl::util::RefusalLog;

struct Captured {
    std::vector<std::string> lines;
};

void capture(const log::Line& line, void* arg) {
    static_cast<Captured*>(arg)->lines.push_back(fmt::format(
        "{}/{}/{}", line.severity == log::Severity::warning ? "W" : "V", line.source, line.text));
}

class RefusalLogTest : public testing::Test {
  protected:
    void SetUp() override { log::set_sink(capture, &captured); }
    void TearDown() override { log::set_sink(nullptr, nullptr); }
    Captured captured;
};

TEST_F(RefusalLogTest, FirstOfAWindowLoggedTheRestCounted) {
    RefusalLog refusals("clients", 3);
    const log::Stream out("btl:vader", 1);
    for (int pid = 1; pid <= 3; ++pid)
        EXPECT_TRUE(refusals.refused(out, "vader", "without the token", "a client (pid {})", pid));
    EXPECT_FALSE(refusals.refused(out, "vader", "without the token", "a client (pid {})", 4));
    EXPECT_FALSE(refusals.refused(out, "vader", "garbage", "a client (pid {})", 5));
    EXPECT_EQ(refusals.total(), 5u);
    refusals.report_unlogged("vader", log::Limiter::Clock::time_point::max());
    refusals.report_unlogged("vader", log::Limiter::Clock::time_point::max());  // said once
    const std::vector<std::string> expected{
        "W/warning/vader: refused a client (pid 1): without the token",
        "W/warning/vader: refused a client (pid 2): without the token",
        "W/warning/vader: refused a client (pid 3): without the token (further refusals in this "
        "window are counted)",
        "V/btl:vader/vader: refused a client (pid 4): without the token",
        "V/btl:vader/vader: refused a client (pid 5): garbage",
        "W/warning/vader: 2 more clients refused (at most 3 logged every 10 s)",
    };
    EXPECT_EQ(captured.lines, expected);
}

TEST_F(RefusalLogTest, CountedRefusalsAreSilentBelowVerboseOne) {
    RefusalLog refusals("one-sided requests", 1, std::chrono::milliseconds(2500));
    const log::Stream quiet("btl:tcp", 0);
    EXPECT_TRUE(
        refusals.refused(quiet, "tcp", "not_found", "{} at 0x{:x} from rank {}", "a put", 4096, 1));
    EXPECT_FALSE(
        refusals.refused(quiet, "tcp", "not_found", "{} at 0x{:x} from rank {}", "a get", 8192, 1));
    refusals.report_unlogged("tcp", log::Limiter::Clock::time_point::max());
    const std::vector<std::string> expected{
        "W/warning/tcp: refused a put at 0x1000 from rank 1: not_found (further refusals in this "
        "window are counted)",
        "W/warning/tcp: 1 more one-sided requests refused (at most 1 logged every 2.5 s)",
    };
    EXPECT_EQ(captured.lines, expected);
}

}  // namespace
}  // namespace transit::test
