// The module's send and RDMA fragments: two fixed pools of the base
// parameter free_list_max each.  The send fragments' buffers are one
// registered block; an RDMA fragment's index and generation name it on the
// wire (an emulated atomic's reply), so a stale reply finds nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openib_frag.hpp"
#include "openib_registered_blocks.hpp"
#include "transit/btl/util/free_list.hpp"

namespace transit::openib {

class FragPools {
  public:
    // Makes `count` fragments of each kind, the send fragments with room for
    // `payload` bytes behind their header, in a new block of `blocks` with
    // 64 bytes to spare after them: the block's spare word is returned.
    // Throws std::runtime_error.
    RegisteredBlocks::Block open(RegisteredBlocks& blocks, ibv_pd* pd, std::size_t count,
                                 std::size_t payload);

    SendFrag* take_send() noexcept;
    void put(SendFrag* f) noexcept { send_.put(f); }
    RdmaFrag* take_rdma() noexcept;
    void put(RdmaFrag* f) noexcept { rdma_.put(f); }

    // What names f on the wire, and the fragment a name is for: nullptr when
    // it names none in use, or one since reused.
    static std::uint64_t request_id(const RdmaFrag& f) noexcept {
        return (static_cast<std::uint64_t>(f.generation) << 32) | f.index;
    }
    RdmaFrag* find(std::uint64_t request_id) noexcept;
    // Every RDMA fragment, for those of a failed peer.
    auto rdma_items() noexcept { return rdma_.items(); }

  private:
    btl::util::FreeList<SendFrag> send_;
    btl::util::FreeList<RdmaFrag> rdma_;
};

}  // namespace transit::openib
