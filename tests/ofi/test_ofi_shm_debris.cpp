// A rank killed while ofi runs beside vader leaves no libfabric shm region in
// /dev/shm.  libfabric's shm provider maps a 16 MiB region per process, named
// after its pid ("<pid>:0:0"); a killed process never removes it and nothing
// else does.  Where the btl list selects vader, ofi opens no shared-memory
// provider, so there is no region to leave.
//
// Run with 2 ranks under `transit_run --keep-going` with btl=self,vader,ofi
// and btl_base_lazy=0 (every selected component started, as on a node whose
// ranks also talk across nodes): rank 1 sends rank 0 its pid and raises
// SIGKILL; rank 0 waits until the launcher has reaped it, then looks in
// /dev/shm for a region of rank 1's pid or its own, and prints
// "shm_debris: PASS" last.
#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t tag_pid = 1;

// The names in /dev/shm that libfabric's shm gives a region of process `pid`.
std::vector<std::string> regions_of(pid_t pid) {
    std::vector<std::string> found;
    const std::string prefix = std::to_string(pid) + ":";
    DIR* d = ::opendir("/dev/shm");
    if (d == nullptr) return found;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name.starts_with(prefix)) found.push_back(name);
    }
    ::closedir(d);
    return found;
}

}  // namespace

int main() {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    int failures = 0;
    auto check = [&](bool cond, const std::string& what) {
        if (cond) return;
        std::printf("shm_debris: FAIL: %s\n", what.c_str());
        ++failures;
    };
    try {
        auto ctx = std::make_unique<Context>(init());
        if (ctx->size() != 2) {
            std::printf("shm_debris: FAIL: needs 2 ranks, got %u\n", ctx->size());
            return 1;
        }
        if (ctx->rank() == 1) {
            const auto pid = static_cast<std::int64_t>(::getpid());
            if (!ok(ctx->send(0, tag_pid, &pid, sizeof pid))) return 1;
            std::raise(SIGKILL);
        }
        std::int64_t victim = 0;
        check(ok(ctx->recv(1, tag_pid, &victim, sizeof victim)), "receive rank 1's pid");
        for (const std::string& name : regions_of(::getpid()))
            check(false, "a libfabric shm region of this process: /dev/shm/" + name);
        // Gone once the launcher has reaped it (a zombie still answers kill).
        const auto until = Clock::now() + std::chrono::seconds(10);
        while (victim > 0 && ::kill(static_cast<pid_t>(victim), 0) == 0 && Clock::now() < until)
            ctx->progress();
        check(victim > 0 && ::kill(static_cast<pid_t>(victim), 0) != 0 && errno == ESRCH,
              "rank 1 (pid " + std::to_string(victim) + ") gone within 10 s");
        for (const std::string& name : regions_of(static_cast<pid_t>(victim)))
            check(false, "killed rank 1 left /dev/shm/" + name);
        ctx.reset();
    } catch (const std::exception& e) {
        std::printf("shm_debris: FAIL: %s\n", e.what());
        return 1;
    }
    std::printf(failures ? "shm_debris: FAILED\n" : "shm_debris: PASS\n");
    return failures ? 1 : 0;
}
