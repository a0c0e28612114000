// Before any case runs: is the component under test there, and does it open
// on this machine?  A misspelt name or a plugin that failed to load is a usage
// error; a component that declines (no device) is a skip, with its reason.
#pragma once

#include <string>

#include "transit/runtime.hpp"

namespace transit::conformance {

// The program's exit statuses besides 0 and GoogleTest's 1.
inline constexpr int exit_usage = 2;     // unknown component, refused plugin, bad option
inline constexpr int exit_skipped = 77;  // nothing was tested (automake's and ctest's "skip")

struct ComponentCheck {
    int status = 0;       // 0, exit_usage or exit_skipped
    std::string message;  // one line for stderr when status != 0
};

// Loads the btl plugins and opens the framework (no init: nothing touches the
// network) to learn what became of `name`.
ComponentCheck check_component(rt::Runtime& runtime, const std::string& name);

// Both ranks of a two-process job must take the same way out, else one waits
// for the other in a fence: each learns the other's status (through the modex)
// and the worse of the two is returned.  A rank whose own check passed gets a
// message naming the rank that failed.
ComponentCheck agree(rt::Runtime& runtime, const ComponentCheck& mine);

}  // namespace transit::conformance
