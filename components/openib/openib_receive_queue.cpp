// The shared receive queue's buffers (openib_receive_queue.hpp).
#include "openib_receive_queue.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "openib_module.hpp"

namespace transit::openib {

void ReceiveQueue::open(std::uint32_t size, std::size_t buffer_bytes, std::uint32_t initial) {
    size_ = size;
    buffer_bytes_ = buffer_bytes;
    budget_ = SrqBudget(size);
    grow(initial);
    if (posted_ == 0) throw std::runtime_error("could not post any receive buffer");
}

std::uint16_t ReceiveQueue::reserve(std::uint32_t wanted) noexcept {
    std::uint32_t g = budget_.reserve(std::min<std::uint32_t>(wanted, 0xffff));
    if (g) grow(budget_.reserved());
    if (g && posted_ < budget_.reserved()) {
        // Could not post the buffers promised: take back the grant.
        budget_.release(g);
        return 0;
    }
    return static_cast<std::uint16_t>(g);
}

void ReceiveQueue::grow(std::uint32_t want) noexcept {
    want = std::min(want, size_);
    if (posted_ >= want) return;
    // Grow in steps of at least 64 buffers: one registration each.
    std::uint32_t add = std::max<std::uint32_t>(want - posted_, 64);
    add = std::min(add, size_ - posted_);
    const std::size_t stride = (buffer_bytes_ + 63) / 64 * 64;
    RegisteredBlocks::Block block{};
    try {
        block = blocks_.add(module_.port().device.pd(), stride * add);
    } catch (const std::exception& e) {
        module_.out().verbose(1, "{}: cannot add {} receive buffers: {}", module_.name(), add,
                              e.what());
        return;
    }
    for (std::uint32_t i = 0; i < add; ++i) {
        buffers_.push_back({block.data + i * stride, block.lkey});
        if (!post(&buffers_.back())) return;
        ++posted_;
    }
}

bool ReceiveQueue::repost(RecvFrag* r) noexcept {
    if (post(r)) return true;
    --posted_;
    return false;
}

bool ReceiveQueue::post(RecvFrag* r) noexcept {
    ibv_sge sge{reinterpret_cast<std::uint64_t>(r->buffer),
                static_cast<std::uint32_t>(buffer_bytes_), r->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = reinterpret_cast<std::uint64_t>(r);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_srq_recv(module_.port().srq.get(), &wr, &bad)) {
        module_.out().verbose(1, "{}: reposting a receive buffer failed: {}", module_.name(),
                              std::strerror(rc));
        return false;
    }
    return true;
}

}  // namespace transit::openib
