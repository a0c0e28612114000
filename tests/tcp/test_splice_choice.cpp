// The choice between copying and lending put/get payloads (tcp_splice_choice.hpp):
// measured on a real loopback connection when the host has no cache file,
// written to the cache and read back at the next start, overridden by the
// user's btl_tcp_splice_min / btl_tcp_splice_max, and a cache file that is
// damaged or from another host ignored with a line saying why.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "components/tcp/tcp_component.hpp"
#include "components/tcp/tcp_splice_choice.hpp"
#include "transit/params.hpp"

namespace tcp = transit::tcp;
namespace params = transit::params;
using From = tcp::SpliceChoice::From;

namespace {

// XDG_CACHE_HOME pointed at a fresh directory for one test.
class SpliceChoiceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = std::filesystem::temp_directory_path() /
               (std::string("transit-splice-choice-") + info->name() + "-" +
                std::to_string(::getpid()));
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
        ::setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string cache_file() const { return tcp::splice_cache_path(tcp::host_fingerprint()); }
    void write_cache(const std::string& text) const {
        std::filesystem::create_directories(std::filesystem::path(cache_file()).parent_path());
        std::ofstream(cache_file()) << text;
    }
    static std::string joined(const std::vector<std::string>& notes) {
        std::string all;
        for (const std::string& n : notes) all += n + "\n";
        return all;
    }

    std::filesystem::path dir_;
};

std::string cache_text(const std::string& host, const std::string& figures) {
    return "transit tcp splice 2\nhost " + host + "\n" + figures + "\n";
}

}  // namespace

TEST_F(SpliceChoiceTest, CachePathIsUnderXdgCacheHomeAndKeyedByTheHost) {
    const std::string path = cache_file();
    EXPECT_EQ(path.rfind((dir_ / "transit" / "tcp-splice-").string(), 0), 0u) << path;
    EXPECT_NE(tcp::splice_cache_path("cpu=other; cores=1; kernel=1"), path);
}

TEST_F(SpliceChoiceTest, MeasuredOnceThenReadFromTheCache) {
    ASSERT_FALSE(std::filesystem::exists(cache_file()));
    const tcp::SpliceChoice first = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
    ASSERT_EQ(first.from, From::measurement) << joined(first.notes);
    EXPECT_GT(first.measured.copy_mbps, 0);
    EXPECT_GT(first.measured.lend_mbps, 0);
    EXPECT_EQ(first.min, first.measured.lends() ? tcp::lend_min : 0u);
    ASSERT_TRUE(std::filesystem::exists(cache_file()));

    const tcp::SpliceChoice second = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
    EXPECT_EQ(second.from, From::cache) << joined(second.notes);
    EXPECT_TRUE(second.notes.empty()) << joined(second.notes);
    EXPECT_NEAR(second.measured.copy_mbps, first.measured.copy_mbps, 1.0);
    EXPECT_NEAR(second.measured.lend_mbps, first.measured.lend_mbps, 1.0);
    EXPECT_NEAR(second.measured.speedup, first.measured.speedup, 0.001);
    EXPECT_EQ(second.min, first.min);
    EXPECT_NE(second.describe().find("measured earlier on this host"), std::string::npos)
        << second.describe();
}

// The cache's figures decide, whatever this host would measure now.
TEST_F(SpliceChoiceTest, CachedFiguresDecide) {
    write_cache(cache_text(tcp::host_fingerprint(), "copy 1000 lend 3000 speedup 3"));
    tcp::SpliceChoice c = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
    EXPECT_EQ(c.from, From::cache);
    EXPECT_EQ(c.min, tcp::lend_min);
    EXPECT_EQ(c.max, tcp::lend_max);
    EXPECT_NE(c.describe().find("lend put/get payloads of 256 KiB..no limit"), std::string::npos)
        << c.describe();

    write_cache(cache_text(tcp::host_fingerprint(), "copy 3000 lend 1000 speedup 0.33"));
    c = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
    EXPECT_EQ(c.from, From::cache);
    EXPECT_EQ(c.min, 0u);
    EXPECT_NE(c.describe().find("copy put/get payloads"), std::string::npos) << c.describe();
}

