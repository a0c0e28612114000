#include "tools/transit_info/param_filter.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "tools/transit_info/info_output.hpp"

namespace transit::info {

namespace {

bool names(const std::string& wanted, const std::string& actual) {
    return wanted == "all" || wanted == actual;
}

}  // namespace

bool ParamFilter::matches(const params::Variable& v) const {
    return names(framework, v.framework()) && names(component, component_of(v));
}

bool ParamFilter::matches(const mca::ComponentRecord& c) const {
    return names(framework, c.framework) && names(component, c.name);
}

std::string unknown_name(const ParamFilter& f, std::span<const std::string> frameworks,
                         std::span<const mca::ComponentRecord> components,
                         std::span<params::Variable* const> variables) {
    if (f.framework != "all" &&
        std::find(frameworks.begin(), frameworks.end(), f.framework) == frameworks.end())
        return fmt::format("unknown framework '{}'; known: all, {}", f.framework,
                           fmt::join(frameworks, ", "));
    if (f.component == "all") return {};
    std::set<std::string> known;
    for (const mca::ComponentRecord& c : components)
        if (names(f.framework, c.framework)) known.insert(c.name);
    for (const params::Variable* v : variables)
        if (names(f.framework, v->framework())) known.insert(component_of(*v));
    if (known.contains(f.component)) return {};
    return fmt::format("unknown component '{}' in framework {}; known: all, {}", f.component,
                       f.framework, fmt::join(known, ", "));
}

}  // namespace transit::info
