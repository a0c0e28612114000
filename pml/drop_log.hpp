// Received messages the pml cannot handle or refuses: each is logged, never
// silently lost; the first few of each kind, then a count at the end.
#pragma once

#include <array>
#include <cstddef>

#include "pml/headers.hpp"
#include "transit/btl/types.hpp"
#include "transit/log_limiter.hpp"

namespace transit::pml {

class DropLog {
  public:
    // A message dropped before its handler ran (why: the reason).
    void received(wire::Kind k, const btl::ReceiveDescriptor& d, const char* why) noexcept;
    // A peer's message whose lengths do not add up.
    void malformed(wire::Kind k, std::size_t n, Rank from) noexcept;
    // A peer's message that names (by handle) something of ours it may not:
    // forged, stale, another peer's, or not waiting for it.
    void named(wire::Kind k, Rank from, const char* why) noexcept;
    // A peer's request refused for what it names (a one-sided request
    // without a valid key, a job-control frame from outside the job): the
    // same limit, the same count.
    void refused(wire::Kind k, Rank from, const char* why) noexcept;
    // At the end: the drops that went unlogged.
    void report() const noexcept;

  private:
    bool admit(wire::Kind k) noexcept;
    const char* note(wire::Kind k) const noexcept;
    std::array<log::Limiter, wire::kind_count> drops_{};  // by kind
};

}  // namespace transit::pml
