// The component repository: static descriptors first, then plugin files from
// <libdir>/transit and mca_base_component_path.  Every candidate that is refused
// leaves one line in LoadResult::failures; nothing here may take the process down.
#include "framework/repository.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <ltdl.h>

#include <array>
#include <csignal>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <system_error>

#include "framework/plugin_file.hpp"
#include "framework/signal_guard.hpp"
#include "framework/static_components.hpp"
#include "transit/params.hpp"
#include "transit/version.hpp"

namespace transit::mca {

namespace fs = std::filesystem;

std::string_view to_string(ComponentState s) noexcept {
    switch (s) {
        case ComponentState::loaded:
            return "loaded";
        case ComponentState::failed:
            return "failed";
        case ComponentState::declined:
            return "declined";
        case ComponentState::excluded:
            return "excluded";
        case ComponentState::opened:
            return "opened";
        case ComponentState::active:
            return "active";
    }
    return "unknown";
}

LoadedComponent::LoadedComponent(std::shared_ptr<void> library,
                                 std::unique_ptr<Component> component, ComponentRecord record)
    : library_(std::move(library)), component_(std::move(component)), record_(std::move(record)) {}

// The component's code lives in the library: destroy the object before the
// handle can unmap it (members are destroyed in reverse order, but be explicit).
LoadedComponent::~LoadedComponent() {
    component_.reset();
    library_.reset();
}

LoadedComponent::LoadedComponent(LoadedComponent&&) noexcept = default;

// The hook was appended to the descriptor in ABI 3.2: a plugin built before
// has a shorter descriptor, and the bytes after it are not the plugin's.
bool LoadedComponent::describe_devices(DeviceReport& report) const {
    const transit_component_descriptor* d = component_->descriptor;
    constexpr std::size_t needed = offsetof(transit_component_descriptor, describe_devices) +
                                   sizeof(transit_component_descriptor::describe_devices);
    if (d == nullptr || d->struct_size < needed || d->describe_devices == nullptr) return false;
    d->describe_devices(component_.get(), &report);
    return true;
}

LoadedComponent& LoadedComponent::operator=(LoadedComponent&& other) noexcept {
    if (this != &other) {
        component_.reset();
        library_ = std::move(other.library_);
        component_ = std::move(other.component_);
        record_ = std::move(other.record_);
    }
    return *this;
}

namespace {

// --- libltdl ------------------------------------------------------------------

// lt_dlinit/lt_dlexit are process-global and not thread safe.  Every open
// library holds a share of one session; the last one out calls lt_dlexit.
std::mutex ltdl_mutex;

std::shared_ptr<void> ltdl_session() {
    static std::weak_ptr<void> current;
    std::lock_guard lock(ltdl_mutex);
    if (auto s = current.lock()) return s;
    if (lt_dlinit() != 0) return nullptr;
    std::shared_ptr<void> s(reinterpret_cast<void*>(1), [](void*) {
        std::lock_guard inner(ltdl_mutex);
        lt_dlexit();
    });
    current = s;
    return s;
}

// The system loader's own open of a plugin, every symbol bound now.  libltdl
// opens with lazy binding (and offers no advice to change that), so a plugin
// needing a function nobody defines would load, be listed, and end the
// process ("symbol lookup error", exit 127) at its first call of it.  Opened
// here first, the library is relocated in full or refused with the loader's
// reason (bad ELF class, missing dependency, undefined symbol); libltdl's
// open that follows finds it already loaded and bound.
struct BoundNow {
    void* handle = nullptr;
    std::string error;
    BoundNow(const BoundNow&) = delete;
    BoundNow& operator=(const BoundNow&) = delete;
    explicit BoundNow(const std::string& path) {
        ::dlerror();
        handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) {
            const char* e = ::dlerror();
            error = e ? e : "unknown error";
        }
    }
    ~BoundNow() {
        if (handle != nullptr) ::dlclose(handle);
    }
};

struct Opened {
    std::shared_ptr<void> handle;
    std::string error;
};

Opened open_library(const std::string& path) {
    if (std::string refusal = check_plugin_file(path); !refusal.empty()) return {nullptr, refusal};
    std::shared_ptr<void> session = ltdl_session();
    if (!session) return {nullptr, "cannot initialise libltdl"};
    // Constructors run in the first open: the guard covers both.
    SignalDispositionGuard keep_signals;
    const BoundNow bound(path);
    if (bound.handle == nullptr) return {nullptr, "cannot load: " + bound.error};
    lt_dlhandle h;
    std::string ltdl_error;
    {
        std::lock_guard lock(ltdl_mutex);
        h = lt_dlopen(path.c_str());
        if (h == nullptr) {
            const char* e = lt_dlerror();
            ltdl_error = e ? e : "unknown error";
        }
    }
    if (h == nullptr) return {nullptr, "cannot load: " + ltdl_error};
    // The deleter keeps the session alive until the library is closed.
    std::shared_ptr<void> handle(static_cast<void*>(h), [session](void* p) {
        std::lock_guard lock(ltdl_mutex);
        lt_dlclose(static_cast<lt_dlhandle>(p));
    });
    return {std::move(handle), {}};
}

const void* find_symbol(const std::shared_ptr<void>& library, const std::string& symbol) {
    std::lock_guard lock(ltdl_mutex);
    return lt_dlsym(static_cast<lt_dlhandle>(library.get()), symbol.c_str());
}

// --- descriptor fields ----------------------------------------------------------

// Fixed-size name fields may lack their terminator in a broken plugin.
template <std::size_t N>
std::string_view field(const char (&text)[N]) {
    return {text, strnlen(text, N)};
}

std::string abi_text(std::uint32_t v) {
    return fmt::format("{}.{}", v >> 16, v & 0xffff);
}

std::string version_text(const transit_component_descriptor& d) {
    return fmt::format("{}.{}.{}", d.version[0], d.version[1], d.version[2]);
}

std::string built_with(const transit_component_descriptor& d) {
    return fmt::format("Transit ABI {}, {}", abi_text(d.abi_version), field(d.build_fingerprint));
}

constexpr std::size_t descriptor_size_read =
    offsetof(transit_component_descriptor, create) + sizeof(transit_component_descriptor::create);

std::optional<std::uint32_t> interface_version(std::string_view framework) {
    if (framework == "btl") return btl_interface_version;
    return std::nullopt;
}

// --- plugin files ---------------------------------------------------------------

struct Candidate {
    std::string path;
    std::string name;  // component name taken from the file name
};

// transit_<framework>_<name>.so entries of one directory, sorted by name.  Every
// entry with such a name is a candidate, whatever its type, so one that cannot be
// a plugin (a directory, a FIFO) is listed with the reason rather than skipped.
std::vector<Candidate> scan_directory(const std::string& dir, std::string_view framework) {
    const std::string prefix = fmt::format("transit_{}_", framework);
    const std::string suffix = ".so";
    std::vector<Candidate> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string file = it->path().filename().string();
        if (file.size() <= prefix.size() + suffix.size() || !file.starts_with(prefix) ||
            !file.ends_with(suffix))
            continue;
        out.push_back({it->path().string(),
                       file.substr(prefix.size(), file.size() - prefix.size() - suffix.size())});
    }
    std::sort(out.begin(), out.end(),
              [](const Candidate& a, const Candidate& b) { return a.path < b.path; });
    return out;
}

