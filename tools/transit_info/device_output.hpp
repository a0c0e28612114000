// transit_info --devices: for each component, what it would use on this machine
// and what it leaves out and why, in the tool's three forms (table, --parsable,
// --json).  The content comes from the components (their describe_devices
// hook) and, for one that is not open, from its record's state and reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "framework/repository.hpp"
#include "transit/devices.hpp"

namespace transit::info {

struct ComponentDevices {
    mca::ComponentRecord record;
    // nullopt: not open (the record says why), or open without the hook.
    std::optional<mca::DeviceReport> report;
    std::string error;  // what the hook threw, if it did
};

std::string format_devices_table(const std::vector<ComponentDevices>& all);
std::string format_devices_parsable(const std::vector<ComponentDevices>& all);
std::string format_devices_json(const std::vector<ComponentDevices>& all);

}  // namespace transit::info
