// What one active message of the uct module is made of: the wire header, up
// to two fixed parts and bytes from a convertor, gathered into UCT's buffer by
// the module's pack callback.  Built on the stack for each send; it owns
// nothing and borrows the parts and the convertor for the send's duration.
#pragma once

#include <cstddef>

#include "transit/btl/types.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

struct Gather {
    WireHeader wire;
    const void* part1 = nullptr;
    std::size_t len1 = 0;
    const void* part2 = nullptr;
    std::size_t len2 = 0;
    btl::Convertor* convertor = nullptr;
    std::size_t convertor_len = 0;
    std::size_t total() const noexcept { return sizeof(WireHeader) + len1 + len2 + convertor_len; }
};

}  // namespace transit::uct