std::string library_directory() {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&component_path), &info) == 0 || info.dli_fname == nullptr)
        return {};
    std::error_code ec;
    fs::path lib = fs::canonical(info.dli_fname, ec);
    if (ec) lib = info.dli_fname;
    return lib.parent_path().string();
}

std::vector<std::string> split_path(std::string_view text) {
    std::vector<std::string> out;
    while (!text.empty()) {
        std::size_t colon = text.find(':');
        std::string_view item = text.substr(0, colon);
        if (!item.empty()) out.emplace_back(item);
        if (colon == std::string_view::npos) break;
        text.remove_prefix(colon + 1);
    }
    return out;
}

// Directory identity, so one directory named twice is scanned once.
std::string directory_key(const std::string& dir) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(dir, ec);
    return ec ? dir : p.string();
}

// --- the loader -----------------------------------------------------------------

class Loader {
  public:
    explicit Loader(std::string_view framework) : framework_(framework) {
        std::optional<std::uint32_t> v = interface_version(framework);
        if (!v) throw std::invalid_argument(fmt::format("no framework named '{}'", framework));
        framework_version_ = *v;
    }

    void add_static(const transit_component_descriptor* d) {
        if (d == nullptr || d->magic != descriptor_magic ||
            field(d->framework) != std::string_view(framework_))
            return;
        accept(nullptr, *d, std::string(field(d->name)), "(static)");
    }

