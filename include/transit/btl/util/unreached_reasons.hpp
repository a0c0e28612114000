// The reasons a module's add_procs left peers unreached (btl::UnreachedReason),
// kept for the bml to read after the call.  Setup code: a handful of entries,
// one per peer the module tried and failed.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "transit/btl/module.hpp"

namespace transit::btl::util {

class UnreachedReasons final : public UnreachedReason {
  public:
    // Records why `peer` was not reached (replacing an older reason).
    void set(Rank peer, std::string why) {
        clear(peer);
        reasons_.emplace_back(peer, std::move(why));
    }
    // `peer` was reached, or is forgotten.
    void clear(Rank peer) noexcept {
        std::erase_if(reasons_, [peer](const auto& r) { return r.first == peer; });
    }
    std::string unreached_reason(Rank peer) const override {
        const auto it = std::find_if(reasons_.begin(), reasons_.end(),
                                     [peer](const auto& r) { return r.first == peer; });
        return it == reasons_.end() ? std::string() : it->second;
    }

  private:
    std::vector<std::pair<Rank, std::string>> reasons_;
};

}  // namespace transit::btl::util
