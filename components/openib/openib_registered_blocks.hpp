// Page-aligned blocks of zeroed memory registered for local write with one
// protection domain (send fragments, receive buffers, the connection
// manager's slots), kept until their owner goes.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "openib_verbs.hpp"

namespace transit::openib {

class RegisteredBlocks {
  public:
    struct Block {
        std::byte* data;
        std::uint32_t lkey;
    };
    // A new block of at least `bytes`; throws std::runtime_error with the
    // reason (no memory, or the registration failed).
    Block add(ibv_pd* pd, std::size_t bytes);

  private:
    struct FreeDeleter {
        void operator()(std::byte* p) const noexcept;
    };
    struct Owned {
        std::unique_ptr<std::byte, FreeDeleter> memory;
        verbs::MemoryRegion mr;  // declared last: deregistered before the free
    };
    std::vector<Owned> owned_;
};

}  // namespace transit::openib