    void add_file(const Candidate& c, const LoadFilter& unwanted) {
        if (auto dup = seen_.find(c.name); dup != seen_.end())
            return fail(c, "duplicate of " + dup->second);
        if (unwanted) {
            if (std::string why = unwanted(c.name); !why.empty()) return exclude(c, std::move(why));
        }
        Opened lib = open_library(c.path);
        if (!lib.handle) return fail(c, lib.error);
        const std::string symbol = fmt::format("transit_{}_{}_component", framework_, c.name);
        const void* sym = find_symbol(lib.handle, symbol);
        if (sym == nullptr) return fail(c, "missing descriptor symbol " + symbol);
        accept(std::move(lib.handle), *static_cast<const transit_component_descriptor*>(sym),
               c.name, c.path);
    }

    LoadResult finish() && {
        std::sort(result_.components.begin(), result_.components.end(),
                  [](const LoadedComponent& a, const LoadedComponent& b) {
                      return a.record().name < b.record().name;
                  });
        return std::move(result_);
    }

  private:
    // A file not loaded: its record, from what its name and path say.
    ComponentRecord unloaded(const Candidate& c, ComponentState state, std::string reason) const {
        ComponentRecord r;
        r.framework = framework_;
        r.name = c.name;
        r.path = c.path;
        r.state = state;
        r.reason = std::move(reason);
        return r;
    }

    void exclude(const Candidate& c, std::string reason) {
        seen_.emplace(c.name, c.path);
        result_.failures.push_back(unloaded(c, ComponentState::excluded, std::move(reason)));
    }

    // `d`, when given, is a refused descriptor: what it was built with is still
    // worth showing, if the descriptor is at least Transit's and large enough.
    void fail(const Candidate& c, std::string reason,
              const transit_component_descriptor* d = nullptr) {
        ComponentRecord r = unloaded(c, ComponentState::failed, std::move(reason));
        if (d != nullptr && d->magic == descriptor_magic &&
            d->struct_size >= descriptor_size_read) {
            r.version = version_text(*d);
            r.built_with = built_with(*d);
        }
        result_.failures.push_back(std::move(r));
    }

    void accept(std::shared_ptr<void> library, const transit_component_descriptor& d,
                const std::string& name, const std::string& path) {
        if (auto dup = seen_.find(name); dup != seen_.end())
            return fail({path, name}, "duplicate of " + dup->second);
        std::string refusal = check_descriptor(d, framework_, name, framework_version_);
        if (!refusal.empty()) return fail({path, name}, std::move(refusal), &d);
        ComponentRecord r;
        r.framework = framework_;
        r.name = name;
        r.version = version_text(d);
        r.path = path;
        r.built_with = built_with(d);
        std::unique_ptr<Component> component = create(d, r);
        if (!component) {
            result_.failures.push_back(std::move(r));
            return;
        }
        component->descriptor = &d;
        seen_.emplace(name, path);
        result_.components.emplace_back(std::move(library), std::move(component), std::move(r));
    }

