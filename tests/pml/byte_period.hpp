// Test bytes that repeat every 256 bytes (a pattern of the index's low byte):
// one period, copied and compared a period at a time.  Where the tests are
// built at -O0 (CI's sanitizer stage), a call per byte of a message of
// megabytes was most of a test program's time.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

namespace transit::test {

using BytePeriod = std::array<std::byte, 256>;

// `size` bytes at `out`: the period again and again.
inline void fill_with(std::byte* out, std::size_t size, const BytePeriod& p) {
    for (std::size_t at = 0; at < size; at += p.size())
        std::memcpy(out + at, p.data(), std::min(p.size(), size - at));
}

// The index of the first of `length` bytes that differs from the period
// repeated, or `length` when none does.
inline std::size_t first_wrong_byte(const std::byte* in, std::size_t length, const BytePeriod& p) {
    for (std::size_t at = 0; at < length; at += p.size()) {
        const std::size_t n = std::min(p.size(), length - at);
        if (std::memcmp(in + at, p.data(), n) == 0) continue;
        std::size_t i = 0;
        while (in[at + i] == p[i]) ++i;
        return at + i;
    }
    return length;
}

}  // namespace transit::test
