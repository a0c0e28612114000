// libFuzzer target for what vader reads of a peer outside the job: the listen
// blob a client finds in a server's address (decode_listen_blob, what
// VaderOutside::connect_server runs) and, on the server's side, the client's
// join fragment in the client's segment (segment_usable, then read_join, what
// VaderOutside::handle_join and admit run).  Header-only; see vader_dynamic.cmake.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "components/vader/vader_dynamic.hpp"
#include "components/vader/vader_fifo.hpp"
#include "components/vader/vader_layout.hpp"
#include "tests/fuzz/aligned_buffer.hpp"

namespace vader = transit::vader;

namespace {

using transit::fuzz::Aligned;

// Accepted blobs name a process and a descriptor and re-encode to the bytes read.
void fuzz_listen_blob(std::span<const std::uint8_t> in) {
    const std::span<const std::byte> blob(reinterpret_cast<const std::byte*>(in.data()), in.size());
    const auto b = vader::decode_listen_blob(blob);
    if (!b) return;
    if (b->pid == 0 || b->fd < 0) __builtin_trap();
    const auto again = vader::encode(*b);
    if (again.size() != blob.size() || !std::equal(again.begin(), again.end(), blob.begin()))
        __builtin_trap();
}

// A client's segment: a valid one (fragments last in the mapping, no heap, no
// region table, so a read past them leaves it) with the input XORed over its
// header, then 4 bytes of the join reference's fragment index, then bytes XORed
// over that fragment.  What the server reads and writes lies inside the mapping
// (ASan) and a payload lies inside its fragment.
void fuzz_join(std::span<const std::uint8_t> in) {
    const vader::Layout l = vader::Layout::compute(1, 16 * 1024, 64, 256, 16, 0, 1);
    const std::size_t mapped = l.frag_offset + std::size_t{l.frag_count} * l.frag_stride;
    Aligned seg(mapped);
    auto& h = *new (seg.bytes.get()) vader::SegmentHeader{};
    h.magic = vader::segment_magic;
    h.version = vader::segment_version;
    h.pid = 4242;
    h.local_index = 0;
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
    h.region_offset = mapped;
    h.region_count = 0;
    h.heap_offset = mapped;
    h.heap_size = 0;
    (void)vader::Fifo::create(seg.bytes.get() + l.fifo_offset, l.fifo_capacity);
    auto* first = reinterpret_cast<vader::FragHeader*>(seg.bytes.get() + l.frag_offset);
    first->kind = vader::FragKind::join;
    first->size = sizeof(vader::JoinPayload);

    constexpr std::size_t header_bytes = offsetof(vader::SegmentHeader, attached);
    const std::size_t patched = std::min(in.size(), header_bytes);
    for (std::size_t i = 0; i < patched; ++i) seg.bytes[i] ^= std::byte{in[i]};
    in = in.subspan(patched);
    std::uint32_t index = 0;
    if (in.size() >= 4) {
        std::memcpy(&index, in.data(), 4);
        in = in.subspan(4);
    }
    const std::span<std::byte> view(seg.bytes.get(), mapped);
    if (!vader::segment_usable(view, h.local_index, h.local_size)) return;
    const std::uint64_t frag_stride = h.frag_stride;
    if (index < h.frag_count) {
        const std::size_t at = h.frag_offset + std::size_t{index} * frag_stride;
        for (std::size_t i = 0; i < in.size() && i < frag_stride && at + i < mapped; ++i)
            seg.bytes[at + i] ^= std::byte{in[i]};
    }
    const vader::JoinFragment join = vader::read_join(view, index);
    if (join.header == nullptr) return;
    const auto* start = reinterpret_cast<const std::byte*>(join.header);
    if (start < seg.bytes.get() || start + vader::frag_header_size > seg.bytes.get() + mapped)
        __builtin_trap();
    // The server's answer, as admit writes it.
    join.header->atomic_status = 1;
    join.header->operand = 2;
    if (join.payload && vader::frag_header_size + sizeof(vader::JoinPayload) > frag_stride)
        __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::uint8_t> in(data, size);
    fuzz_listen_blob(in);
    fuzz_join(in);
    return 0;
}
