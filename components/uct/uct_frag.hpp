// The objects of a uct module's data path, all created at setup: send
// fragments (the descriptors the upper layer fills), one-sided operations in
// flight, replies waiting for send resources, and the receive ring that takes
// active messages out of UCT's progress before they are delivered.
#pragma once

#include <uct/api/uct.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "transit/btl/types.hpp"
#include "transit/btl/util/free_list.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

class UctEndpoint;

// A send fragment: WireHeader + up to `capacity` bytes of payload, contiguous.
struct UctFrag : btl::Descriptor {
    btl::Segment seg{};
    std::byte* buffer = nullptr;  // the WireHeader's place; payload follows
    std::size_t capacity = 0;
    bool in_use = false;
    UctFrag* next_free = nullptr;
    // Taken while UCT had no room (send, or sendi's copy): waits in its
    // endpoint's queue with its tag, then, sent or failed, in the module's
    // done list for its callback (run from attend(), never inside a send).
    btl::Tag queued_tag = 0;
    Status queued_status = Status::success;
    btl::Endpoint* queued_ep = nullptr;  // for the callback (null once it is gone)
    UctFrag* next_queued = nullptr;
};

enum class OpKind : std::uint8_t { put, get, atomic };

// A put, get or atomic: sent in pieces of at most the module's chunk size,
// complete when every piece is answered; or (native) one UCT put_zcopy /
// get_zcopy, complete when UCT calls `comp` back.
struct RdmaOp {
    uct_completion_t comp{};  // first: the completion callback finds the op from it
    void* owner = nullptr;    // the UctOps (native)
    bool native = false;
    RdmaOp* next_done = nullptr;
    OpKind kind = OpKind::put;
    AtomicMode mode = AtomicMode::post;
    bool bits32 = false;
    bool in_use = false;
    bool queued = false;  // in the module's send queue (pieces left to send)
    std::uint32_t generation = 0;
    std::uint16_t amo = 0;
    Status status = Status::success;  // first error a reply reported
    UctEndpoint* endpoint = nullptr;
    Rank peer = any_rank;
    void* local_address = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    btl::RdmaCompletionFn cbfunc = nullptr;
    void* cbcontext = nullptr;
    void* cbdata = nullptr;
    std::uint64_t key = 0;     // the target's registration: id
    std::uint64_t secret = 0;  // and secret
    std::uint64_t remote_address = 0;
    std::uint64_t size = 0;
    std::uint64_t sent = 0;  // bytes whose piece went out
    std::uint32_t pieces = 0;
    std::uint32_t answered = 0;
    std::uint32_t issued = 0;
    std::uint64_t operand = 0;
    std::uint64_t compare = 0;
    std::uint64_t result = 0;  // a native fetching atomic writes here (then local_address)
    RdmaOp* next_free = nullptr;
    RdmaOp* next_queued = nullptr;
};
static_assert(std::is_standard_layout_v<RdmaOp>, "RdmaOp must start with its uct_completion_t");

// A reply the target could not send at once (the peer's queue was full).
struct PendingReply {
    Kind kind = Kind::put_ack;
    bool in_use = false;
    Rank peer = any_rank;
    RdmaReply rdma{};
    AtomicReply atomic{};
    const void* data = nullptr;  // get_rep: the target memory to send
    PendingReply* next_free = nullptr;
    PendingReply* next_queued = nullptr;
};

// The module's pools are the toolkit's free list, made whole at setup.
template <typename T>
using Pool = btl::util::FreeList<T>;

// First in, first out, threaded through T::next_queued (no allocation): work
// that found the transport busy, retried in order from progress.
template <typename T>
class FifoQueue {
  public:
    bool empty() const noexcept { return head_ == nullptr; }
    T* front() const noexcept { return head_; }
    void push(T* item) noexcept {
        item->next_queued = nullptr;
        if (tail_ != nullptr)
            tail_->next_queued = item;
        else
            head_ = item;
        tail_ = item;
    }
    T* pop() noexcept {
        T* item = head_;
        head_ = item->next_queued;
        if (head_ == nullptr) tail_ = nullptr;
        item->next_queued = nullptr;
        return item;
    }

  private:
    T* head_ = nullptr;
    T* tail_ = nullptr;
};

// Send fragments: a WireHeader in front of `capacity` bytes of payload.
using FragPool = Pool<UctFrag>;

