// The send fragment of a vader module (its free list is the module's).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "components/vader/vader_layout.hpp"
#include "transit/btl/module.hpp"

namespace transit::vader {

class VaderEndpoint;

// A send fragment: the process-private half of a fragment in our segment.
struct Frag : btl::Descriptor {
    btl::Segment segment{};
    FragHeader* header = nullptr;
    char* payload = nullptr;
    VaderEndpoint* endpoint = nullptr;
    std::uint32_t index = 0;
    bool in_flight = false;
    bool in_use = false;  // taken from frags_
    Frag* next_free = nullptr;
    bool internal = false;  // sent by sendi or an atomic: no user callback
    // In flight to a peer outside the job deleted while it lives: its user saw
    // it cancelled, and it goes back to the list when the peer returns it (a
    // fragment reused earlier could be read as the next connection's).
    bool orphan = false;
    pid_t orphan_of = 0;  // the peer that holds it: back on the list when it exits
    // atomics
    btl::RdmaCompletionFn rdma_cb = nullptr;
    void* local_address = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    void* rdma_context = nullptr;
    void* rdma_cbdata = nullptr;
};

}  // namespace transit::vader
