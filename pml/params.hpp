// The pml's parameters (pml_base_*): registered by the engine, and by tools
// that list every parameter without starting one (transit_info).
#pragma once

#include "pml/settings.hpp"

namespace transit::pml {

void register_params();

// The settings the registry's current values give (register_params first).
Settings bound_settings();

}  // namespace transit::pml
