// The send and RDMA fragment pools (openib_frag_pools.hpp).
#include "openib_frag_pools.hpp"

namespace transit::openib {

RegisteredBlocks::Block FragPools::open(RegisteredBlocks& blocks, ibv_pd* pd, std::size_t count,
                                        std::size_t payload) {
    const std::size_t stride = (wire::FragHeader::size + payload + 63) / 64 * 64;
    const RegisteredBlocks::Block block = blocks.add(pd, stride * count + 64);
    send_.setup({.initial = count, .max = count});
    std::size_t i = 0;
    for (SendFrag& f : send_.items()) {
        f.kind = FragKind::send;
        f.buffer = block.data + i++ * stride;
        f.lkey = block.lkey;
        f.segments = &f.segment;
        f.segment_count = 1;
    }
    rdma_.setup({.initial = count, .max = count});
    i = 0;
    for (RdmaFrag& f : rdma_.items()) {
        f.kind = FragKind::rdma;
        f.index = static_cast<std::uint32_t>(i++);
    }
    return {block.data + stride * count, block.lkey};
}

SendFrag* FragPools::take_send() noexcept {
    SendFrag* f = send_.get();
    if (!f) return nullptr;
    f->next = nullptr;
    f->inline_done = false;
    f->flags = 0;
    f->cbfunc = nullptr;
    f->cbdata = nullptr;
    f->context = nullptr;
    f->endpoint = nullptr;
    f->type = wire::FragType::data;
    return f;
}

RdmaFrag* FragPools::take_rdma() noexcept {
    RdmaFrag* f = rdma_.get();
    if (!f) return nullptr;
    f->next = nullptr;
    ++f->generation;
    return f;
}

RdmaFrag* FragPools::find(std::uint64_t request_id) noexcept {
    const auto index = static_cast<std::uint32_t>(request_id);
    const auto generation = static_cast<std::uint32_t>(request_id >> 32);
    RdmaFrag* f = index < rdma_.size() ? &rdma_.at(index) : nullptr;
    if (!f || !f->in_use || f->generation != generation) return nullptr;
    return f;
}

}  // namespace transit::openib
