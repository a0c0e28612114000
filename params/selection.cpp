// The framework selection grammar: "a,b" keeps only a and b, "^a,b" keeps all
// but a and b.  A mixed list ("a,^b") has no sensible meaning, so it is an error.
#include <fmt/format.h>

#include <algorithm>

#include "params/values.hpp"
#include "transit/log.hpp"
#include "transit/params.hpp"

namespace transit::params {

namespace {

bool contains(const std::vector<std::string>& v, std::string_view s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool Selection::selects(std::string_view name) const {
    if (names.empty()) return true;
    return contains(names, name) != exclude;
}

Selection parse_selection(std::string_view text, const std::vector<std::string>& known,
                          std::string_view param_name) {
    Selection sel;
    std::string_view body = trim(text);
    if (body.empty()) return sel;
    if (body.front() == '^') {
        sel.exclude = true;
        body.remove_prefix(1);
    }
    for (std::string& name : split_trimmed(body, ',')) {
        if (name.find('^') != std::string::npos)
            throw Error(fmt::format(
                "parameter {}: value {} has '^' inside the list; '^' may only come first, "
                "and then excludes every name of the list (e.g. ^a,b)",
                param_name, quoted(text)));
        if (name.empty())
            throw Error(
                fmt::format("parameter {}: value {} has an empty name; expected "
                            "comma-separated names, e.g. a,b or ^a,b",
                            param_name, quoted(text)));
        sel.names.push_back(std::move(name));
    }
    if (known.empty()) return sel;
    for (const std::string& name : sel.names) {
        if (contains(known, name)) continue;
        if (!sel.exclude)
            throw Error(
                fmt::format("parameter {}: value {} names {}, which is not known; "
                            "known: {}",
                            param_name, quoted(text), printable(name), fmt::join(known, ", ")));
        log::warn("parameter {}: value {} excludes {}, which is not known (known: {})", param_name,
                  quoted(text), printable(name), fmt::join(known, ", "));
    }
    return sel;
}

}  // namespace transit::params
