// The multi-process test harness: GoogleTest programs whose every rank runs
// the same cases.  Link transit_mp_gtest_main (it provides main()) and start
// the program with `transit_run -n N program`; see README.md.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/runtime.hpp"
#include "transit/runtime.hpp"

namespace transit::mp {

// The job's runtime, opened by the harness's main() before the first test
// (a singleton of one when the program is run without a launcher).
rt::Runtime& runtime();

inline Rank rank() {
    return runtime().rank();
}
inline std::uint32_t size() {
    return runtime().size();
}

// Returns once every rank has called it; fails the calling test (and returns
// false) when a peer is gone.  The harness also runs one before every test,
// so a test never sees modex data from a peer still in the previous test.
bool barrier();

// Publishes `mine` under `key`, fences, and returns every rank's blob in rank
// order (empty vector for a rank that published nothing).  A collective: every
// rank must call it with the same key.
std::vector<std::vector<std::byte>> all_gather(std::string_view key,
                                               std::span<const std::byte> mine);

}  // namespace transit::mp
