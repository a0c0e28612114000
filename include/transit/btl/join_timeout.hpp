// The bound on a client's wait for a server outside its job, shared by every
// transport that serves such peers (vader, ofi, uct): a server that takes a
// join but never answers it (stopped, or not progressing) would otherwise hold
// the client's operations forever.  Each component lists the declaration in
// its table as btl_<component>_join_timeout and sets a join's deadline with
// join_deadline().
#pragma once

#include <chrono>

#include "transit/params.hpp"

namespace transit::btl {

inline constexpr params::Decl join_timeout_decl =
    params::Decl{"join_timeout", params::Type::real, "10",
                 "Seconds a server outside the job may take to answer a client's join; after "
                 "that the client gives it up and its operations with it end with peer_failed "
                 "(a refused join is answered)",
                 5}
        .real_range(0.001, 1e6);

// The parameter's value (seconds) as a clock duration.
inline std::chrono::steady_clock::duration join_timeout(double seconds) noexcept {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(seconds));
}

// When a join sent now is given up, for a timeout of `seconds`.
inline std::chrono::steady_clock::time_point join_deadline(double seconds) noexcept {
    return std::chrono::steady_clock::now() + join_timeout(seconds);
}

}  // namespace transit::btl
