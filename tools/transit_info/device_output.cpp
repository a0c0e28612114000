#include "tools/transit_info/device_output.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace transit::info {
namespace {

bool is_open(const mca::ComponentRecord& r) {
    return r.state == mca::ComponentState::opened || r.state == mca::ComponentState::active;
}

// What to say about an open component that gave no report.
std::string no_report(const ComponentDevices& c) {
    if (!c.error.empty()) return "describing its devices failed: " + c.error;
    return "describes no devices (built without the describe_devices hook)";
}

// Newlines would break the one-line-per-field promise of --parsable.
std::string one_line(std::string s) {
    for (char& ch : s)
        if (ch == '\n' || ch == '\r') ch = ' ';
    return s;
}

}  // namespace

std::string format_devices_table(const std::vector<ComponentDevices>& all) {
    std::string out;
    for (const ComponentDevices& c : all) {
        const mca::ComponentRecord& r = c.record;
        out += fmt::format("{} {}: {}", r.framework, r.name, to_string(r.state));
        if (!r.reason.empty()) out += ": " + r.reason;
        out += "\n";
        if (!is_open(r)) continue;
        if (!c.report) {
            out += fmt::format("  {}\n", no_report(c));
            continue;
        }
        for (const std::string& n : c.report->notes) out += fmt::format("  {}\n", n);
        for (const mca::Device& d : c.report->devices)
            out += fmt::format("  {} {} {}: {}\n", d.used ? "uses" : "leaves out", d.kind, d.name,
                               d.detail);
    }
    return out;
}

std::string format_devices_parsable(const std::vector<ComponentDevices>& all) {
    std::string out;
    for (const ComponentDevices& c : all) {
        const mca::ComponentRecord& r = c.record;
        const std::string key = fmt::format("devices:{}:{}", r.framework, r.name);
        out += fmt::format("{}:state:{}\n", key, to_string(r.state));
        if (!r.reason.empty()) out += fmt::format("{}:reason:{}\n", key, one_line(r.reason));
        if (!is_open(r)) continue;
        if (!c.report) {
            out += fmt::format("{}:note:{}\n", key, one_line(no_report(c)));
            continue;
        }
        for (const std::string& n : c.report->notes)
            out += fmt::format("{}:note:{}\n", key, one_line(n));
        for (const mca::Device& d : c.report->devices)
            out += fmt::format("{}:{}:{}:{}:{}\n", key, d.kind, d.name, d.used ? "used" : "unused",
                               one_line(d.detail));
    }
    return out;
}

std::string format_devices_json(const std::vector<ComponentDevices>& all) {
    using nlohmann::json;
    json list = json::array();
    for (const ComponentDevices& c : all) {
        const mca::ComponentRecord& r = c.record;
        json entry = {{"framework", r.framework},
                      {"name", r.name},
                      {"state", std::string(to_string(r.state))},
                      {"reason", r.reason}};
        json notes = json::array();
        json devices = json::array();
        if (c.report) {
            for (const std::string& n : c.report->notes) notes.push_back(n);
            for (const mca::Device& d : c.report->devices)
                devices.push_back(
                    {{"kind", d.kind}, {"name", d.name}, {"used", d.used}, {"detail", d.detail}});
        } else if (is_open(r)) {
            notes.push_back(no_report(c));
        }
        entry["notes"] = notes;
        entry["devices"] = devices;
        list.push_back(entry);
    }
    return json{{"devices", list}}.dump(2) + "\n";
}

}  // namespace transit::info
