// Keeping a plugin's libraries mapped after the plugin is unloaded.
#pragma once

#include <cstddef>
#include <span>

namespace transit::mca {

// Pins the libraries named (sonames such as "libfabric.so.1", or paths) that
// are loaded already, so that they stay until the process exits even when the
// plugin that pulled them in is unloaded; a name that is not loaded is
// skipped, never loaded.  Returns how many were pinned.
//
// For libraries not made to be unloaded: their constructors set up global
// state (configuration tables, provider lists) that their destructors do not
// undo.  Pinned, they behave as in a program linked to them, and
// LeakSanitizer can name them in its suppressions.  Call it when the plugin is
// loaded, from the initializer of a namespace-scope constant: a process may
// list a plugin and unload it without ever opening it.
std::size_t keep_loaded(std::span<const char* const> sonames) noexcept;

}  // namespace transit::mca
