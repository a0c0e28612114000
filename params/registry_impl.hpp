// Internal hooks of the parameter registry, for tests and for the layers of
// libtransit (not part of the SDK).
#pragma once

#include <string>

namespace transit::params {

// Drops the process-wide registry: every registered parameter, every stored
// setting (command line and API included) and the once-only warning memory.
// The next registry() call builds a fresh one, re-reading the system file, the
// user file ($HOME), the files in mca_base_param_files and the environment.
// References to old Variables dangle afterwards.
void reset_for_testing();

// Makes the registry read `path` as the system file instead of
// <libdir>/../etc/transit-mca-params.conf; "" restores the real location.
// Takes effect at the next reset_for_testing() (or first registry() use).
// A path that does not exist means "no system file".
void set_system_file_for_testing(std::string path);

// The system file the registry reads (the override when one is set).
std::string system_file_path();
// $HOME/.transit/mca-params.conf, or "" when HOME is unset.
std::string user_file_path();

}  // namespace transit::params
