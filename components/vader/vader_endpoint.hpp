// Per-peer state: the peer's mapped segment, its FIFO, the fast box this
// process writes in it, the one in our segment it writes in, and what is in
// flight to it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <span>

#include "components/vader/vader_layout.hpp"
#include "components/vader/vader_segment.hpp"
#include "components/vader/vader_spare_boxes.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_link.hpp"
#include "transit/btl/util/process_watch.hpp"

namespace transit::vader {

// The local index of a peer outside the job.
inline constexpr std::uint32_t no_local_index = ~0u;

class VaderEndpoint final : public btl::Endpoint {
  public:
    VaderEndpoint(Rank peer, std::uint32_t local_index, SharedFile segment)
        : btl::Endpoint(peer), local_index(local_index), segment(std::move(segment)) {}
    ~VaderEndpoint() override = default;
    VaderEndpoint(const VaderEndpoint&) = delete;
    VaderEndpoint& operator=(const VaderEndpoint&) = delete;

    SegmentHeader& header() const noexcept {
        return *reinterpret_cast<SegmentHeader*>(segment.data());
    }
    FragHeader* frag(std::uint32_t index) const noexcept {
        return reinterpret_cast<FragHeader*>(segment.data() + frag_offset + index * frag_stride);
    }
    // The peer's address `remote` seen through our mapping, or nullptr when
    // [remote, remote + size) is not inside the peer's mem_alloc pages (the
    // rest of its segment is the transport's own: never a put/get target).
    char* translate(std::uint64_t remote, std::size_t size) const noexcept {
        const std::uint64_t begin = owner_base + heap_offset;
        if (remote < begin || remote - begin > heap_size || size > heap_size - (remote - begin))
            return nullptr;
        return segment.data() + heap_offset + (remote - begin);
    }

    const std::uint32_t local_index;
    SharedFile segment;
    Fifo fifo;              // the peer's receive FIFO
    FastboxWriter fastbox;  // our box in the peer's segment
    // Its box in our segment (read before each of its fragments), or null:
    // a peer outside the job that got no spare box.
    FastboxReader* reader = nullptr;
    pid_t pid = 0;
    btl::util::ProcessWatch process;  // of pid, for VaderPeerWatch::check
    std::uint64_t owner_base = 0;
    std::uint64_t heap_offset = 0;
    std::uint64_t heap_size = 0;
    std::span<const btl::RegionSlot> regions;  // the peer's registrations, through our mapping
    std::size_t frag_offset = 0;
    std::size_t frag_stride = 0;
    std::uint32_t frag_count = 0;
    std::size_t frag_payload = 0;
    std::uint32_t sends = 0;        // toward the fast-box threshold
    std::uint32_t fbox_after = 0;   // sends before the fast box (never while there is none)
    std::uint32_t outstanding = 0;  // our fragments the peer has not returned
    bool dead = false;
    // What our FIFO references to the peer carry above the fragment index:
    // our local index, or the dynamic bit and the channel the peer knows us by.
    std::uint64_t ref_base = 0;
    // A peer outside the job (vader_dynamic.cpp).
    bool dynamic = false;
    std::uint32_t channel = 0;                       // the channel its references to us carry
    std::uint32_t spare = SpareBoxes::none;          // the spare box of ours it writes into
    std::uint32_t spare_at_peer = SpareBoxes::none;  // the box of its segment we write into
    bool join_ref_sent = false;                      // a server: our join reference is in its FIFO
    bool joined = true;  // a server: our join fragment is in its FIFO too
    // Joining, welcomed, departed (its goodbye came; reported at the next
    // pass), ... (the module's OutsideLinks changes it).
    btl::util::OutsideLink outside;
};

}  // namespace transit::vader
