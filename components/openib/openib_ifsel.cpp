#include "openib_ifsel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "transit/params.hpp"

namespace transit::openib {

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool valid_device_name(std::string_view s) {
    if (s.empty() || s.size() > 63) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '.';
    });
}

IfEntry parse_entry(std::string_view item, std::string_view param_name) {
    auto bad = [&](std::string_view why) {
        return params::Error(
            fmt::format("{}: bad entry '{}' ({}); expected DEVICE or DEVICE:PORT, "
                        "e.g. mlx5_0 or mlx5_0:1",
                        param_name, item, why));
    };
    IfEntry e;
    std::string_view dev = item;
    auto colon = item.find(':');
    if (colon != std::string_view::npos) {
        dev = item.substr(0, colon);
        std::string_view p = item.substr(colon + 1);
        unsigned v = 0;
        auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
        if (p.empty() || ec != std::errc{} || end != p.data() + p.size() || v < 1 || v > 255)
            throw bad("the port must be a number from 1 to 255");
        e.port = v;
    }
    if (!valid_device_name(dev)) throw bad("not a device name");
    e.device = std::string(dev);
    return e;
}

}  // namespace

std::vector<IfEntry> parse_if_list(std::string_view text, std::string_view param_name) {
    std::vector<IfEntry> out;
    text = trim(text);
    if (text.empty()) return out;
    std::size_t start = 0;
    while (true) {
        auto comma = text.find(',', start);
        std::string_view item = trim(text.substr(
            start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
        if (item.empty())
            throw params::Error(fmt::format("{}: empty entry in '{}'", param_name, text));
        IfEntry e = parse_entry(item, param_name);
        if (std::find(out.begin(), out.end(), e) == out.end()) out.push_back(std::move(e));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return out;
}

IfFilter parse_if_filter(std::string_view include, std::string_view exclude) {
    IfFilter f;
    f.include = parse_if_list(include, "btl_openib_if_include");
    f.exclude = parse_if_list(exclude, "btl_openib_if_exclude");
    if (!f.include.empty() && !f.exclude.empty())
        throw params::Error(
            "btl_openib_if_include and btl_openib_if_exclude are both set; set only one");
    return f;
}

IfSelectionResult select_ports(std::span<const PortCandidate> candidates, const IfFilter& filter,
                               bool prefer_closest) {
    IfSelectionResult r;
    r.verdicts.resize(candidates.size());
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        const PortCandidate& c = candidates[i];
        PortVerdict& v = r.verdicts[i];
        auto hit = [&](const IfEntry& e) { return e.matches(c.device, c.port); };
        if (!filter.include.empty()) {
            v.use = std::any_of(filter.include.begin(), filter.include.end(), hit);
            if (!v.use) v.reason = "not in btl_openib_if_include";
        } else {
            v.use = std::none_of(filter.exclude.begin(), filter.exclude.end(), hit);
            if (!v.use) v.reason = "excluded by btl_openib_if_exclude";
        }
    }
    for (const IfEntry& e : filter.include) {
        bool found = std::any_of(candidates.begin(), candidates.end(),
                                 [&](const auto& c) { return e.matches(c.device, c.port); });
        if (!found)
            r.unmatched.push_back(e.port ? fmt::format("{}:{}", e.device, e.port) : e.device);
    }
    // The user's own list wins over topology: they named what they want.
    if (!prefer_closest || !filter.include.empty()) return r;

    int best = -1;
    std::string best_device;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        int d = candidates[i].distance;
        if (r.verdicts[i].use && d >= 0 && (best < 0 || d < best)) {
            best = d;
            best_device = candidates[i].device;
        }
    }
    if (best < 0) return r;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        const PortCandidate& c = candidates[i];
        if (r.verdicts[i].use && c.distance > best) {
            r.verdicts[i].use = false;
            r.verdicts[i].reason =
                fmt::format("farther from this process (distance {}) than {} (distance {})",
                            c.distance, best_device, best);
        }
    }
    return r;
}

}  // namespace transit::openib
