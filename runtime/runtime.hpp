// Opening the runtime: the PMIx client when a launcher started us, a singleton
// job of one otherwise.
#pragma once

#include <memory>

#include "transit/runtime.hpp"

namespace transit::rt {

enum class FenceMode {
    self_driven,  // Transit calls PMIx_Fence itself (transit_run, mpirun, srun)
    host_driven,  // a host (Open MPI's BTL adapter) runs the fence; modex_send
                  // commits and fence() only refreshes
};

// Never returns null; throws std::runtime_error only for a launcher that
// answers but is broken.
std::unique_ptr<Runtime> open_runtime(FenceMode mode = FenceMode::self_driven);

// Registers the runtime's parameters (runtime_fence_timeout, runtime_names_dir);
// idempotent.
// open_runtime() calls it; tools call it to list them.
void register_params();

// A runtime for one process alone, usable without any launcher (tests, tools).
std::unique_ptr<Runtime> singleton_runtime();

}  // namespace transit::rt
