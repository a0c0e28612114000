// What transit_info prints, in its three forms: a table for people, one
// key:value line per field for scripts (--parsable), and JSON (--json).
#pragma once

#include <string>
#include <vector>

#include "framework/repository.hpp"
#include "transit/params.hpp"

namespace transit::info {

struct Report {
    std::vector<std::string> frameworks;
    std::vector<mca::ComponentRecord> components;
    std::vector<const params::Variable*> params;  // already filtered
    std::vector<std::string> path;                // only with --path
    int level = 1;
    bool hidden_by_level = false;  // some parameters were above the level
};

std::string format_table(const Report& r);
std::string format_parsable(const Report& r);
std::string format_json(const Report& r);

// transit_info --path alone: the plugin directories, one per line (with
// --parsable, path:component:<dir> lines; with --json, {"component_path": [...]}).
std::string format_path(const std::vector<std::string>& path, bool parsable);
std::string format_path_json(const std::vector<std::string>& path);

// "base" for the framework's own parameters (btl, btl_base_verbose).
std::string component_of(const params::Variable& v);

}  // namespace transit::info
