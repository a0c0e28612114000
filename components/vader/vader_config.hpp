// The vader component's parameters as the module reads them, and the choice
// of single copy they start from.  The component fills Config from its
// parameter table (vader_component.cpp) and decides on single copy before
// it creates the module; a process alone on its node decides when it makes
// its segment (VaderOutside::ensure_segment).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transit/btl/base_params.hpp"

namespace transit::vader {

enum class SingleCopy { none, cma };
// btl_vader_single_copy_mechanism, in the order of its choices.
enum class SingleCopyMechanism { automatic, cma, none };

struct Config : btl::BaseConfig {
    std::uint32_t fbox_size = 16384;
    std::uint32_t fbox_threshold = 16;
    std::uint32_t dynamic_fast_boxes = 8;
    double join_timeout = 10;          // seconds a server outside the job may take to answer a join
    std::uint32_t light_sleep = 1000;  // µs a sleep without the membarrier may last (0: none)
    std::uint32_t fifo_size = 4096;
    std::size_t segment_size = 8u << 20;
    std::size_t heap_size = std::size_t{1} << 30;
    SingleCopyMechanism mechanism = SingleCopyMechanism::automatic;
    SingleCopy single_copy = SingleCopy::cma;
    bool explicit_cma = false;    // asked for by name: a failure is worth a louder line
    bool cma_probe_fail = false;  // testing only
    std::string backing_directory = "/dev/shm";
};

// Decides on single copy (a probe of the own process); says why it is off.
void decide_single_copy(Config& c);

}  // namespace transit::vader
