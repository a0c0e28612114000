// transit_info --devices for tcp: the interfaces open() kept, with their
// addresses, and every other interface of the machine with the reason it is
// left out (down, no usable address, btl_tcp_if_include / btl_tcp_if_exclude).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tcp_component.hpp"

namespace transit::tcp {
namespace {

std::string address_text(const InterfaceAddress& a) {
    return fmt::format("{}/{}", a.address.to_string(), a.prefix);
}

const Interface* find(const std::vector<Interface>& list, const std::string& name) {
    auto it =
        std::find_if(list.begin(), list.end(), [&](const Interface& i) { return i.name == name; });
    return it == list.end() ? nullptr : &*it;
}

bool has(const Interface& i, const InterfaceAddress& a) {
    return std::any_of(i.addresses.begin(), i.addresses.end(),
                       [&](const InterfaceAddress& b) { return b.address == a.address; });
}

}  // namespace

void TcpComponent::describe_devices(mca::DeviceReport& report) const {
    report.notes.push_back("put/get payloads: " + splice_.describe());
    for (const std::string& n : splice_.notes) report.notes.push_back("splice: " + n);
    const bool including = !params_.if_include.empty();
    const std::string filter =
        including
            ? fmt::format("not in btl_tcp_if_include={}", fmt::join(params_.if_include, ","))
            : fmt::format("excluded by btl_tcp_if_exclude={}", fmt::join(params_.if_exclude, ","));
    for (const Interface& seen : discovered_) {
        const Interface* kept = find(interfaces_, seen.name);
        if (kept == nullptr) {
            report.devices.push_back({"interface", seen.name, false, filter});
            continue;
        }
        std::vector<std::string> used;
        for (const InterfaceAddress& a : kept->addresses) used.push_back(address_text(a));
        report.devices.push_back(
            {"interface", seen.name, true,
             fmt::format("{}{}", fmt::join(used, " "), seen.loopback ? " (loopback)" : "")});
        // A CIDR entry in the lists keeps or drops single addresses.
        for (const InterfaceAddress& a : seen.addresses)
            if (!has(*kept, a))
                report.devices.push_back(
                    {"address", fmt::format("{} {}", seen.name, address_text(a)), false, filter});
    }
    for (const SkippedInterface& s : unusable_interfaces())
        report.devices.push_back({"interface", s.name, false, s.reason});
}

}  // namespace transit::tcp
