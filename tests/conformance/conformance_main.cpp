// transit_btl_conformance: the btl conformance suite as a program.
//
//   transit_btl_conformance [--component NAME] [--timeout SECONDS] [--max-size SIZE]
//                           [--mca NAME VALUE]... [gtest options]
//   transit_run -n 2 transit_btl_conformance --component tcp
//
// One process: loopback (the module sends to its own rank).  Two processes
// (started by a PMIx launcher): rank 0 drives, rank 1 services.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/runtime.hpp"
#include "tests/conformance/component_check.hpp"
#include "tests/conformance/suite_env.hpp"
#include "transit/params.hpp"

namespace {

using transit::conformance::SuiteEnv;

constexpr const char* usage = R"(transit_btl_conformance: the btl conformance suite

Options (besides GoogleTest's --gtest_* options):
  --component NAME   test this btl component only (default: every component that loads;
                     also TRANSIT_CONFORMANCE_COMPONENT=NAME).  Unless TRANSIT_MCA_btl is
                     set, the btl selection becomes "self,NAME".
  --timeout SECONDS  longest wait for one event before the case fails (default 120)
  --max-size SIZE    largest message and transfer, e.g. 1M (default 4M)
  --mca NAME VALUE   set a parameter (as in every Transit tool)
  --allow-all-skipped
                     exit 0 even when no case ran (every case skipped, or the component
                     declined on this machine)

Exit status: 0 when every case that ran passed and at least one ran; 1 when a case
failed; 2 when the component is unknown, failed to load or is not selected; 77 when
nothing was tested (the component declined, e.g. no device, or every case was skipped).

Run under a launcher with two processes to test a component between processes:
  transit_run -n 2 transit_btl_conformance --component tcp
)";

// Takes "--opt VALUE" or "--opt=VALUE" out of argv; true when found.
bool take_option(int& argc, char** argv, std::string_view opt, std::string& value) {
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        int used = 0;
        if (a == opt && i + 1 < argc) {
            value = argv[i + 1];
            used = 2;
        } else if (a.size() > opt.size() && a.substr(0, opt.size()) == opt &&
                   a[opt.size()] == '=') {
            value = std::string(a.substr(opt.size() + 1));
            used = 1;
        } else {
            continue;
        }
        for (int j = i; j + used <= argc; ++j) argv[j] = argv[j + used];
        argc -= used;
        return true;
    }
    return false;
}

// Takes "--flag" out of argv; true when found.
bool take_flag(int& argc, char** argv, std::string_view flag) {
    for (int i = 1; i < argc; ++i) {
        if (argv[i] != flag) continue;
        for (int j = i; j < argc; ++j) argv[j] = argv[j + 1];
        --argc;
        return true;
    }
    return false;
}

// GoogleTest's help options: it prints its help and runs nothing.
bool asks_for_help(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h" || a == "-?" || a == "/?") return true;
    }
    return false;
}

// The first skip message of the run, to say why nothing ran.
std::string first_skip_reason() {
    const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
    for (int i = 0; i < u.total_test_suite_count(); ++i) {
        const ::testing::TestSuite& suite = *u.GetTestSuite(i);
        for (int j = 0; j < suite.total_test_count(); ++j) {
            const ::testing::TestResult& r = *suite.GetTestInfo(j)->result();
            for (int k = 0; k < r.total_part_count(); ++k)
                if (r.GetTestPartResult(k).skipped()) return r.GetTestPartResult(k).message();
        }
    }
    return "";
}

// A run in which no case passed is not a pass: a plugin author's CI must not go
// green on a transport that never ran.
int nothing_ran(bool allowed) {
    const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
    const std::string reason = first_skip_reason();
    fmt::print(stderr, "transit_btl_conformance: no case ran ({} skipped{}{}){}\n",
               u.skipped_test_count(), reason.empty() ? "" : "; the first because: ", reason,
               allowed ? "" : "; exit status 77 (--allow-all-skipped makes it 0)");
    return allowed ? 0 : transit::conformance::exit_skipped;
}

// Prints rank 1's failures (its gtest output is silenced).  The case's name is
// kept from OnTestStart: gtest holds its own lock while it calls
// OnTestPartResult, so asking it for the current test there deadlocks.
class FailurePrinter : public ::testing::EmptyTestEventListener {
    void OnTestStart(const ::testing::TestInfo& t) override {
        name_ = fmt::format("{}.{}", t.test_suite_name(), t.name());
    }
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (!r.failed()) return;
        fmt::print(stderr, "[rank 1] {}: {}:{}: {}\n", name_, r.file_name() ? r.file_name() : "",
                   r.line_number(), r.message());
    }
    std::string name_;
};

