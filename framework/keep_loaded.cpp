#include "transit/keep_loaded.hpp"

#include <dlfcn.h>

#include "framework/signal_guard.hpp"

namespace transit::mca {

std::size_t keep_loaded(std::span<const char* const> sonames) noexcept {
    std::size_t pinned = 0;
    for (const char* name : sonames) {
        // RTLD_NOLOAD finds a mapped library only; RTLD_NODELETE sticks to it,
        // so the reference taken here can be given back at once.
        void* handle = ::dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        if (handle == nullptr) continue;
        ::dlclose(handle);
        ++pinned;
    }
    return pinned;
}

void* load_for_good(const char* soname, std::string& error) {
    const SignalDispositionGuard keep_signals;
    void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
        const char* why = ::dlerror();
        error = why ? why : "cannot load";
    }
    return handle;
}

}  // namespace transit::mca
