// The module's shared receive queue: the buffers every RC queue pair of the
// module receives into.  Each connecting peer is granted a share of them as
// its credits (SrqBudget, openib_credits.hpp), and the queue grows in
// registered blocks to cover what was granted; a buffer goes back on the
// queue as soon as its fragment is handled.
//
// Owns the buffers, their memory and the count posted.  Borrows the port's
// SRQ and protection domain, and the module's log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "openib_credits.hpp"
#include "openib_frag.hpp"
#include "openib_registered_blocks.hpp"

namespace transit::openib {

class Module;

class ReceiveQueue {
  public:
    explicit ReceiveQueue(Module& module) noexcept : module_(module) {}
    ReceiveQueue(const ReceiveQueue&) = delete;
    ReceiveQueue& operator=(const ReceiveQueue&) = delete;

    // At most `size` buffers of `buffer_bytes` each; posts `initial` of
    // them.  Throws std::runtime_error when none could be posted.
    void open(std::uint32_t size, std::size_t buffer_bytes, std::uint32_t initial);

    // Credits for a new peer, up to `wanted`, with their buffers posted: 0
    // when none can be had.
    std::uint16_t reserve(std::uint32_t wanted) noexcept;
    void release(std::uint16_t grant) noexcept { budget_.release(grant); }
    // Posts buffers until every credit granted has one (after the device
    // said the queue ran low).
    void refill() noexcept { grow(budget_.reserved()); }
    // Puts r back on the queue: false, and one buffer fewer, when that failed.
    bool repost(RecvFrag* r) noexcept;

    std::uint32_t posted() const noexcept { return posted_; }
    std::uint32_t reserved() const noexcept { return budget_.reserved(); }

  private:
    void grow(std::uint32_t want) noexcept;
    bool post(RecvFrag* r) noexcept;

    Module& module_;
    std::uint32_t size_ = 0;
    std::size_t buffer_bytes_ = 0;
    std::uint32_t posted_ = 0;
    SrqBudget budget_;
    RegisteredBlocks blocks_;
    std::deque<RecvFrag> buffers_;  // never moved: the queue holds their addresses
};

}  // namespace transit::openib
