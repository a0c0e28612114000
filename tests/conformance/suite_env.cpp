#include "tests/conformance/suite_env.hpp"

#include <algorithm>

#include "framework/btl_framework.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/progress.hpp"

namespace transit::conformance {

SuiteEnv& suite_env() {
    static SuiteEnv env;
    return env;
}

std::vector<std::string> components_under_test() {
    SuiteEnv& env = suite_env();
    if (!env.component.empty()) return {env.component};
    // Every suite instantiates from this list: discover once.
    static std::vector<std::string> cached;
    static bool discovered = false;
    if (discovered) return cached;
    discovered = true;
    // Discovery opens the framework without init: nothing touches the runtime
    // or the network, it only learns which plugins load and are selected.
    ProgressEngine progress;
    btl::AmTable am;
    btl::Framework fw(*env.runtime, progress, am);
    fw.open();
    std::vector<std::string> names;
    for (const mca::ComponentRecord& r : fw.records()) {
        using mca::ComponentState;
        if (r.state == ComponentState::opened || r.state == ComponentState::declined ||
            r.state == ComponentState::active)
            names.push_back(r.name);
    }
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    cached = names;
    return names;
}

std::vector<std::size_t> log_sizes(std::size_t max) {
    std::vector<std::size_t> sizes{0};
    for (std::size_t p = 1; p <= max; p <<= 1) {
        for (std::size_t s : {p - 1, p, p + 1})
            if (s > sizes.back() && s <= max) sizes.push_back(s);
    }
    return sizes;
}

}  // namespace transit::conformance
