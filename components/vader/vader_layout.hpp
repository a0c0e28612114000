// What lives in a vader segment, and how peers find it: the header, the receive
// FIFO, one fast box per local sender and the spare boxes handed to peers
// outside the job, and the owner's send fragments.
//
// Every offset is written in the header by the owner, so a peer never has to
// recompute the layout from its own parameters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "components/vader/vader_doorbell.hpp"
#include "components/vader/vader_fastbox.hpp"
#include "components/vader/vader_fifo.hpp"
#include "transit/btl/region_table.hpp"
#include "transit/btl/types.hpp"

namespace transit::vader {

inline constexpr std::uint64_t segment_magic = 0x7676616465723031ull;  // "vvader01"
inline constexpr std::uint32_t segment_version = 8;  // 8: the doorbell (sleeping, bell)
inline constexpr std::size_t frag_header_size = 64;
inline constexpr std::uint32_t region_slot_count = 1024;  // registrations at once

constexpr std::size_t round_up(std::size_t n, std::size_t to) noexcept {
    return (n + to - 1) / to * to;
}
constexpr std::uint32_t pow2_at_least(std::uint64_t n) noexcept {
    std::uint32_t p = 1;
    while (p < n && p < (1u << 30)) p <<= 1;
    return p;
}

struct alignas(cache_line) SegmentHeader {
    std::uint64_t magic;
    std::uint32_t version;
    std::uint32_t pid;
    std::uint32_t rank;
    std::uint32_t local_index;
    std::uint32_t local_size;
    std::uint32_t fifo_capacity;
    std::uint64_t size;
    std::uint64_t owner_base;  // where the owner mapped it: translates its addresses
    std::uint64_t fifo_offset;
    std::uint64_t fbox_offset;
    std::uint64_t fbox_stride;
    std::uint32_t fbox_size;
    // Boxes at fbox_offset: one per local sender, then the spares a peer
    // outside the job is given at its join (vader_dynamic.hpp).
    std::uint32_t fbox_count;
    std::uint32_t frag_count;
    std::uint64_t frag_offset;
    std::uint64_t frag_stride;
    std::uint64_t heap_offset;  // mem_alloc's pages: [heap_offset, heap_offset + heap_size)
    std::uint64_t heap_size;
    std::uint64_t probe_cookie;   // read by peers through CMA to prove it works
    std::uint64_t region_offset;  // the registrations peers may address (btl::RegionSlot[])
    std::uint32_t region_count;
    std::uint64_t nonce;  // random: a client outside the job checks it opened this segment
    // Who made it, for the next process on the node that finds the file named
    // but its owner gone (remove_dead_segments): the owner's pid namespace
    // (0: unknown) and start time (btl::util::process_start_time; 0: unknown).
    std::uint64_t pid_ns;
    std::uint64_t start_time;
    alignas(cache_line) std::atomic<std::uint32_t> attached;  // peers that mapped it
    // Set by the owner as it finalizes: its exit after that is a departure,
    // not a failure (Open MPI's ob1 aborts the job on any error report, and
    // the last ranks of a job may still be polling when the first exit).
    std::atomic<std::uint32_t> departed;
    // The owner sleeps in the kernel (vader_doorbell.hpp): awake, asleep or
    // rung.  On a line of its own, written only when the owner goes to sleep
    // and wakes, so a sender's read of it stays in its cache while the owner polls.
    alignas(cache_line) std::atomic<std::uint32_t> sleeping;
    char bell[bell_name_size];  // the owner's doorbell (Doorbell::name)
};

enum class FragKind : std::uint8_t { data = 1, atomic = 2, join = 3 };
enum class AtomicKind : std::uint8_t { op = 1, fop = 2, cswap = 3 };

// The shared part of a send fragment.  For an atomic the target writes the old
// value into `result` before returning the fragment, so an atomic needs no
// second message.
struct FragHeader {
    std::uint32_t size;
    std::uint8_t tag;
    FragKind kind;
    AtomicKind atomic_kind;
    std::uint8_t atomic_flags;
    std::uint16_t atomic_op;
    // The target's verdict on an atomic, read by the origin when the fragment
    // returns: 0, or the Status it refused the operation with.
    std::int16_t atomic_status;
    std::uint16_t reserved[2];
    std::uint64_t address;
    std::uint64_t operand;
    std::uint64_t compare;
    std::uint64_t result;
};
static_assert(sizeof(FragHeader) <= frag_header_size);

// The bytes of a data fragment a peer hands over that are delivered: what its
// header claims, never more than a fragment of `payload_limit` holds.
constexpr std::size_t frag_data_length(const FragHeader& h, std::size_t payload_limit) noexcept {
    return h.size < payload_limit ? h.size : payload_limit;
}

// The width of the word an atomic fragment targets (its flags pick 32 bits).
constexpr std::size_t atomic_width(const FragHeader& h) noexcept {
    return (h.atomic_flags & btl::atomic_flags::bits32) ? 4 : 8;
}

// Why the target of an atomic fragment refuses it, or nullptr when it may be
// performed.  The address is the receiver's own, yet a peer could still send
// garbage: what is not aligned, or lies in the first page, is refused instead
// of faulting, and so is a kind or an operation code that names nothing.
constexpr const char* atomic_refusal(const FragHeader& h) noexcept {
    if (h.address % atomic_width(h) != 0 || h.address < 4096)
        return "vader: bad atomic target address";
    switch (h.atomic_kind) {
        case AtomicKind::cswap:
            return nullptr;
        case AtomicKind::op:
        case AtomicKind::fop:
            return btl::is_atomic_op(h.atomic_op) ? nullptr : "vader: unknown atomic operation";
    }
    return "vader: unknown atomic kind";
}

// A FIFO entry: which segment (the sender's local index) and which fragment.
// The same reference, with the return bit, goes back to the owner when the
// receiver is done with the fragment.
inline constexpr std::uint64_t return_bit = 1ull << 63;
constexpr std::uint64_t make_ref(std::uint32_t owner, std::uint32_t index) noexcept {
    return (std::uint64_t{owner} << 32) | index;
}
constexpr std::uint32_t ref_owner(std::uint64_t ref) noexcept {
    return static_cast<std::uint32_t>(ref >> 32) & 0xffff;
}
constexpr std::uint32_t ref_index(std::uint64_t ref) noexcept {
    return static_cast<std::uint32_t>(ref);
}

// Whether the `mapped` bytes of a peer's segment, whose header claims to be
// local process `local_index` of `local_size`, are a segment this process can
// use: the regions the header names follow each other in the owner's order
// (header, FIFO, fast boxes, fragments, region table, heap) inside the mapping, aligned as
// the owner lays them out, and the FIFO there has the capacity the header gives.
inline bool segment_usable(std::span<const std::byte> mapped, std::uint32_t local_index,
                           std::uint32_t local_size) noexcept {
    if (mapped.size() < sizeof(SegmentHeader)) return false;
    const auto& h = *reinterpret_cast<const SegmentHeader*>(mapped.data());
    const std::uint64_t size = mapped.size();
    // [offset, offset + count * stride) lies in [from, size): its end, or 0 when not.
    const auto region = [size](std::uint64_t from, std::uint64_t offset, std::uint64_t count,
                               std::uint64_t stride) -> std::uint64_t {
        if (offset < from || offset > size || offset % cache_line != 0) return 0;
        if (count != 0 && stride > (size - offset) / count) return 0;
        return offset + count * stride;
    };
    const auto pow2 = [](std::uint32_t n) { return n != 0 && (n & (n - 1)) == 0; };
    if (h.magic != segment_magic || h.version != segment_version || h.local_index != local_index ||
        h.local_size != local_size || h.size != size || h.local_index >= h.local_size ||
        !pow2(h.fifo_capacity) || !pow2(h.fbox_size) || h.fbox_size < 256 ||
        h.fbox_count < h.local_size || h.fbox_stride < Fastbox::bytes(h.fbox_size) ||
        h.fbox_stride % cache_line != 0 || h.frag_stride < frag_header_size ||
        h.frag_stride % cache_line != 0)
        return false;
    const std::uint64_t fifo_end =
        region(sizeof(SegmentHeader), h.fifo_offset, 1, Fifo::bytes(h.fifo_capacity));
    const std::uint64_t fbox_end =
        fifo_end == 0 ? 0 : region(fifo_end, h.fbox_offset, h.fbox_count, h.fbox_stride);
    const std::uint64_t frag_end =
        fbox_end == 0 ? 0 : region(fbox_end, h.frag_offset, h.frag_count, h.frag_stride);
    const std::uint64_t region_end =
        frag_end == 0 ? 0
                      : region(frag_end, h.region_offset, h.region_count, sizeof(btl::RegionSlot));
    if (region_end == 0 || h.heap_offset < region_end || h.heap_offset > size ||
        h.heap_size > size - h.heap_offset)
        return false;
    // The FIFO's own copy is the one its users read.
    return Fifo::capacity_at(mapped.data() + h.fifo_offset) == h.fifo_capacity;
}

// Sizes computed by the owner from its parameters.
struct Layout {
    std::uint32_t local_size;
    std::uint32_t fbox_count;  // local_size, and the spares for peers outside the job
    std::uint32_t fbox_size;
    std::uint32_t fifo_capacity;
    std::uint32_t frag_count;
    std::size_t frag_stride;
    std::size_t fifo_offset;
    std::size_t fbox_offset;
    std::size_t fbox_stride;
    std::size_t spare_offset;  // the spare boxes: pages supplied when one is handed out
    std::size_t frag_offset;
    std::size_t region_offset;
    std::size_t total;        // the part allocated at creation
    std::size_t heap_offset;  // == total: mem_alloc's pages follow, supplied on demand
    std::size_t heap_size;

