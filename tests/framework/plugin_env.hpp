// Shared by the loader and framework tests: where the fixture plugins are, and
// whether a plugin file is mapped in this process right now.
#pragma once

#include <dlfcn.h>

#include <string>

#include "params/registry_impl.hpp"
#include "transit/params.hpp"

namespace transit::test {

inline const std::string plugin_root = TRANSIT_TEST_PLUGIN_DIR;
inline const std::string fixture_dir = plugin_root + "/btl";
inline const std::string dup_dir = plugin_root + "/dup";

inline std::string fixture(const std::string& name, const std::string& dir = fixture_dir) {
    return dir + "/transit_btl_" + name + ".so";
}

// RTLD_NOLOAD only finds a library that is already mapped; it takes a reference,
// which is given back at once.
inline bool is_mapped(const std::string& path) {
    void* h = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (h != nullptr) ::dlclose(h);
    return h != nullptr;
}

inline void set_param(const std::string& name, const std::string& value) {
    params::registry().set(name, value, params::Source{params::Origin::api, "", 0});
}

}  // namespace transit::test
