// "Did you mean ...?" for misspelled parameter names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace transit::params {

std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name`, or "" when none is close enough to be a
// plausible typo (a few edits, scaled with the length of the name).
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace transit::params
