// Which device ports the openib btl uses: btl_openib_if_include /
// btl_openib_if_exclude ("mlx5_0,mlx5_1:2": a whole device, or one port of it)
// and, when the user did not name ports, the ports closest to the process.
// Pure string and list logic, tested without a device.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace transit::openib {

struct IfEntry {
    std::string device;
    std::uint32_t port = 0;  // 0: every port of the device
    bool matches(std::string_view dev, std::uint32_t p) const noexcept {
        return device == dev && (port == 0 || port == p);
    }
    friend bool operator==(const IfEntry&, const IfEntry&) = default;
};

// Parses one list; throws params::Error naming `param_name` and the bad entry
// (empty entry, bad device name, port not in 1..255).
std::vector<IfEntry> parse_if_list(std::string_view text, std::string_view param_name);

struct IfFilter {
    std::vector<IfEntry> include;
    std::vector<IfEntry> exclude;
};

// Both lists at once is an error (which ports would that mean?).
IfFilter parse_if_filter(std::string_view include, std::string_view exclude);

struct PortCandidate {
    std::string device;
    std::uint32_t port = 0;
    int distance = -1;  // NUMA distance from the process to the device, -1 unknown
};

struct PortVerdict {
    bool use = false;
    std::string reason;  // why not (empty when used)
};

struct IfSelectionResult {
    std::vector<PortVerdict> verdicts;   // one per candidate, same order
    std::vector<std::string> unmatched;  // include entries that matched no port
};

// Applies the filter, then (prefer_closest and no include list) keeps only the
// ports whose device is nearest the process.  Ports with unknown distance are
// never dropped for distance.
IfSelectionResult select_ports(std::span<const PortCandidate> candidates, const IfFilter& filter,
                               bool prefer_closest);

}  // namespace transit::openib
