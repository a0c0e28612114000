// The pml's parameters (pml_base_*): registered by the engine, and by tools
// that list every parameter without starting one (transit_info).
#pragma once

namespace transit::pml {

void register_params();

}  // namespace transit::pml
