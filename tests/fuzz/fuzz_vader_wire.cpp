// libFuzzer target for what vader reads from memory other processes write: a
// peer's segment header (the check before attaching), the FIFO a peer pushes
// into and the owner pops from, and fast-box records.  Built with clang++
// -fsanitize=fuzzer; see vader_wire.cmake.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "components/vader/vader_fastbox.hpp"
#include "components/vader/vader_fifo.hpp"
#include "components/vader/vader_layout.hpp"
#include "tests/fuzz/aligned_buffer.hpp"

namespace vader = transit::vader;

namespace {

using transit::fuzz::Aligned;

// Records the writer never makes (any header, any length) must be refused,
// and whatever is delivered lies inside the box.  (A stale record behind a
// skip is delivered again on the next lap: the reader cannot tell it from a
// new one, as it cannot tell a peer that keeps writing.)
void fuzz_fastbox(std::span<const std::uint8_t> in) {
    if (in.empty()) return;
    const std::uint32_t size = 256u << (in[0] & 3);
    Aligned box(vader::Fastbox::bytes(size));
    vader::FastboxReader reader(box.bytes.get(), size);
    std::byte* data = box.bytes.get() + (vader::Fastbox::bytes(size) - size);
    std::memcpy(data, in.data() + 1, std::min<std::size_t>(in.size() - 1, size));
    std::uint32_t sum = 0;
    for (int round = 0; round < 3; ++round) {
        const int n = reader.poll(
            [&](const char* p, std::uint32_t len, std::uint8_t) {
                const auto* b = reinterpret_cast<const std::byte*>(p);
                if (b < data || b + len > data + size) __builtin_trap();
                for (std::uint32_t i = 0; i < len; ++i) sum += static_cast<std::uint8_t>(b[i]);
            },
            64);
        if (n < 0 || n > 64) __builtin_trap();
    }
    (void)sum;
}

// The owner's FIFO, with slots a peer scribbled on: pops stop at what was not
// published, each pop takes one slot, and refs decode to in-range fields.
void fuzz_fifo_pop(std::span<const std::uint8_t> in) {
    constexpr std::uint32_t capacity = 8;
    Aligned mem(vader::Fifo::bytes(capacity));
    vader::Fifo fifo = vader::Fifo::create(mem.bytes.get(), capacity);
    const std::size_t slots = vader::Fifo::bytes(capacity) - capacity * 16;
    std::memcpy(mem.bytes.get() + slots, in.data(),
                std::min<std::size_t>(in.size(), capacity * 16));
    std::uint64_t head = 0, ref = 0;
    int pops = 0;
    while (fifo.pop(head, ref)) {
        if (++pops > static_cast<int>(capacity) || head != static_cast<std::uint64_t>(pops))
            __builtin_trap();
        if (vader::ref_owner(ref) > 0xffff) __builtin_trap();
        (void)vader::ref_index(ref);
    }
}

// A peer's segment: a valid one with the input XORed over its header and FIFO
// control.  What the check accepts is used as connect() and the sender use it:
// every write lands inside the mapping (ASan would say otherwise), and a push
// into a corrupt FIFO returns instead of spinning.
void fuzz_segment(std::span<const std::uint8_t> in) {
    constexpr std::uint32_t local_size = 3;
    const vader::Layout l = vader::Layout::compute(local_size, 64 * 1024, 512, 256, 16, 8192);
    const std::size_t mapped = l.total + l.heap_size;
    Aligned seg(mapped);
    auto& h = *new (seg.bytes.get()) vader::SegmentHeader{};
    h.magic = vader::segment_magic;
    h.version = vader::segment_version;
    h.local_index = 1;
    h.local_size = l.local_size;
    h.fifo_capacity = l.fifo_capacity;
    h.size = mapped;
    h.fifo_offset = l.fifo_offset;
    h.fbox_offset = l.fbox_offset;
    h.fbox_stride = l.fbox_stride;
    h.fbox_size = l.fbox_size;
    h.fbox_count = l.fbox_count;
    h.frag_count = l.frag_count;
    h.frag_offset = l.frag_offset;
    h.frag_stride = l.frag_stride;
    h.heap_offset = l.heap_offset;
    h.heap_size = l.heap_size;
    h.region_offset = l.region_offset;
    h.region_count = vader::region_slot_count;
    (void)vader::Fifo::create(seg.bytes.get() + l.fifo_offset, l.fifo_capacity);

    constexpr std::size_t header_bytes = offsetof(vader::SegmentHeader, attached);
    const std::size_t patched = std::min(in.size(), header_bytes);
    for (std::size_t i = 0; i < patched; ++i) seg.bytes[i] ^= std::byte{in[i]};
    in = in.subspan(patched);
    // The FIFO's control line and first slots, as the peer finds them.
    const std::size_t fifo_at = std::min<std::size_t>(h.fifo_offset, mapped);
    for (std::size_t i = 0; i < in.size() && fifo_at + i < mapped && i < 64 + 8 * 16; ++i)
        seg.bytes[fifo_at + i] ^= std::byte{in[i]};

    const std::span<const std::byte> view(seg.bytes.get(), mapped);
    const bool untouched = in.empty() && patched == 0;
    if (!vader::segment_usable(view, 1, local_size)) {
        if (untouched) __builtin_trap();  // the owner's own layout must pass
        return;
    }
    // Read once, as connect() does: the writes below may land on the header.
    const struct {
        std::uint64_t fifo_offset, fbox_offset, fbox_stride, frag_offset, frag_stride;
        std::uint32_t local_size, fbox_size, frag_count;
    } seen{h.fifo_offset, h.fbox_offset, h.fbox_stride, h.frag_offset,
           h.frag_stride, h.local_size,  h.fbox_size,   h.frag_count};
    vader::Fifo fifo = vader::Fifo::attach(seg.bytes.get() + seen.fifo_offset);
    for (int n = 0; n < 4 && fifo.push(vader::make_ref(0, 0)); ++n) {
    }
    const char payload[24] = {};
    for (std::uint32_t me = 0; me < seen.local_size; ++me) {
        vader::FastboxWriter box(seg.bytes.get() + seen.fbox_offset + me * seen.fbox_stride,
                                 seen.fbox_size);
        (void)box.write(7, payload, sizeof payload);
    }
    const std::uint32_t last = seen.frag_count == 0 ? 0 : seen.frag_count - 1;
    for (const std::uint32_t index : {0u, last}) {
        if (index >= seen.frag_count) continue;
        auto* f = reinterpret_cast<vader::FragHeader*>(seg.bytes.get() + seen.frag_offset +
                                                       index * seen.frag_stride);
        f->result = 1;
        seg.bytes[seen.frag_offset + index * seen.frag_stride + seen.frag_stride - 1] =
            std::byte{1};
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> in(data, size);
    fuzz_fastbox(in);
    fuzz_fifo_pop(in);
    fuzz_segment(in);
    return 0;
}
