// Keeping a plugin's libraries mapped after the plugin is unloaded.
#pragma once

#include <cstddef>
#include <span>
#include <string>

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

// Loads a library that a plugin needs only once it is started, rather than
// linking it: loading libfabric runs its providers' constructors (a quarter of a
// second calibrating clocks), a cost a job that never starts the plugin must
// not pay.  The library stays until the process exits (as with keep_loaded),
// and any signal handler its constructors installed is taken back (libpsm's
// call exit() on SIGTERM).  Returns the handle for dlsym, or nullptr with
// `error` set to the loader's reason.
void* load_for_good(const char* soname, std::string& error);

}  // namespace transit::mca
