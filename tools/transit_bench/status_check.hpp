// The benchmarks' answer to a failed pml call: an exception naming the call
// and the status, which main() prints before exiting with status 1.
#pragma once

#include <fmt/format.h>

#include <stdexcept>

#include "transit/status.hpp"

namespace transit::bench {

inline void check(Status s, const char* what) {
    if (!ok(s)) throw std::runtime_error(fmt::format("{} failed: {}", what, to_string(s)));
}

}  // namespace transit::bench
