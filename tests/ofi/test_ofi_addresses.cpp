// btl/ofi's address vector against a peer address that leads nowhere: the
// address of an shm endpoint that was closed, as a stale modex value once gave
// it (libfabric 1.17's shm then handed the next rank inserted the same
// fi_addr_t, and rank 0's messages went to rank 1 itself).  The job of two is
// a runtime whose modex is a map this test fills; the closed endpoint is a
// forked child's, as it was another process's in the real job.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/btl_framework.hpp"
#include "tests/fixtures/two_rank_runtime.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/util/leftovers.hpp"
#include "transit/progress.hpp"
#include "transit/runtime.hpp"

namespace {

using namespace transit;
using transit::test::Opened;
using transit::test::TwoRankRuntime;

// The selection must be in the environment before the registry first reads it.
[[maybe_unused]] const bool shm_selected = [] {
    ::setenv("TRANSIT_MCA_btl", "self,ofi", 1);
    ::setenv("TRANSIT_MCA_btl_ofi_provider_include", "shm", 1);
    return true;
}();

// What a forked child wrote to its pipe, its pid and how it ended.
struct ChildReport {
    pid_t pid = -1;  // -1: no child ran (see fork_child)
    int status = 0;  // waitpid's
    std::string text;
    bool exited_zero() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Forks a child that runs body(pipe's write end) and must end itself, and
// waits for it.  With `want_pid` the child is forked through ns_last_pid to
// get that process id (a reused pid, as a long job sees them); pid stays -1
// when that failed (not root, /proc/sys read-only, or other forks won it).
template <typename Body>
ChildReport fork_child(Body body, pid_t want_pid = 0) {
    constexpr int lost_the_pid = 3;
    ChildReport r;
    for (int attempt = 0; attempt < 50 && r.pid < 0; ++attempt) {
        int fds[2];
        if (::pipe(fds) != 0) return r;
        if (want_pid > 0) {
            std::FILE* f = std::fopen("/proc/sys/kernel/ns_last_pid", "w");
            if (f == nullptr) return r;
            std::fprintf(f, "%d", want_pid - 1);
            if (std::fclose(f) != 0) return r;
        }
        const pid_t child = ::fork();
        if (child == 0) {
            ::close(fds[0]);
            if (want_pid > 0 && ::getpid() != want_pid) ::_exit(lost_the_pid);
            body(fds[1]);
            ::_exit(1);
        }
        ::close(fds[1]);
        r.text.clear();
        char buf[512];
        for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.text.append(buf, n);
        ::close(fds[0]);
        ::waitpid(child, &r.status, 0);
        if (want_pid > 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == lost_the_pid) continue;
        r.pid = child;
    }
    return r;
}

// The address of an shm endpoint a child process opened and closed before it
// exited; empty when the child had no shm module.
std::vector<std::byte> closed_endpoint_address() {
    const ChildReport r = fork_child([](int out) {
        TwoRankRuntime runtime;
        std::vector<std::byte> address;
        {
            Opened opened(runtime, "ofi:shm");
            if (opened.module != nullptr) address = runtime.modex_.at({0, "btl.ofi.shm"});
        }
        const bool written =
            ::write(out, address.data(), address.size()) == ssize_t(address.size());
        ::_exit(written ? 0 : 1);
    });
    if (!r.exited_zero()) return {};
    const auto* bytes = reinterpret_cast<const std::byte*>(r.text.data());
    return {bytes, bytes + r.text.size()};
}

std::string region_prefix(pid_t pid) {
    return fmt::format("{}:{}:", pid, ::getuid());
}

void remove_regions_of(pid_t pid) {
    namespace fs = std::filesystem;
    const std::string prefix = region_prefix(pid);
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator("/dev/shm", ec))
        if (e.path().filename().string().starts_with(prefix)) fs::remove(e.path(), ec);
}

// A child that opens ofi's shm module, writes whether it has one (and the
// framework's reason when not) to `out`, and then ends as `ending` says.
enum class Ending { normally, killed };

[[noreturn]] void open_shm_and_report(int out, Ending ending) {
    // The test needs the killed child's region under its first name (N = 0).
    // Regions already named after this pid are a dead process's (pids wrap
    // in a long test run): with one there, shm would take the next name.
    if (ending == Ending::killed) remove_regions_of(::getpid());
    TwoRankRuntime runtime;
    bool written = false;
    {
        Opened opened(runtime, "ofi:shm");
        std::string report = opened.module != nullptr ? "opened" : "declined";
        if (opened.module == nullptr)
            for (const mca::ComponentRecord& r : opened.fw->records())
                if (r.name == "ofi") report += ": " + r.reason;
        written = ::write(out, report.data(), report.size()) == ssize_t(report.size());
        ::close(out);
        if (ending == Ending::killed) ::kill(::getpid(), SIGKILL);
    }  // closes the endpoint, which removes its region
    ::_exit(written ? 0 : 1);
}

ChildReport run_child(Ending ending, pid_t want_pid = 0) {
    return fork_child([ending](int out) { open_shm_and_report(out, ending); }, want_pid);
}

bool shm_region_exists(pid_t pid) {
    return std::filesystem::exists("/dev/shm/" + region_prefix(pid) + "0");
}

// A process killed with its shm endpoint open leaves its region in /dev/shm;
// libfabric overwrites a dead process's region, but when the pid has come
// round to a new process, shm finds the region's owner "alive" (itself) and
// fi_enable fails with EBUSY.  A long job (or a test suite) starts enough
// processes for pids to wrap: that process then lost shm altogether.  (The
// second child's btl framework removes the listed region at open, before shm
// sees it; the module's retry on EBUSY covers a region that was not listed.)
TEST(OfiAddresses, ARegionLeftByAKilledProcessWithOurPidDoesNotStopShm) {
    const ChildReport killed = run_child(Ending::killed);
    if (killed.text != "opened") GTEST_SKIP() << "no shm module here: " << killed.text;
    // Listed (btl::util::Leftovers), the region goes when any process of
    // this user opens the btl framework: one of a parallel test run may have.
    if (!shm_region_exists(killed.pid))
        GTEST_SKIP() << "the killed child's region was already removed by another process";
    const ChildReport reborn = run_child(Ending::normally, killed.pid);
    if (reborn.pid < 0) {
        std::filesystem::remove("/dev/shm/" + region_prefix(killed.pid) + "0");
        GTEST_SKIP() << "could not start a process with pid " << killed.pid
                     << " (needs root and a writable ns_last_pid)";
    }
    EXPECT_EQ(reborn.text, "opened") << "a process with the pid of a killed one lost shm";
    EXPECT_FALSE(shm_region_exists(killed.pid))
        << "the stale region of pid " << killed.pid << " was left in /dev/shm";
}

// The module lists its shm region (btl::util::Leftovers) before fi_enable
// makes it: once the killed process is reaped, the next Transit process of
// the user (the btl framework at open, transit_run after a reap) removes it.
TEST(OfiAddresses, AKilledProcessesRegionIsRemovedByTheNextProcess) {
    const ChildReport killed = run_child(Ending::killed);
    if (killed.text != "opened") GTEST_SKIP() << "no shm module here: " << killed.text;
    btl::util::remove_leftovers_of_gone_processes();
    const bool left = shm_region_exists(killed.pid);
    remove_regions_of(killed.pid);
    EXPECT_FALSE(left) << "the killed child's region /dev/shm/" << region_prefix(killed.pid)
                       << "0 was not listed for removal";
}

TEST(OfiAddresses, AClosedEndpointsAddressDoesNotTakeOverAnotherRanks) {
    // Forked before this process loads libfabric.
    const std::vector<std::byte> closed_address = closed_endpoint_address();
    if (closed_address.empty()) GTEST_SKIP() << "libfabric's shm provider is not available here";

    TwoRankRuntime runtime;
    const std::string key = "btl.ofi.shm";
    runtime.modex_[{1, key}] = closed_address;
    Opened opened(runtime, "ofi:shm");
    ASSERT_NE(opened.module, nullptr);
    // Rank 1 first: its insert leaves shm's slot free, and rank 0's then took it.
    const std::vector<Rank> peers{1, 0};
    std::vector<btl::Endpoint*> endpoints(peers.size(), nullptr);
    btl::Reachability reachable(peers.size());
    ASSERT_EQ(opened.module->add_procs(peers, endpoints, reachable), Status::success);
    EXPECT_FALSE(reachable.test(0)) << "rank 1, at a closed endpoint's address, was accepted";
    EXPECT_EQ(endpoints[0], nullptr);
    EXPECT_TRUE(reachable.test(1)) << "rank 0 (this process) was refused";
    EXPECT_NE(endpoints[1], nullptr);
    EXPECT_TRUE(ok(opened.module->del_procs(peers, endpoints)));
}

TEST(OfiAddresses, AnAddressShorterThanTheProvidersIsRefused) {
    TwoRankRuntime runtime;
    const std::string key = "btl.ofi.shm";
    runtime.modex_[{1, key}] = {std::byte{'f'}, std::byte{'i'}, std::byte{'x'}};
    Opened opened(runtime, "ofi:shm");
    if (opened.module == nullptr) GTEST_SKIP() << "libfabric's shm provider is not available here";
    const std::vector<Rank> peers{1};
    std::vector<btl::Endpoint*> endpoints(peers.size(), nullptr);
    btl::Reachability reachable(peers.size());
    ASSERT_EQ(opened.module->add_procs(peers, endpoints, reachable), Status::success);
    EXPECT_FALSE(reachable.test(0)) << "a 3-byte address was handed to libfabric";
    EXPECT_EQ(endpoints[0], nullptr);
}

}  // namespace
