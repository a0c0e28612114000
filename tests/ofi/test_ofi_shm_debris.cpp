// A rank killed while ofi runs leaves no libfabric shm region in /dev/shm.
// libfabric's shm provider maps a 16 MiB region per process, named after its
// pid ("<pid>:<uid>:<n>"); a killed process never removes it.
//
// test_ofi_shm_debris [vader|shm], 2 ranks under `transit_run --keep-going`:
//  - vader (btl=self,vader,ofi, btl_base_lazy=0: every selected component
//    started, as on a node whose ranks also talk across nodes): ofi opens no
//    shared-memory provider where the btl list selects vader, so no rank has
//    a region at all.
//  - shm (btl=self,ofi: shm carries the node's messages): rank 1 has a
//    region; the ofi module listed it (btl::util::Leftovers), so the launcher
//    removes it when it reaps rank 1, while the job goes on.
// Rank 1 sends rank 0 its pid and how many regions it has and, once rank 0
// answered, raises SIGKILL; rank 0 waits until the launcher has reaped it and its regions are
// gone (10 s at most), and prints "shm_debris: PASS" last.
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
#include <string_view>
#include <vector>

#include "transit/transit.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

constexpr std::uint32_t tag_pid = 1;
constexpr std::uint32_t tag_ack = 2;

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

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const bool over_shm = argc > 1 && std::string_view(argv[1]) == "shm";
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
            const std::int64_t report[2] = {
                static_cast<std::int64_t>(::getpid()),
                static_cast<std::int64_t>(regions_of(::getpid()).size())};
            if (!ok(ctx->send(0, tag_pid, report, sizeof report))) return 1;
            // Killed once rank 0 has the report (a send may still be queued
            // when it returns).
            char ack = 0;
            if (!ok(ctx->recv(0, tag_ack, &ack, 1))) return 1;
            std::raise(SIGKILL);
        }
        std::int64_t report[2] = {0, 0};
        check(ok(ctx->recv(1, tag_pid, report, sizeof report)), "receive rank 1's pid");
        const char ack = 1;
        check(ok(ctx->send(1, tag_ack, &ack, 1)), "answer rank 1");
        const std::int64_t victim = report[0];
        if (over_shm) {
            check(report[1] > 0, "rank 1 had no shm region (is shm selected?)");
        } else {
            check(report[1] == 0, "rank 1 had a shm region beside vader");
            for (const std::string& name : regions_of(::getpid()))
                check(false, "a libfabric shm region of this process: /dev/shm/" + name);
        }
        // Gone once the launcher has reaped it (a zombie still answers kill),
        // and its regions once the launcher has removed what it listed.
        const auto until = Clock::now() + std::chrono::seconds(10);
        auto reaped = [&] { return ::kill(static_cast<pid_t>(victim), 0) != 0 && errno == ESRCH; };
        while (victim > 0 && !reaped() && Clock::now() < until) ctx->progress();
        check(victim > 0 && reaped(),
              "rank 1 (pid " + std::to_string(victim) + ") gone within 10 s");
        while (victim > 0 && !regions_of(static_cast<pid_t>(victim)).empty() &&
               Clock::now() < until)
            ctx->progress();
        for (const std::string& name : regions_of(static_cast<pid_t>(victim)))
            check(false, "killed rank 1 left /dev/shm/" + name + " after it was reaped");
        ctx.reset();
    } catch (const std::exception& e) {
        std::printf("shm_debris: FAIL: %s\n", e.what());
        return 1;
    }
    std::printf(failures ? "shm_debris: FAILED\n" : "shm_debris: PASS\n");
    return failures ? 1 : 0;
}