TEST_F(SpliceChoiceTest, ExplicitParametersWin) {
    write_cache(cache_text(tcp::host_fingerprint(), "copy 1000 lend 3000 speedup 3"));
    // An explicit min: nothing read, nothing measured, the max parameter as it is.
    tcp::SpliceChoice c = tcp::choose_splice(64 * 1024, std::nullopt, 1 << 20);
    EXPECT_EQ(c.from, From::parameter);
    EXPECT_EQ(c.min, 64u * 1024);
    EXPECT_EQ(c.max, 1u << 20);
    c = tcp::choose_splice(0, std::nullopt, 1 << 20);
    EXPECT_EQ(c.from, From::parameter);
    EXPECT_EQ(c.min, 0u);
    // An explicit max bounds what the host's measurement lends.
    c = tcp::choose_splice(std::nullopt, 2 << 20, 2 << 20);
    EXPECT_EQ(c.from, From::cache);
    EXPECT_EQ(c.min, tcp::lend_min);
    EXPECT_EQ(c.max, 2u << 20);
}

TEST_F(SpliceChoiceTest, DamagedCacheIsIgnoredAndReplaced) {
    const std::pair<const char*, std::string> cases[] = {
        {"not a tcp splice cache",
         "\x7f"
         "ELF garbage\n\n"},
        {"not a tcp splice cache", "transit tcp splice 99\nhost x\ncopy 1 lend 2 speedup 2\n"},
        {"not a tcp splice cache", "transit tcp splice 1\nhost x\ncopy 1 lend 2\n"},
        {"written for another host",
         cache_text("cpu=Other CPU; cores=64; kernel=1.0", "copy 1 lend 2 speedup 2")},
        {"damaged figures line", cache_text(tcp::host_fingerprint(), "copy lots lend 2 speedup 2")},
        {"damaged figures line",
         cache_text(tcp::host_fingerprint(), "copy 1000 lend 5 speedup -1")},
        {"damaged figures line",
         cache_text(tcp::host_fingerprint(), "copy 1000 lend 20 speedup 2 extra")},
        {"damaged figures line", "transit tcp splice 2\nhost " + tcp::host_fingerprint() + "\n"},
    };
    for (const auto& [reason, text] : cases) {
        SCOPED_TRACE(reason);
        write_cache(text);
        const tcp::SpliceChoice c = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
        EXPECT_EQ(c.from, From::measurement);
        ASSERT_EQ(c.notes.size(), 1u) << joined(c.notes);
        EXPECT_NE(c.notes[0].find("ignored the cache " + cache_file() + ": " + reason),
                  std::string::npos)
            << c.notes[0];
        // Replaced by this host's measurement: the next start reads it.
        EXPECT_EQ(tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20).from, From::cache);
    }
}

// A cache directory that cannot be made: measured, used, and said why it is
// measured again at the next start.
TEST_F(SpliceChoiceTest, UnwritableCacheFallsBackToMeasuring) {
    std::ofstream(dir_ / "transit") << "a file where the directory should be";
    tcp::SpliceChoice c = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
    EXPECT_EQ(c.from, From::measurement);
    ASSERT_EQ(c.notes.size(), 2u) << joined(c.notes);
    EXPECT_NE(c.notes[1].find("measured at each start: cannot create"), std::string::npos)
        << c.notes[1];
    c = tcp::choose_splice(std::nullopt, std::nullopt, 1 << 20);
    EXPECT_EQ(c.from, From::measurement);
}

// Through the component: the parameters' source decides whether the host's
// choice applies, and the module reads the chosen range from params().
TEST_F(SpliceChoiceTest, ComponentAppliesTheChoiceUnlessTheUserSetIt) {
    params::Registry& r = params::registry();
    if (r.find("btl_base_verbose") == nullptr)
        r.add("btl", "base", {"verbose", params::Type::integer, "0", "Verbosity", 1});
    write_cache(cache_text(tcp::host_fingerprint(), "copy 1000 lend 3000 speedup 3"));
    {
        tcp::TcpComponent c;
        c.register_params(r);
        ASSERT_TRUE(c.open().available);
        EXPECT_EQ(c.splice_choice().from, From::cache);
        EXPECT_EQ(c.params().splice_min, tcp::lend_min);
        EXPECT_EQ(c.params().splice_max, tcp::lend_max);
        transit::mca::DeviceReport report;
        c.describe_devices(report);
        ASSERT_FALSE(report.notes.empty());
        EXPECT_NE(report.notes[0].find("put/get payloads: lend"), std::string::npos)
            << report.notes[0];
        c.close();
    }
    r.set("btl_tcp_splice_min", "0", params::Source{params::Origin::api});
    {
        tcp::TcpComponent c;
        c.register_params(r);
        ASSERT_TRUE(c.open().available);
        EXPECT_EQ(c.splice_choice().from, From::parameter);
        EXPECT_EQ(c.params().splice_min, 0u);
        c.close();
    }
}
