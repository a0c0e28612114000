// A message buffer of the pml benchmarks: from the heap, or from the
// transports' memory (mem_alloc, --mem-alloc), which lets a shared-memory
// transport read it directly instead of copying it through a staging buffer
// or a system call.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "transit/transit.hpp"

namespace transit::bench {

class Buffer {
  public:
    Buffer(Context& ctx, std::size_t size, bool transport_memory, std::byte fill) : ctx_(ctx) {
        if (transport_memory) {
            data_ = static_cast<std::byte*>(ctx.mem_alloc(size));
            if (!data_) throw std::runtime_error(fmt::format("mem_alloc({}) failed", size));
            from_ctx_ = true;
        } else {
            heap_.resize(size);
            data_ = heap_.data();
        }
        std::memset(data_, static_cast<int>(fill), size);
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() {
        if (from_ctx_) ctx_.mem_free(data_);
    }
    std::byte* data() const noexcept { return data_; }

  private:
    Context& ctx_;
    std::vector<std::byte> heap_;
    std::byte* data_ = nullptr;
    bool from_ctx_ = false;
};

}  // namespace transit::bench
