// Handing out a send descriptor (alloc, prepare_src): the fields every
// component sets the same way, so a descriptor leaves a module in one known
// state whatever pool it came from.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transit/btl/types.hpp"

namespace transit::btl::util {

// Points `d` at its segments and gives it the caller's flags and order, with
// no completion callback: the caller sets cbfunc/cbdata/context before send
// when it wants one, and a reused descriptor must not call the last user's.
inline void hand_out(Descriptor& d, Segment* segments, std::uint32_t segment_count,
                     std::uint32_t flags, std::uint8_t order) noexcept {
    d.segments = segments;
    d.segment_count = segment_count;
    d.flags = flags;
    d.order = order;
    d.cbfunc = nullptr;
    d.cbdata = nullptr;
    d.context = nullptr;
}

// sendi's answer when it could not send at once: a descriptor from the
// module's own alloc that holds all `total` bytes, or nullptr (alloc may give
// less than asked, and a short one is no use to the caller).  `Module` is the
// component's own class, so alloc and free are called without the virtual hop.
template <typename Module>
Descriptor* alloc_whole(Module& module, Endpoint* endpoint, std::uint8_t order, std::size_t total,
                        std::uint32_t flags) noexcept {
    Descriptor* d = module.alloc(endpoint, order, total, flags);
    if (d != nullptr && d->segments[0].len < total) {
        module.free(d);
        d = nullptr;
    }
    return d;
}

}  // namespace transit::btl::util
