// The component repository: finds plugin files, checks their descriptors, loads
// them through libltdl, and records why any candidate was refused.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transit/component.hpp"

namespace transit::mca {

enum class ComponentState {
    loaded,    // descriptor accepted, component object created
    failed,    // refused or broken: see reason
    declined,  // open() said it cannot run here: see reason
    excluded,  // not selected by the framework parameter
    opened,    // open() succeeded
    active,    // init() returned at least one module
};

std::string_view to_string(ComponentState s) noexcept;

// Everything transit_info shows about one component (or failed plugin file).
struct ComponentRecord {
    std::string framework;
    std::string name;        // from the descriptor, or from the file name if unreadable
    std::string version;     // "1.0.0"
    std::string path;        // plugin file, or "(static)"
    std::string built_with;  // ABI and fingerprint recorded by the plugin
    ComponentState state = ComponentState::loaded;
    std::string reason;  // for failed / declined / excluded
};

// A loaded component: the object plus the handle keeping its code mapped.
// Destroying it destroys the object first, then unloads the library.
class LoadedComponent {
  public:
    LoadedComponent(std::shared_ptr<void> library, std::unique_ptr<Component> component,
                    ComponentRecord record);
    ~LoadedComponent();
    LoadedComponent(LoadedComponent&&) noexcept;
    LoadedComponent& operator=(LoadedComponent&&) noexcept;

    Component& component() const { return *component_; }
    // Fills `report` through the descriptor's describe_devices hook; false when
    // the component has none (no hook, or a descriptor older than ABI 3.2).
    // What the hook throws propagates.
    bool describe_devices(DeviceReport& report) const;
    ComponentRecord& record() { return record_; }
    const ComponentRecord& record() const { return record_; }

  private:
    std::shared_ptr<void> library_;  // libltdl handle, closed when the last user goes
    std::unique_ptr<Component> component_;
    ComponentRecord record_;
};

struct LoadResult {
    std::vector<LoadedComponent> components;  // accepted, sorted by name
    // Files not loaded, each with its reason: refused (failed) or not wanted
    // (excluded).
    std::vector<ComponentRecord> failures;
};

// Why a plugin file of this name is not to be loaded; "" when it is wanted.
using LoadFilter = std::function<std::string(std::string_view name)>;

// Loads every component of `framework` from the static table and from the
// plugin directories: <libdir>/transit and then mca_base_component_path.
// A file `unwanted` gives a reason for is not opened: loading a plugin runs its
// dependencies' constructors (libfabric's providers calibrate clocks for a
// quarter of a second), a cost a job that excluded it must not pay.
// Never throws for a bad plugin; records it in failures instead.
LoadResult load_components(std::string_view framework, const LoadFilter& unwanted = {});

// The names of every component of `framework` (static ones and plugin files),
// without loading any.
std::vector<std::string> component_names(std::string_view framework);

// The directories searched, in order (for transit_info --path).
std::vector<std::string> component_path();

// Checks a descriptor without running any of its code; returns "" when it is
// acceptable, else the one-line reason.  `expected_framework` and
// `expected_name` come from the file name.
std::string check_descriptor(const transit_component_descriptor& d,
                             std::string_view expected_framework, std::string_view expected_name,
                             std::uint32_t framework_version);

}  // namespace transit::mca