// Received messages, copied out of UCT's progress and delivered after it
// returns, in arrival order.  Delivering outside UCT's progress lets a
// receive callback send, and drive progress, without re-entering UCT.
//
// Slots are numbered by a running sequence.  A delivered slot is reused only
// once the outermost delivery has returned: a nested delivery (a callback
// that drives progress) must not overwrite the message an outer callback is
// still reading.  When a burst fills every slot, the ring doubles; the old
// block is kept until no delivery reads from it.  A message larger than a
// slot (UCT tcp's 64 KiB ones) is kept in a buffer of its own beside its
// slot, freed with the slot: slots stay small, and a burst of large messages
// leaves no memory behind (this is the path of messages that could not be
// delivered at once, where a 64 KiB copy outweighs the allocation).
class RecvRing {
  public:
    // `slots` is rounded up to a power of two: the slot index is then a mask,
    // not a division (a 64-bit div costs tens of cycles on every message).
    void setup(std::size_t slots, std::size_t slot_size) {
        stride_ = (slot_size + 63) & ~std::size_t{63};
        slot_size_ = slot_size;
        capacity_ = std::bit_ceil(std::max<std::size_t>(slots, 1));
        block_ = std::make_unique<std::byte[]>(capacity_ * stride_);
        lengths_.assign(capacity_, 0);
        large_.assign(capacity_, {});
    }

    std::size_t slot_size() const noexcept { return slot_size_; }
    std::size_t capacity() const noexcept { return capacity_; }
    bool empty() const noexcept { return read_ == write_; }
    std::size_t queued() const noexcept { return static_cast<std::size_t>(write_ - read_); }
    std::size_t grown() const noexcept { return grown_; }
    // Buffers held for messages larger than a slot.
    std::size_t large_buffers() const noexcept { return large_held_; }

    // From the AM handler.  False when the message is longer than 4 GiB.
    bool push(const void* data, std::size_t length) {
        if (length > UINT32_MAX) [[unlikely]]
            return false;
        if (write_ - free_ == capacity_) [[unlikely]]
            grow();
        const std::size_t i = static_cast<std::size_t>(write_ & (capacity_ - 1));
        std::byte* to = block_.get() + i * stride_;
        if (length > slot_size_) [[unlikely]] {
            to = hold_large(i, length);
        }
        std::memcpy(to, data, length);
        lengths_[i] = static_cast<std::uint32_t>(length);
        ++write_;
        return true;
    }

    // The next message to deliver (valid until the outermost delivery ends).
    const std::byte* front(std::size_t& length) const noexcept {
        const std::size_t i = static_cast<std::size_t>(read_ & (capacity_ - 1));
        length = lengths_[i];
        return length > slot_size_ ? large_[i].data() : block_.get() + i * stride_;
    }
    void pop() noexcept { ++read_; }

    // Around each delivery: slots are released when the outermost one ends.
    void enter() noexcept { ++depth_; }
    void leave() noexcept {
        if (--depth_ == 0) {
            if (large_held_ > 0) [[unlikely]]
                release_large(free_, read_);
            free_ = read_;
            if (!retired_.empty()) retired_.clear();
        }
    }

  private:
    std::byte* hold_large(std::size_t i, std::size_t length) {
        large_[i].resize(length);
        ++large_held_;
        return large_[i].data();
    }

    // The large buffers of slots [from, to), delivered and no longer read.
    void release_large(std::uint64_t from, std::uint64_t to) noexcept {
        for (std::uint64_t s = from; s < to && large_held_ > 0; ++s) {
            const std::size_t i = static_cast<std::size_t>(s & (capacity_ - 1));
            if (lengths_[i] <= slot_size_) continue;
            lengths_[i] = 0;
            --large_held_;
            std::vector<std::byte>{}.swap(large_[i]);
        }
    }

    void grow() {
        const std::size_t cap = capacity_ * 2;
        auto block = std::make_unique<std::byte[]>(cap * stride_);
        std::vector<std::uint32_t> lengths(cap, 0);
        // Moving a vector keeps its buffer where it is: an outer delivery
        // reading a large message still finds it.
        std::vector<std::vector<std::byte>> large(cap);
        for (std::uint64_t s = free_; s < write_; ++s) {
            const std::size_t from = static_cast<std::size_t>(s & (capacity_ - 1));
            const std::size_t to = static_cast<std::size_t>(s & (cap - 1));
            if (lengths_[from] > slot_size_)
                large[to] = std::move(large_[from]);
            else
                std::memcpy(block.get() + to * stride_, block_.get() + from * stride_,
                            lengths_[from]);
            lengths[to] = lengths_[from];
        }
        if (depth_ > 0) retired_.push_back(std::move(block_));  // an outer delivery may read it
        block_ = std::move(block);
        lengths_ = std::move(lengths);
        large_ = std::move(large);
        capacity_ = cap;
        ++grown_;
    }

    std::unique_ptr<std::byte[]> block_;
    std::vector<std::uint32_t> lengths_;
    std::vector<std::vector<std::byte>> large_;  // per slot, for messages above slot_size_
    std::size_t large_held_ = 0;                 // slots holding a large buffer
    std::vector<std::unique_ptr<std::byte[]>> retired_;
    std::size_t stride_ = 0;
    std::size_t slot_size_ = 0;
    std::size_t capacity_ = 0;
    std::uint64_t write_ = 0;  // next slot to fill
    std::uint64_t read_ = 0;   // next slot to deliver
    std::uint64_t free_ = 0;   // oldest slot not yet reusable
    int depth_ = 0;
    std::size_t grown_ = 0;
};

}  // namespace transit::uct
