// transit_info run on a component path holding files that only look like plugins
// (a FIFO, a directory, a truncated library, one built for another machine): it
// finishes, lists each with the reason it was refused, and still shows the real
// components.  A FIFO used to hang it and a truncated library to kill it with
// SIGBUS, so the run has a deadline and its end is checked.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/fixtures/bad_plugin_files.hpp"

extern char** environ;

namespace {

struct InfoRun {
    std::string out;
    int status = -1;
    bool timed_out = false;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs transit_info with `args`, its stdout in a file; kills it after `limit`.
InfoRun run_info(const std::vector<std::string>& args, const std::string& out_file,
                 std::chrono::seconds limit) {
    std::vector<std::string> argv_text{TRANSIT_INFO_PATH};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    InfoRun r;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return r;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            r.timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    r.status = status;
    r.out = slurp(out_file);
    return r;
}

TEST(InfoPlugins, ListsEveryBadFileWithItsReasonAndFinishes) {
    transit::test::BadPluginFiles bad(std::string(TRANSIT_TEST_PLUGIN_DIR) +
                                      "/btl/transit_btl_fixturegood.so");
    const std::string out_file = bad.dir() + "/info.out";
    InfoRun r = run_info({"--mca", "mca_base_component_path", bad.dir(), "--parsable"}, out_file,
                         std::chrono::seconds(60));
    ASSERT_FALSE(r.timed_out) << "transit_info hung";
    ASSERT_TRUE(WIFEXITED(r.status)) << "transit_info died of signal " << WTERMSIG(r.status);
    EXPECT_EQ(WEXITSTATUS(r.status), 0);
    const std::vector<std::string> expected = {
        "mca:btl:fifo:reason:a FIFO (named pipe), not a regular file: not opened",
        "mca:btl:adir:reason:a directory, not a regular file: not opened",
        "mca:btl:trunc:reason:truncated: segment ",
        fmt::format("mca:btl:foreign:reason:built for {}, this is {}\n",
                    transit::test::BadPluginFiles::foreign_machine(),
                    transit::test::uname_machine()),
        "mca:btl:self:state:",  // the installed components are still there
    };
    for (const std::string& line : expected)
        EXPECT_NE(r.out.find(line), std::string::npos) << "missing: " << line << "\n" << r.out;
    for (const char* name : {"fifo", "adir", "trunc", "foreign"})
        EXPECT_NE(r.out.find(fmt::format("mca:btl:{}:state:failed\n", name)), std::string::npos)
            << name;
}

}  // namespace
