// `transit_info --param FRAMEWORK COMPONENT`: which frameworks, components and
// parameters it names ("all" for either), and the error for a name that is
// neither, with the names that exist.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "framework/repository.hpp"
#include "transit/params.hpp"

namespace transit::info {

struct ParamFilter {
    std::string framework = "all";
    std::string component = "all";

    bool matches(const params::Variable& v) const;
    bool matches(const mca::ComponentRecord& c) const;
};

// "" when the filter names a known framework and a component of it (a
// component is known when it was found on the path or owns a parameter);
// otherwise the error, listing the known names.
std::string unknown_name(const ParamFilter& f, std::span<const std::string> frameworks,
                         std::span<const mca::ComponentRecord> components,
                         std::span<params::Variable* const> variables);

}  // namespace transit::info
