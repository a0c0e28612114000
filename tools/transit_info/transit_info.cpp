// transit_info: what Transit has loaded, what it refused and why, and every
// parameter with its value and where that value came from.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>

#include "bml/r2.hpp"
#include "framework/btl_framework.hpp"
#include "pml/params.hpp"
#include "runtime/runtime.hpp"
#include "tools/transit_info/device_output.hpp"
#include "tools/transit_info/info_output.hpp"
#include "tools/transit_info/param_filter.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/progress.hpp"
#include "transit/version.hpp"

namespace {

struct Options {
    std::vector<std::string> param;  // framework, component
    int level = 1;
    bool all = false;
    bool path = false;
    bool devices = false;
    bool parsable = false;
    bool json = false;
};

// The frameworks whose parameters transit_info shows.
const std::vector<std::string>& frameworks() {
    static const std::vector<std::string> names = {"btl", "bml", "pml", "runtime", "mca"};
    return names;
}

transit::info::ParamFilter filter_of(const Options& o) {
    if (o.param.size() != 2) return {};
    return {o.param[0], o.param[1]};
}

transit::info::Report build_report(const transit::btl::Framework& btl, const Options& o) {
    const transit::info::ParamFilter filter = filter_of(o);
    transit::info::Report r;
    r.frameworks = frameworks();
    r.level = o.level;
    for (const transit::mca::ComponentRecord& c : btl.records())
        if (filter.matches(c)) r.components.push_back(c);
    std::sort(r.components.begin(), r.components.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    for (transit::params::Variable* v : transit::params::registry().all()) {
        if (!filter.matches(*v)) continue;
        if (v->level() <= o.level)
            r.params.push_back(v);
        else
            r.hidden_by_level = true;
    }
    std::sort(r.params.begin(), r.params.end(),
              [](const auto* a, const auto* b) { return a->full_name() < b->full_name(); });
    if (o.path) r.path = transit::mca::component_path();
    return r;
}

// Each btl component's devices, by name: the open ones describe themselves, the
// others are shown by their record (declined, failed, excluded, with the reason).
std::vector<transit::info::ComponentDevices> devices_of(const transit::btl::Framework& btl,
                                                        const transit::info::ParamFilter& filter) {
    std::vector<transit::info::ComponentDevices> out;
    for (const transit::mca::ComponentRecord& r : btl.records()) {
        if (!filter.matches(r)) continue;
        transit::info::ComponentDevices c{r, std::nullopt, {}};
        try {
            c.report = btl.devices(r.name);
        } catch (const std::exception& e) {
            c.error = e.what();
        }
        out.push_back(std::move(c));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.record.name < b.record.name; });
    return out;
}

int run(int argc, char** argv) {
    transit::params::parse_command_line(argc, argv);

    Options o;
    CLI::App app{fmt::format("transit_info {}: components, their state, and every parameter",
                             transit::version_string)};
    app.add_option("--param", o.param, "Show parameters of FRAMEWORK COMPONENT (each may be 'all')")
        ->expected(2);
    app.add_option("--level", o.level, "Show parameters up to this level (1-9)")
        ->check(CLI::Range(1, 9));
    app.add_flag("--all", o.all, "Everything: all frameworks, components and parameters");
    app.add_flag("--path", o.path,
                 "The directories searched for plugins (alone: only them, one per line)");
    app.add_flag("--devices", o.devices,
                 "For each transport: what it would use on this machine (interfaces, "
                 "transports, providers, ports) and what it leaves out, and why");
    app.add_flag("--parsable", o.parsable,
                 "One mca:<fw>:<component>:param:<name>:<field>:<value> "
                 "line per field");
    app.add_flag("--json", o.json, "JSON output");
    app.footer("Any tool also takes --mca NAME VALUE to set a parameter.");
    app.set_version_flag(
        "--version", fmt::format("transit_info {} (SDK ABI {}.{}, btl interface {})\nplugins: {}",
                                 transit::version_string, transit::abi_major, transit::abi_minor,
                                 transit::btl_interface_version,
                                 fmt::join(transit::mca::component_path(), ":")));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    if (o.all) {
        o.level = 9;
        o.path = true;
        o.param = {"all", "all"};
    } else if (o.path && o.param.empty() && !o.devices) {
        // The path alone, for scripts: no framework is opened for it.
        std::string text =
            o.json ? transit::info::format_path_json(transit::mca::component_path())
                   : transit::info::format_path(transit::mca::component_path(), o.parsable);
        std::fwrite(text.data(), 1, text.size(), stdout);
        return 0;
    }

    auto runtime = transit::rt::singleton_runtime();
    transit::btl::Framework btl(*runtime, transit::progress_engine(), transit::btl::am_table());
    btl.open();
    // The upper layers register their parameters when a job starts; register
    // them here too so the reference is complete.
    transit::rt::register_params();
    transit::bml::register_params();
    transit::pml::register_params();
    transit::params::registry().warn_unknown();

    const auto records = btl.records();
    if (std::string error = transit::info::unknown_name(filter_of(o), frameworks(), records,
                                                        transit::params::registry().all());
        !error.empty()) {
        fmt::print(stderr, "transit_info: --param: {}\n", error);
        return 2;
    }

    if (o.devices) {
        const std::vector<transit::info::ComponentDevices> all = devices_of(btl, filter_of(o));
        std::string text = o.json       ? transit::info::format_devices_json(all)
                           : o.parsable ? transit::info::format_devices_parsable(all)
                                        : transit::info::format_devices_table(all);
        std::fwrite(text.data(), 1, text.size(), stdout);
        // A hook that threw is a broken component, not a machine without devices.
        return std::any_of(all.begin(), all.end(), [](const auto& c) { return !c.error.empty(); })
                   ? 1
                   : 0;
    }

    transit::info::Report report = build_report(btl, o);
    std::string text = o.json       ? transit::info::format_json(report)
                       : o.parsable ? transit::info::format_parsable(report)
                                    : transit::info::format_table(report);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const transit::params::Error& e) {
        fmt::print(stderr, "transit_info: {}\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        fmt::print(stderr, "transit_info: error: {}\n", e.what());
        return 1;
    }
}
