// The size of an atomic's operand, from its atomic_flags: what a transport
// checks the target's alignment and registration against, and moves.
#pragma once

#include <cstddef>

#include "transit/btl/types.hpp"

namespace transit::btl::util {

// 4 bytes with atomic_flags::bits32, else 8.  Also the alignment the target
// needs: a misaligned atomic is not atomic, and a transport refuses it
// (bad_param) before it touches memory.
constexpr std::size_t atomic_width(int flags) noexcept {
    return (flags & atomic_flags::bits32) != 0 ? 4 : 8;
}

}  // namespace transit::btl::util
