// The openib plugin on a machine without an InfiniBand/RoCE device (this one:
// its kernel has no RDMA support): it loads, declines with one line of reason,
// and prints nothing unless asked to.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "framework/btl_framework.hpp"
#include "runtime/runtime.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/progress.hpp"

namespace {

const std::string reason_prefix = "no InfiniBand/RoCE device found (ibv_get_device_list ";

// Output of a command, stdout and stderr kept apart.
struct Outcome {
    std::string out, err;
    int status = -1;
};

std::filesystem::path bin_dir() {
    return std::filesystem::read_symlink("/proc/self/exe").parent_path();
}

Outcome run(const std::string& env, const std::string& args) {
    const auto errfile = std::filesystem::temp_directory_path() /
                         ("openib_decline_" + std::to_string(getpid()) + ".err");
    const std::string cmd =
        env + " " + (bin_dir() / "transit_info").string() + " " + args + " 2>" + errfile.string();
    Outcome r;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return r;
    std::array<char, 4096> buf;
    while (std::size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
    r.status = pclose(p);
    if (FILE* e = fopen(errfile.c_str(), "r")) {
        while (std::size_t n = fread(buf.data(), 1, buf.size(), e)) r.err.append(buf.data(), n);
        fclose(e);
    }
    std::filesystem::remove(errfile);
    return r;
}

bool have_transit_info() {
    return std::filesystem::exists(bin_dir() / "transit_info");
}

}  // namespace

TEST(OpenibDecline, FrameworkRecordsTheReasonAndNothingIsPrinted) {
    auto runtime = transit::rt::singleton_runtime();
    transit::ProgressEngine progress;
    transit::btl::AmTable am;
    testing::internal::CaptureStderr();
    std::vector<transit::mca::ComponentRecord> records;
    {
        transit::btl::Framework fw(*runtime, progress, am);
        fw.open();
        fw.init();
        records = fw.records();
        for (transit::btl::Module* m : fw.modules())
            EXPECT_EQ(m->name().rfind("openib", 0), std::string::npos) << "an openib module here?";
    }
    const std::string err = testing::internal::GetCapturedStderr();
    auto it = std::find_if(records.begin(), records.end(),
                           [](const auto& r) { return r.name == "openib"; });
    ASSERT_NE(it, records.end()) << "the openib plugin was not found by the loader";
    EXPECT_EQ(it->state, transit::mca::ComponentState::declined) << it->reason;
    EXPECT_EQ(it->reason.rfind(reason_prefix, 0), 0u) << it->reason;
    EXPECT_EQ(it->reason.find('\n'), std::string::npos) << "one line";
    EXPECT_EQ(err.find("openib"), std::string::npos) << "printed at default verbosity:\n" << err;
    EXPECT_EQ(err.find("InfiniBand"), std::string::npos) << err;
}

TEST(OpenibDecline, TransitInfoShowsTheReason) {
    if (!have_transit_info()) GTEST_SKIP() << "transit_info is not built in this tree";
    Outcome r = run("", "--parsable");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("openib"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(reason_prefix), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("openib"), std::string::npos) << "stderr at default verbosity:\n" << r.err;
}

TEST(OpenibDecline, VerboseLevelShowsTheReasonOnce) {
    if (!have_transit_info()) GTEST_SKIP() << "transit_info is not built in this tree";
    Outcome r = run("TRANSIT_MCA_btl_base_verbose=1", "--parsable");
    EXPECT_EQ(r.status, 0) << r.err;
    const auto first = r.err.find(reason_prefix);
    ASSERT_NE(first, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(reason_prefix, first + 1), std::string::npos) << "said twice:\n" << r.err;
}

TEST(OpenibDecline, BadInterfaceListStopsWithTheParameterName) {
    if (!have_transit_info()) GTEST_SKIP() << "transit_info is not built in this tree";
    Outcome r =
        run("TRANSIT_MCA_btl_openib_if_include=mlx5_0 TRANSIT_MCA_btl_openib_if_exclude=mlx5_1",
            "--parsable");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("btl_openib_if_include"), std::string::npos) << r.err;
}

TEST(OpenibDecline, OutOfRangeValueStopsWithTheParameterName) {
    if (!have_transit_info()) GTEST_SKIP() << "transit_info is not built in this tree";
    Outcome r = run("TRANSIT_MCA_btl_openib_credits_per_peer=0", "--parsable");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("btl_openib_credits_per_peer"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("1..65535"), std::string::npos) << r.err;
    r = run("TRANSIT_MCA_btl_openib_eager_limit=32k", "--parsable");  // above max_send_size
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("btl_openib_eager_limit"), std::string::npos) << r.err;
}
