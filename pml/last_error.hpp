// What transit::last_error() returns: the reason of this thread's last failed
// call, published by the Context method (or C function) that failed.
#pragma once

#include <cstdint>
#include <string_view>

#include "transit/log.hpp"
#include "transit/runtime.hpp"
#include "transit/status.hpp"

namespace transit {
class Context;
}

namespace transit::pml {

// Publishes `reason` (cut at 1 KiB) as this thread's last_error().
void set_last_error(std::string_view reason) noexcept;

// Publishes why `call` failed with `s`: the last error line this thread wrote
// since `mark` (log::error_mark() when the call began), else the call,
// the peer (any_rank: none), the job's size when `ctx` is given (a peer
// beyond it is one outside the job, or none) and the status.  Returns s.
Status call_failed(Status s, std::uint64_t mark, std::string_view call, Rank peer,
                   const Context* ctx) noexcept;

// One API call: remembers where the thread's error lines stood when it began,
// so that on failure the lines it wrote are its reason.  On success the
// check is a comparison; nothing is formatted or allocated.
class ApiCall {
  public:
    explicit ApiCall(std::string_view name) noexcept : name_(name) {}
    Status operator()(Status s, Rank peer = any_rank, const Context* ctx = nullptr) const noexcept {
        if (ok(s)) [[likely]]
            return s;
        return call_failed(s, mark_, name_, peer, ctx);
    }

  private:
    std::string_view name_;
    std::uint64_t mark_ = log::error_mark();
};

}  // namespace transit::pml
