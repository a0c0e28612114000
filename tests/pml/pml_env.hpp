// One transit::Context for the whole test program, opened before the first
// test and closed (with its final barrier) after the last.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tests/pml/byte_period.hpp"
#include "transit/transit.hpp"

namespace transit::test {

Context& ctx();

// Deterministic bytes that depend on who sent them, the size and a salt.
inline std::byte pattern(Rank src, std::size_t size, std::size_t i, std::uint32_t salt = 0) {
    return static_cast<std::byte>((i * 131 + src * 17 + size * 7 + salt) & 0xff);
}

// One period of the pattern (it depends on the low byte of i only), or the
// `size` bytes of a shorter message.
inline BytePeriod pattern_period(Rank src, std::size_t size, std::uint32_t salt = 0) {
    BytePeriod p{};
    for (std::size_t i = 0; i < std::min(size, p.size()); ++i) p[i] = pattern(src, size, i, salt);
    return p;
}

inline std::vector<std::byte> make_data(Rank src, std::size_t size, std::uint32_t salt = 0) {
    std::vector<std::byte> v(size);
    fill_with(v.data(), size, pattern_period(src, size, salt));
    return v;
}

// Index of the first wrong byte, or size when all match.
inline std::size_t first_bad(const std::byte* p, Rank src, std::size_t size,
                             std::uint32_t salt = 0) {
    return first_wrong_byte(p, size, pattern_period(src, size, salt));
}

}  // namespace transit::test
