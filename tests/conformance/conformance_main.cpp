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

class FailurePrinter : public ::testing::EmptyTestEventListener {
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (!r.failed()) return;
        const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
        fmt::print(stderr, "[rank 1] {}.{}: {}:{}: {}\n", t ? t->test_suite_name() : "",
                   t ? t->name() : "", r.file_name() ? r.file_name() : "", r.line_number(),
                   r.message());
    }
};

bool launched_by_pmix() {
    return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

int run(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
            std::fputs(usage, stdout);
            break;  // GoogleTest prints its own options after ours
        }
    }
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
    if (env.two_process && env.runtime->rank() != 0) {
        // Rank 1 only services: its per-case lines would double the output, so
        // it prints just its failures.
        ::testing::TestEventListeners& l = ::testing::UnitTest::GetInstance()->listeners();
        std::unique_ptr<::testing::TestEventListener> printer(
            l.Release(l.default_result_printer()));
        l.Append(std::make_unique<FailurePrinter>().release());  // gtest owns listeners
    }
    const int rc = RUN_ALL_TESTS();
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
