#include "components/vader/vader_config.hpp"

#include "components/vader/vader_cma.hpp"
#include "transit/log.hpp"

namespace transit::vader {

// The peer probe at a peer's first contact is the real proof; this one, at
// init, catches a seccomp filter or a kernel without CMA before anything is
// published.
void decide_single_copy(Config& c) {
    if (c.single_copy == SingleCopy::none) return;
    allow_peer_access();
    std::string why =
        c.cma_probe_fail ? "forced to fail by btl_vader_cma_probe_fail" : cma_self_probe();
    if (why.empty()) return;
    c.single_copy = SingleCopy::none;
    log::warn(
        "vader: single copy (CMA) {}: {}; large messages go through shared-memory "
        "fragments instead",
        c.explicit_cma ? "was requested but does not work" : "disabled", why);
}

}  // namespace transit::vader
