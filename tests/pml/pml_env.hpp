// One transit::Context for the whole test program, opened before the first
// test and closed (with its final barrier) after the last.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transit/transit.hpp"

namespace transit::test {

Context& ctx();

// Deterministic bytes that depend on who sent them, the size and a salt.
inline std::byte pattern(Rank src, std::size_t size, std::size_t i, std::uint32_t salt = 0) {
    return static_cast<std::byte>((i * 131 + src * 17 + size * 7 + salt) & 0xff);
}

inline std::vector<std::byte> make_data(Rank src, std::size_t size, std::uint32_t salt = 0) {
    std::vector<std::byte> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = pattern(src, size, i, salt);
    return v;
}

// Index of the first wrong byte, or size when all match.
inline std::size_t first_bad(const std::byte* p, Rank src, std::size_t size,
                             std::uint32_t salt = 0) {
    for (std::size_t i = 0; i < size; ++i)
        if (p[i] != pattern(src, size, i, salt)) return i;
    return size;
}

}  // namespace transit::test
