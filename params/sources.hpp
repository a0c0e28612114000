// The raw settings, before any parameter is registered: every "name = value"
// from the files, every TRANSIT_MCA_<name> and every --mca pair, each with the
// place it came from.  Registration later picks a parameter's value from here.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "params/registry_impl.hpp"
#include "transit/params.hpp"

namespace transit::params {

inline constexpr std::string_view env_prefix = "TRANSIT_MCA_";

struct Setting {
    std::string value;
    Source source;
};

// One source level: name (as written, possibly a synonym or deprecated name) -> setting.
using Layer = std::map<std::string, Setting, std::less<>>;

// Every level but the default, indexed by Origin.
using Layers = std::array<Layer, static_cast<std::size_t>(Origin::api) + 1>;

inline Layer& layer(Layers& all, Origin o) {
    return all[static_cast<std::size_t>(o)];
}
inline const Layer& layer(const Layers& all, Origin o) {
    return all[static_cast<std::size_t>(o)];
}

// True for names made of letters, digits and '_' (so any name can be an env variable).
bool valid_name(std::string_view name) noexcept;

// A parameter file is a few short "name = value" lines: a longer line or a
// larger file is a mistake (a log or a binary named by accident), refused
// before it is read into memory.
inline constexpr std::size_t max_line_bytes = 64 * 1024;
inline constexpr std::size_t max_file_bytes = 16 * 1024 * 1024;

// Reads a parameter file into `out` (later lines override earlier ones).  A
// missing file is fine when `must_exist` is false; a malformed line or an
// unreadable, too long or too large file throws Error naming the file (and
// line).
void read_file(const std::string& path, Origin origin, bool must_exist, Layer& out);
// The lines of a parameter file already open, `path` naming it in errors.
void read_lines(std::istream& in, const std::string& path, Origin origin, Layer& out);

// Every TRANSIT_MCA_<name> of the process environment.
Layer read_environment();

}  // namespace transit::params