    // The first plugin code that runs: anything it throws becomes a reason.
    static std::unique_ptr<Component> create(const transit_component_descriptor& d,
                                             ComponentRecord& r) {
        std::string why;
        try {
            if (std::unique_ptr<Component> c(d.create()); c) return c;
            why = "the factory returned no component";
        } catch (const std::exception& e) {
            why = fmt::format("the factory threw: {}", e.what());
        } catch (...) {
            why = "the factory threw an unknown exception";
        }
        r.state = ComponentState::failed;
        r.reason = std::move(why);
        return nullptr;
    }

    std::string framework_;
    std::uint32_t framework_version_ = 0;
    std::map<std::string, std::string> seen_;  // accepted name -> its path
    LoadResult result_;
};

}  // namespace

std::vector<std::string> component_path() {
    std::vector<std::string> dirs;
    std::vector<std::string> keys;
    auto add = [&](const std::string& dir) {
        std::string key = directory_key(dir);
        if (std::find(keys.begin(), keys.end(), key) != keys.end()) return;
        keys.push_back(std::move(key));
        dirs.push_back(dir);
    };
    if (std::string lib = library_directory(); !lib.empty())
        add((fs::path(lib) / TRANSIT_PLUGINDIR_NAME).string());
    if (params::Variable* v = params::registry().find("mca_base_component_path"))
        for (const std::string& dir : split_path(v->text())) add(dir);
    return dirs;
}

LoadResult load_components(std::string_view framework, const LoadFilter& unwanted) {
    Loader loader(framework);
    for (const transit_component_descriptor* d : static_components()) loader.add_static(d);
    for (const std::string& dir : component_path())
        for (const Candidate& c : scan_directory(dir, framework)) loader.add_file(c, unwanted);
    return std::move(loader).finish();
}

std::vector<std::string> component_names(std::string_view framework) {
    std::vector<std::string> names;
    for (const transit_component_descriptor* d : static_components())
        if (d != nullptr && d->magic == descriptor_magic &&
            field(d->framework) == std::string_view(framework))
            names.emplace_back(field(d->name));
    for (const std::string& dir : component_path())
        for (const Candidate& c : scan_directory(dir, framework)) names.push_back(c.name);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
}

std::string check_descriptor(const transit_component_descriptor& d,
                             std::string_view expected_framework, std::string_view expected_name,
                             std::uint32_t framework_version) {
    if (d.magic != descriptor_magic)
        return fmt::format("not a Transit component (bad magic 0x{:08x}, expected 0x{:08x})",
                           d.magic, descriptor_magic);
    if (d.struct_size < descriptor_size_read)
        return fmt::format("descriptor too small ({} bytes, at least {} needed)", d.struct_size,
                           descriptor_size_read);
    const std::uint32_t major = d.abi_version >> 16;
    const std::uint32_t minor = d.abi_version & 0xffff;
    if (major != abi_major || minor > abi_minor)
        return fmt::format("built against Transit ABI {}, this is ABI {}", abi_text(d.abi_version),
                           abi_text(abi_version));
    if (field(d.framework) != expected_framework)
        return fmt::format("descriptor names framework '{}', the file name says '{}'",
                           field(d.framework), expected_framework);
    if (d.framework_version != framework_version)
        return fmt::format("built against {} interface version {}, this is version {}",
                           expected_framework, d.framework_version, framework_version);
    if (field(d.name) != expected_name)
        return fmt::format("descriptor names component '{}', the file name says '{}'",
                           field(d.name), expected_name);
    if (field(d.build_fingerprint) != std::string_view(build_fingerprint))
        return fmt::format("built with {}, this is {}", field(d.build_fingerprint),
                           build_fingerprint);
    if (d.create == nullptr) return "descriptor has no factory";
    return {};
}

}  // namespace transit::mca
