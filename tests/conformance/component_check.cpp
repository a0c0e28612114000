#include "tests/conformance/component_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "framework/btl_framework.hpp"
#include "framework/repository.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/progress.hpp"

namespace transit::conformance {
namespace {

constexpr const char* modex_key = "conformance.component_check";

ComponentCheck usage_error(std::string message) {
    return {exit_usage, std::move(message)};
}

// What opening the framework (with the selection the program set) made of it.
ComponentCheck check_opened(rt::Runtime& runtime, const std::string& name) {
    ProgressEngine progress;
    btl::AmTable am;
    btl::Framework fw(runtime, progress, am);
    fw.open();
    for (const mca::ComponentRecord& r : fw.records()) {
        if (r.name != name) continue;
        switch (r.state) {
            case mca::ComponentState::declined:
                return {exit_skipped,
                        fmt::format("{} declined on this machine: {}", name, r.reason)};
            case mca::ComponentState::excluded:
                return usage_error(fmt::format(
                    "{} is not selected: {} (include it in TRANSIT_MCA_btl)", name, r.reason));
            case mca::ComponentState::failed:
                return usage_error(
                    fmt::format("{} ({}) failed to open: {}", name, r.path, r.reason));
            default:
                return {};
        }
    }
    return usage_error(fmt::format("{} disappeared between loading and opening", name));
}

}  // namespace

ComponentCheck check_component(rt::Runtime& runtime, const std::string& name) {
    std::vector<std::string> available;
    {
        // Loaded and unloaded again: only the names and the loader's verdicts are kept.
        const mca::LoadResult loaded = mca::load_components("btl");
        for (const mca::ComponentRecord& f : loaded.failures)
            if (f.name == name)
                return usage_error(
                    fmt::format("the btl plugin {} ({}) was refused: {}", name, f.path, f.reason));
        for (const mca::LoadedComponent& c : loaded.components)
            available.push_back(c.record().name);
    }
    if (std::find(available.begin(), available.end(), name) == available.end())
        return usage_error(fmt::format(
            "no btl component named \"{}\"; available: {} (plugins are searched in "
            "mca_base_component_path: {})",
            name, available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", ")),
            fmt::join(mca::component_path(), ":")));
    return check_opened(runtime, name);
}

ComponentCheck agree(rt::Runtime& runtime, const ComponentCheck& mine) {
    const auto code = static_cast<std::byte>(mine.status);
    if (Status s = runtime.modex_send(modex_key, {&code, 1}); !ok(s))
        return usage_error(fmt::format("publishing the component check: {}", to_string(s)));
    if (Status s = runtime.fence(); !ok(s))
        return usage_error(fmt::format("fence after the component check: {}", to_string(s)));
    // A usage error outranks a skip: the job must fail, not pass as skipped.
    auto severity = [](int status) { return status == exit_usage ? 2 : status == 0 ? 0 : 1; };
    ComponentCheck worst = mine;
    for (Rank peer = 0; peer < runtime.size(); ++peer) {
        if (peer == runtime.rank()) continue;
        std::vector<std::byte> blob;
        if (Status s = runtime.modex_recv(peer, modex_key, blob); !ok(s) || blob.size() != 1)
            return usage_error(fmt::format("rank {} sent no component check", peer));
        const int theirs = static_cast<int>(blob[0]);
        if (severity(theirs) > severity(worst.status))
            worst = {
                theirs,
                fmt::format("rank {} cannot run the suite (its reason is in its output)", peer)};
    }
    return worst;
}

}  // namespace transit::conformance