bool launched_by_pmix() {
    return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

// Checks the component named with --component before any case: the exit
// status to end with, or -1 to run the cases.  Listing the cases (ctest's
// discovery) works for a component that declines here.
int check(SuiteEnv& env, bool listing, bool allow_all_skipped) {
    using namespace transit::conformance;
    const ComponentCheck mine = check_component(*env.runtime, env.component);
    // ctest's discovery lists the cases of a declined component without a word.
    const bool quiet = listing && mine.status == exit_skipped;
    const char* skip_note =
        allow_all_skipped ? "; nothing to test"
                          : "; nothing to test: exit status 77 (--allow-all-skipped makes it 0)";
    if (mine.status != 0 && !quiet)
        fmt::print(stderr, "transit_btl_conformance: {}{}\n", mine.message,
                   mine.status == exit_skipped ? skip_note : "");
    const ComponentCheck c = env.two_process ? agree(*env.runtime, mine) : mine;
    if (c.status != mine.status) fmt::print(stderr, "transit_btl_conformance: {}\n", c.message);
    if (c.status == 0 || (c.status == exit_skipped && listing)) return -1;
    if (c.status == exit_skipped && allow_all_skipped) return 0;
    return c.status;
}

int run(int argc, char** argv) {
    const bool help = asks_for_help(argc, argv);
    if (help) std::fputs(usage, stdout);  // GoogleTest prints its own options after ours
    const bool allow_all_skipped = take_flag(argc, argv, "--allow-all-skipped");
    SuiteEnv& env = transit::conformance::suite_env();
    std::string value;
    if (const char* c = std::getenv("TRANSIT_CONFORMANCE_COMPONENT")) env.component = c;
    if (take_option(argc, argv, "--component", value)) env.component = value;
    if (take_option(argc, argv, "--timeout", value))
        env.timeout = std::chrono::seconds(std::stoul(value));
    if (take_option(argc, argv, "--max-size", value))
        env.max_size = transit::params::parse_size(value);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // Sanitizers make every byte slower: keep the time budget, shrink the sizes.
    if (env.max_size > (std::size_t{1} << 20)) env.max_size = std::size_t{1} << 20;
#endif
    // Under valgrind every byte costs ~50x: shrink the sizes, stretch the waits.
    if (const char* preload = std::getenv("LD_PRELOAD");
        preload != nullptr && std::strstr(preload, "vgpreload") != nullptr) {
        if (env.max_size > (std::size_t{256} << 10)) env.max_size = std::size_t{256} << 10;
        env.timeout *= 10;
    }
    // The selection must be in the environment before the registry first reads it.
    if (!env.component.empty() && std::getenv("TRANSIT_MCA_btl") == nullptr) {
        const std::string btl = env.component == "self" ? "self" : "self," + env.component;
        setenv("TRANSIT_MCA_btl", btl.c_str(), 1);
    }
    transit::params::parse_command_line(argc, argv);

    env.runtime =
        launched_by_pmix() ? transit::rt::open_runtime() : transit::rt::singleton_runtime();
    const std::uint32_t size = env.runtime->size();
    if (size > 2) {
        fmt::print(stderr, "transit_btl_conformance: runs with 1 or 2 processes, not {}\n", size);
        return 2;
    }
    env.two_process = size == 2;
    // Discovery and instantiation happen inside InitGoogleTest (the generators).
    ::testing::InitGoogleTest(&argc, argv);
    const bool listing = GTEST_FLAG_GET(list_tests);
    if (!env.component.empty() && !help) {
        if (const int status = check(env, listing, allow_all_skipped); status >= 0) {
            env.runtime.reset();
            return status;
        }
    }
    if (env.two_process && env.runtime->rank() != 0) {
        // Rank 1 only services: its per-case lines would double the output, so
        // it prints just its failures.
        ::testing::TestEventListeners& l = ::testing::UnitTest::GetInstance()->listeners();
        std::unique_ptr<::testing::TestEventListener> printer(
            l.Release(l.default_result_printer()));
        l.Append(std::make_unique<FailurePrinter>().release());  // gtest owns listeners
    }
    int rc = RUN_ALL_TESTS();
    // Rank 1 of two only services rank 0's cases and passes none itself: the
    // verdict is rank 0's.
    const bool driver = !env.two_process || env.runtime->rank() == 0;
    if (rc == 0 && driver && !listing && !help &&
        ::testing::UnitTest::GetInstance()->successful_test_count() == 0)
        rc = nothing_ran(allow_all_skipped);
    env.runtime.reset();
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        fmt::print(stderr, "transit_btl_conformance: {}\n", e.what());
        return 2;
    }
}
