#include "tools/transit_info/info_output.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace transit::info {

std::string component_of(const params::Variable& v) {
    return v.component().empty() ? "base" : v.component();
}

namespace {

std::string version_line(const mca::ComponentRecord& c) {
    std::string s = fmt::format("{} {}", c.name, c.version.empty() ? "?" : c.version);
    s += fmt::format(" ({})", to_string(c.state));
    if (!c.reason.empty()) s += ": " + c.reason;
    return s;
}

// Newlines would break the one-line-per-field promise of --parsable.
std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

}  // namespace

std::string format_table(const Report& r) {
    std::string out;
    for (const std::string& fw : r.frameworks) {
        // Only frameworks with components get a heading: the others (bml,
        // pml, ...) have parameters only, listed below.
        bool heading = false;
        for (const mca::ComponentRecord& c : r.components) {
            if (c.framework != fw) continue;
            if (!heading) out += fmt::format("framework {}:\n", fw);
            heading = true;
            out += fmt::format("  component {}\n", version_line(c));
            if (!c.path.empty()) out += fmt::format("      file: {}\n", c.path);
        }
    }
    if (!r.path.empty()) {
        out += "component path:\n";
        for (const std::string& p : r.path) out += fmt::format("  {}\n", p);
    }
    if (!r.params.empty()) out += "parameters:\n";
    for (const params::Variable* v : r.params) {
        out += fmt::format("  {} = \"{}\"  ({}, level {}, from {})\n", v->full_name(), v->text(),
                           params::to_string(v->type()), v->level(), v->source().describe());
        if (!v->choices().empty())
            out += fmt::format("      one of: {}\n", fmt::join(v->choices(), ", "));
        if (std::string range = params::range_text(*v); !range.empty())
            out += fmt::format("      range: {}\n", range);
        if (!v->deprecated_names().empty())
            out +=
                fmt::format("      deprecated names: {}\n", fmt::join(v->deprecated_names(), ", "));
        if (!v->synonyms().empty())
            out += fmt::format("      synonyms: {}\n", fmt::join(v->synonyms(), ", "));
        out += fmt::format("      {}\n", v->help());
    }
    if (r.hidden_by_level)
        out += fmt::format("(parameters above level {} are hidden: use --level 9 to see all)\n",
                           r.level);
    return out;
}

std::string format_path(const std::vector<std::string>& path, bool parsable) {
    std::string out;
    for (const std::string& p : path)
        out += fmt::format("{}{}\n", parsable ? "path:component:" : "", p);
    return out;
}

std::string format_path_json(const std::vector<std::string>& path) {
    return nlohmann::json{{"component_path", path}}.dump(2) + "\n";
}

std::string format_parsable(const Report& r) {
    std::string out;
    for (const mca::ComponentRecord& c : r.components) {
        std::string key = fmt::format("mca:{}:{}", c.framework, c.name);
        out += fmt::format("{}:version:{}\n", key, c.version);
        out += fmt::format("{}:path:{}\n", key, c.path);
        out += fmt::format("{}:state:{}\n", key, to_string(c.state));
        if (!c.reason.empty()) out += fmt::format("{}:reason:{}\n", key, one_line(c.reason));
    }
    for (const std::string& p : r.path) out += fmt::format("path:component:{}\n", p);
    for (const params::Variable* v : r.params) {
        std::string key =
            fmt::format("mca:{}:{}:param:{}", v->framework(), component_of(*v), v->full_name());
        out += fmt::format("{}:value:{}\n", key, one_line(v->text()));
        out += fmt::format("{}:source:{}\n", key, one_line(v->source().describe()));
        out += fmt::format("{}:type:{}\n", key, params::to_string(v->type()));
        out += fmt::format("{}:level:{}\n", key, v->level());
        out += fmt::format("{}:default:{}\n", key, one_line(v->default_value()));
        out += fmt::format("{}:help:{}\n", key, one_line(v->help()));
        for (const std::string& c : v->choices()) out += fmt::format("{}:choice:{}\n", key, c);
        if (v->min()) out += fmt::format("{}:min:{}\n", key, *v->min());
        if (v->max()) out += fmt::format("{}:max:{}\n", key, *v->max());
        if (v->real_min()) out += fmt::format("{}:min:{}\n", key, *v->real_min());
        if (v->real_max()) out += fmt::format("{}:max:{}\n", key, *v->real_max());
        for (const std::string& d : v->deprecated_names())
            out += fmt::format("{}:deprecated:{}\n", key, d);
        for (const std::string& s : v->synonyms()) out += fmt::format("{}:synonym:{}\n", key, s);
    }
    return out;
}

std::string format_json(const Report& r) {
    using nlohmann::json;
    json doc;
    doc["frameworks"] = r.frameworks;
    json comps = json::array();
    for (const mca::ComponentRecord& c : r.components) {
        comps.push_back({{"framework", c.framework},
                         {"name", c.name},
                         {"version", c.version},
                         {"path", c.path},
                         {"built_with", c.built_with},
                         {"state", std::string(to_string(c.state))},
                         {"reason", c.reason}});
    }
    doc["components"] = comps;
    json ps = json::array();
    for (const params::Variable* v : r.params) {
        const params::Source& s = v->source();
        ps.push_back({{"name", v->full_name()},
                      {"framework", v->framework()},
                      {"component", component_of(*v)},
                      {"value", v->text()},
                      {"default", v->default_value()},
                      {"type", std::string(params::to_string(v->type()))},
                      {"level", v->level()},
                      {"help", v->help()},
                      {"source",
                       {{"origin", std::string(params::to_string(s.origin))},
                        {"where", s.where},
                        {"line", s.line},
                        {"text", s.describe()}}},
                      {"choices", v->choices()},
                      {"min", v->min()        ? json(*v->min())
                              : v->real_min() ? json(*v->real_min())
                                              : json(nullptr)},
                      {"max", v->max()        ? json(*v->max())
                              : v->real_max() ? json(*v->real_max())
                                              : json(nullptr)},
                      {"synonyms", v->synonyms()},
                      {"deprecated", v->deprecated_names()}});
    }
    doc["parameters"] = ps;
    if (!r.path.empty()) doc["component_path"] = r.path;
    return doc.dump(2) + "\n";
}

}  // namespace transit::info
