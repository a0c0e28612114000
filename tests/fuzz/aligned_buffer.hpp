// A zeroed heap buffer aligned to a cache line, of exactly the size asked:
// what the vader targets lay a segment or a box in, so that AddressSanitizer
// sees any access past its end.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include "components/vader/vader_fifo.hpp"

namespace transit::fuzz {

struct Aligned {
    explicit Aligned(std::size_t n)
        : size(n), bytes(new (std::align_val_t{vader::cache_line}) std::byte[n]()) {}
    struct Free {
        void operator()(std::byte* p) const {
            ::operator delete[](p, std::align_val_t{vader::cache_line});
        }
    };
    std::size_t size;
    std::unique_ptr<std::byte[], Free> bytes;
};

}  // namespace transit::fuzz