    // Fits as many fragments as `segment_size` allows (at least 16), and a FIFO
    // big enough for every fragment of every local process at once, so that
    // returning a fragment never finds the FIFO full.
    static Layout compute(std::uint32_t local_size, std::size_t segment_size,
                          std::size_t max_send_size, std::uint32_t fbox_size,
                          std::uint32_t fifo_min, std::size_t heap_size = 0,
                          std::uint32_t spare_fboxes = 0) noexcept {
        Layout l{};
        l.local_size = local_size;
        l.fbox_count = local_size + spare_fboxes;
        l.fbox_size = pow2_at_least(fbox_size < 256 ? 256 : fbox_size);
        l.frag_stride = round_up(frag_header_size + max_send_size, cache_line);
        l.fbox_stride = round_up(Fastbox::bytes(l.fbox_size), cache_line);
        const std::size_t fixed =
            round_up(sizeof(SegmentHeader), cache_line) + std::size_t{l.fbox_count} * l.fbox_stride;
        const std::size_t per_frag = l.frag_stride + 2 * sizeof(std::uint64_t) * local_size;
        const std::size_t room = segment_size > fixed ? segment_size - fixed : 0;
        std::size_t count = room / per_frag;
        if (count < 16) count = 16;
        if (count > (1u << 20) / local_size) count = (1u << 20) / local_size;
        l.frag_count = static_cast<std::uint32_t>(count);
        l.fifo_capacity = pow2_at_least(std::uint64_t{local_size} * count);
        if (l.fifo_capacity < fifo_min) l.fifo_capacity = pow2_at_least(fifo_min);
        l.fifo_offset = round_up(sizeof(SegmentHeader), cache_line);
        l.fbox_offset = round_up(l.fifo_offset + Fifo::bytes(l.fifo_capacity), cache_line);
        l.spare_offset = l.fbox_offset + std::size_t{local_size} * l.fbox_stride;
        l.frag_offset = l.fbox_offset + std::size_t{l.fbox_count} * l.fbox_stride;
        l.region_offset = round_up(l.frag_offset + count * l.frag_stride, cache_line);
        l.total = round_up(l.region_offset + region_slot_count * sizeof(btl::RegionSlot), 4096);
        l.heap_offset = l.total;
        l.heap_size = heap_size / 4096 * 4096;
        return l;
    }
};

}  // namespace transit::vader
