// What the conformance program was asked to test and how it runs: which
// component(s), in which mode (loopback in one process, or two processes under
// transit_run), with which time and size budget.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "transit/runtime.hpp"

namespace transit::conformance {

struct SuiteEnv {
    // Empty: every btl component that loads here (after the `btl` selection).
    std::string component;
    std::unique_ptr<rt::Runtime> runtime;
    bool two_process = false;           // the job has exactly 2 ranks
    std::chrono::seconds timeout{120};  // one wait; the service waits 10x this
    std::size_t max_size = std::size_t{4} << 20;
};

SuiteEnv& suite_env();

// The component names the suite is instantiated with.  With --component it is
// that one name (even when it fails to load, so the failure is reported); else
// every component the btl framework loads and selects, declined ones included
// (they are skipped with their reason).
std::vector<std::string> components_under_test();

// 0, then 2^k - 1, 2^k, 2^k + 1 for every k, up to `max`: the log range every
// data case walks.
std::vector<std::size_t> log_sizes(std::size_t max);

}  // namespace transit::conformance
