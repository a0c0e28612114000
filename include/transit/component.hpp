// The plugin boundary.  A plugin file transit_<framework>_<name>.so exports one
// C symbol, transit_<framework>_<name>_component, a ComponentDescriptor.  The
// loader checks every field before it calls the factory, so a plugin built for
// another ABI, framework interface or compiler is refused with a reason instead
// of crashing the process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "transit/devices.hpp"
#include "transit/params.hpp"
#include "transit/version.hpp"

namespace transit::mca {

class Component;

}  // namespace transit::mca

extern "C" {

// Plain data only: this struct is read before the plugin is trusted.  It starts
// with its own size so later versions can grow it.
struct transit_component_descriptor {
    std::uint32_t magic;
    std::uint32_t struct_size;
    std::uint32_t abi_version;  // (major << 16) | minor of the SDK it was built with
    char framework[32];
    std::uint32_t framework_version;
    char name[32];
    std::uint32_t version[3];  // the component's own major.minor.patch
    char build_fingerprint[96];
    // Returns a new component, or nullptr; may throw, the loader catches it.
    transit::mca::Component* (*create)();
    // ABI 3.2, optional: fills `report` with what the component would use on
    // this machine (transit_info --devices); called only after open() accepted.
    // nullptr when the component has no such hook; a descriptor built before
    // 3.2 ends before this field (struct_size says so) and is read as nullptr.
    void (*describe_devices)(const transit::mca::Component* component,
                             transit::mca::DeviceReport* report);
};

}  // extern "C"

namespace transit::mca {

inline constexpr std::uint32_t descriptor_magic = 0x54524e53;  // "TRNS"

// Compiler and C++ library ABI; plugins built with another are refused, since
// C++ objects (std::string, std::vector, vtables) cross the boundary.
#if defined(__clang__)
#define TRANSIT_DETAIL_COMPILER "clang"
#elif defined(__GNUC__)
#define TRANSIT_DETAIL_COMPILER "gcc"
#else
#define TRANSIT_DETAIL_COMPILER "cc"
#endif
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
#define TRANSIT_DETAIL_STDLIB "libstdc++-cxx11"
#elif defined(_LIBCPP_VERSION)
#define TRANSIT_DETAIL_STDLIB "libc++"
#else
#define TRANSIT_DETAIL_STDLIB "libstdc++-old"
#endif
inline constexpr const char build_fingerprint[] =
    TRANSIT_DETAIL_COMPILER "/" TRANSIT_DETAIL_STDLIB "/x86_64-sysv";
#undef TRANSIT_DETAIL_COMPILER
#undef TRANSIT_DETAIL_STDLIB

// Whether a component can run here.  Declining is normal (no device, excluded
// by a parameter); the reason is shown by transit_info and at verbose level.
struct OpenResult {
    bool available = true;
    std::string reason;
    static OpenResult ok() { return {}; }
    static OpenResult decline(std::string why) { return {false, std::move(why)}; }
};

// Base of every component.  Lifecycle: register_params -> open -> (framework
// specific init) -> close.  Each step may throw; the framework turns that into
// a "failed: <what>" state, never a crash.
class Component {
  public:
    virtual ~Component() = default;
    virtual void register_params(params::Registry& registry) { (void)registry; }
    virtual OpenResult open() { return OpenResult::ok(); }
    virtual void close() {}

    const transit_component_descriptor* descriptor = nullptr;  // set by the loader
    std::string name() const { return descriptor ? descriptor->name : ""; }
};

namespace detail {
constexpr void copy_name(char (&dst)[32], const char* src) {
    std::size_t i = 0;
    for (; src[i] != '\0' && i + 1 < sizeof dst; ++i) dst[i] = src[i];
    for (; i < sizeof dst; ++i) dst[i] = '\0';
}
template <typename C>
Component* create_component() {
    return std::make_unique<C>().release();  // the loader takes ownership at once
}
// A component describes its devices with a const member
//   void describe_devices(mca::DeviceReport&) const;
// make_descriptor finds it; a component without one leaves the hook empty.
template <typename C>
concept DescribesDevices = requires(const C& c, DeviceReport& r) {
    c.describe_devices(r);
};
template <typename C>
void describe_component_devices(const Component* c, DeviceReport* report) {
    static_cast<const C*>(c)->describe_devices(*report);
}
}  // namespace detail

// Builds the descriptor a plugin exports:
//   extern "C" const transit_component_descriptor transit_btl_self_component =
//       transit::mca::make_descriptor<SelfComponent>("btl", transit::btl_interface_version,
//                                                    "self", {1, 0, 0});
template <typename C>
constexpr transit_component_descriptor make_descriptor(const char* framework,
                                                       std::uint32_t framework_version,
                                                       const char* name,
                                                       const std::uint32_t (&version)[3]) {
    transit_component_descriptor d{};
    d.magic = descriptor_magic;
    d.struct_size = sizeof(transit_component_descriptor);
    d.abi_version = abi_version;
    detail::copy_name(d.framework, framework);
    d.framework_version = framework_version;
    detail::copy_name(d.name, name);
    for (int i = 0; i < 3; ++i) d.version[i] = version[i];
    for (std::size_t i = 0; i < sizeof build_fingerprint; ++i)
        d.build_fingerprint[i] = build_fingerprint[i];
    d.create = &detail::create_component<C>;
    if constexpr (detail::DescribesDevices<C>)
        d.describe_devices = &detail::describe_component_devices<C>;
    return d;
}

}  // namespace transit::mca
