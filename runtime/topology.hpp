// The machine's topology through hwloc, loaded once per process on first use.
#pragma once

#include <string>
#include <string_view>

namespace transit::rt::topo {

// The NUMA node holding every CPU this process may run on; -1 when they span
// several NUMA nodes or the topology is unknown.  (On a machine with a single
// NUMA node an unbound process is therefore on node 0.)
int numa_node() noexcept;

// The CPUs this process may run on, as an hwloc list string ("0-3", "2,6").
// Empty when the binding cannot be read.
std::string binding();

// How far a PCI device ("0000:3b:00.0" or "3b:00.0") is from this process:
// 0 when the device is attached to the NUMA node(s) the process runs on, larger
// further away (the firmware's relative NUMA distance when it gives one, else 1),
// -1 when the device or the process's placement is unknown.
int distance_to_device(std::string_view pci_bus_id);

}  // namespace transit::rt::topo
