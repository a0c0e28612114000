// Registered blocks of memory (openib_registered_blocks.hpp).
#include "openib_registered_blocks.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace transit::openib {

void RegisteredBlocks::FreeDeleter::operator()(std::byte* p) const noexcept {
    std::free(p);
}

RegisteredBlocks::Block RegisteredBlocks::add(ibv_pd* pd, std::size_t bytes) {
    constexpr std::size_t page = 4096;
    bytes = (bytes + page - 1) / page * page;
    Owned o;
    o.memory.reset(static_cast<std::byte*>(std::aligned_alloc(page, bytes)));
    if (!o.memory)
        throw std::runtime_error("out of memory for " + std::to_string(bytes) + " bytes");
    std::memset(o.memory.get(), 0, bytes);
    o.mr.reset(ibv_reg_mr(pd, o.memory.get(), bytes, IBV_ACCESS_LOCAL_WRITE));
    if (!o.mr) verbs::fail("ibv_reg_mr of " + std::to_string(bytes) + " bytes", errno);
    const Block b{o.memory.get(), o.mr->lkey};
    owned_.push_back(std::move(o));
    return b;
}

}  // namespace transit::openib
