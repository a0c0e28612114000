#include "ofi_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

#include "transit/keep_loaded.hpp"

namespace transit::ofi {
namespace {

// The soname of the libfabric these headers describe.
constexpr const char* soname = "libfabric.so.1";

Libfabric table;
std::string load_error;

template <typename F>
bool resolve(void* handle, const char* name, F& out) {
    out = reinterpret_cast<F>(::dlsym(handle, name));
    if (out == nullptr) load_error = fmt::format("{} has no {}", soname, name);
    return out != nullptr;
}

void load() {
    void* h = mca::load_for_good(soname, load_error);
    if (h == nullptr) return;
    Libfabric t;
    if (resolve(h, "fi_getinfo", t.getinfo) && resolve(h, "fi_freeinfo", t.freeinfo) &&
        resolve(h, "fi_dupinfo", t.dupinfo) && resolve(h, "fi_fabric", t.fabric) &&
        resolve(h, "fi_strerror", t.strerror))
        table = t;
}

}  // namespace

const Libfabric* load_libfabric(std::string& why) {
    static std::once_flag once;
    std::call_once(once, load);
    if (table.getinfo == nullptr) {
        why = load_error;
        return nullptr;
    }
    return &table;
}

const Libfabric& libfabric() noexcept {
    return table;
}

}  // namespace transit::ofi
