// What a component would use on this machine, and what it leaves out and why:
// the answer to `transit_info --devices`.  A component fills one through the
// optional describe_devices hook of its descriptor (transit/component.hpp).
#pragma once

#include <string>
#include <vector>

namespace transit::mca {

// One thing a component could use: a network interface, a transport on a
// device, a provider, a port.
struct Device {
    std::string kind;    // "interface", "transport", "provider", "port", ...
    std::string name;    // "lo", "tcp/eth0", "shm"
    bool used = false;   // whether the component would use it here
    std::string detail;  // used: what it uses (addresses, domain); else why not
};

struct DeviceReport {
    // One line on what the component does here as a whole ("shared memory with
    // the processes of this node"), or a decision that concerns no single
    // device ("picks provider tcp").
    std::vector<std::string> notes;
    std::vector<Device> devices;
};

}  // namespace transit::mca
