// The self fragment (send descriptor) and the bounded pool it comes from.
//
// Every fragment and its buffer are created when the module is set up (the
// toolkit's free list, never growing); an empty pool is the module's
// out-of-resource condition.
#pragma once

#include <cstddef>

#include "transit/btl/types.hpp"
#include "transit/btl/util/free_list.hpp"

namespace transit::self {

class FragPool;

struct SelfFrag : btl::Descriptor {
    // Two segments: header + in-place user data (prepare_src), else one.
    btl::Segment segs[2]{};
    std::byte* buffer = nullptr;
    std::size_t capacity = 0;
    FragPool* pool = nullptr;
    SelfFrag* next_free = nullptr;
    bool in_use = false;  // catches a double free, which would corrupt the list
};

// The toolkit's free list; each fragment knows its pool, for free().
class FragPool : public btl::util::FreeList<SelfFrag, btl::util::Locking::when_configured> {
  public:
    // Setup only (may throw std::bad_alloc).  `locking`: several threads may
    // alloc and free at once; single-threaded processes skip the lock entirely.
    void setup(std::size_t count, std::size_t capacity, bool locking) {
        FreeList::setup(
            {.initial = count, .max = count, .buffer_size = capacity, .locking = locking},
            [](SelfFrag& f, std::byte*, std::size_t, void* pool) {
                f.pool = static_cast<FragPool*>(pool);
            },
            this);
    }
};

}  // namespace transit::self
