// libFuzzer target for the fragment headers vader reads from a peer's
// segment: the length of a data fragment it delivers (frag_data_length, as
// VaderModule::receive runs it) and the check of an atomic's target
// (atomic_refusal, as VaderAtomics::perform runs it).  The header is the
// input's first 64 bytes, the fragment's payload size the next two.  See
// vader_frag.cmake.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "components/vader/vader_layout.hpp"

namespace vader = transit::vader;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < vader::frag_header_size) return 0;
    vader::FragHeader h;
    std::memcpy(&h, data, sizeof h);
    std::size_t payload_limit = 8192;
    if (size >= vader::frag_header_size + 2)
        payload_limit =
            std::size_t{data[vader::frag_header_size]} << 8 | data[vader::frag_header_size + 1];

    // A data fragment delivers what it claims, cut to what a fragment holds.
    const std::size_t length = vader::frag_data_length(h, payload_limit);
    if (length > payload_limit || length > h.size) __builtin_trap();
    if (h.size <= payload_limit && length != h.size) __builtin_trap();

    // An accepted atomic is aligned to its width and past the first page (an
    // aligned word of that width there is what the CPU atomics need), and names
    // a known kind and, unless it is a compare-and-swap, a known operation.
    const std::size_t width = vader::atomic_width(h);
    if (width != 4 && width != 8) __builtin_trap();
    const bool address_ok = h.address % width == 0 && h.address >= 4096;
    const bool kind_ok =
        h.atomic_kind == vader::AtomicKind::cswap ||
        ((h.atomic_kind == vader::AtomicKind::op || h.atomic_kind == vader::AtomicKind::fop) &&
         transit::btl::is_atomic_op(h.atomic_op));
    if ((vader::atomic_refusal(h) == nullptr) != (address_ok && kind_ok)) __builtin_trap();
    return 0;
}
