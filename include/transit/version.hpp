// The SDK's ABI version.  A plugin records the version it was built against in its
// descriptor; the loader accepts it only when the major numbers are equal and the
// plugin's minor is not newer than the running library's.
#pragma once

#include <cstdint>

namespace transit {

// 3: the btl contract's capability interfaces (Module::rdma(), atomics()) and
// request structs (RdmaRequest, AtomicRequest).
// 3.1: btl::util::Leftovers and remove_leftovers_of_gone_processes
// (transit/btl/util/leftovers.hpp): a plugin built against it calls functions
// a 3.0 library does not have.
// 3.2: the descriptor's optional describe_devices hook (transit/devices.hpp),
// appended at its end: a 3.2 library reads a 3.1 descriptor as having none.
// Also in 3.2: btl::util::MemoryReleaseMonitor (transit/btl/util/memory_release_monitor.hpp),
// which RegistrationCache calls, RegistrationCache::Config::track_releases,
// and btl::util::choose_interface (transit/btl/util/network_interface.hpp).
inline constexpr std::uint32_t abi_major = 3;
inline constexpr std::uint32_t abi_minor = 2;
inline constexpr std::uint32_t abi_version = (abi_major << 16) | abi_minor;

// Interface version of each framework; bumped on any incompatible change to
// that framework's classes.
inline constexpr std::uint32_t btl_interface_version = 6;

inline constexpr const char* version_string = "0.1.0";

}  // namespace transit
