// A short, stable fingerprint of a name, equal in every process that computes
// it (unlike std::hash): for identifiers that travel between processes.
#pragma once

#include <cstdint>
#include <string_view>

namespace transit {

// 32-bit FNV-1a; never 0, so 0 can mean "none".
constexpr std::uint32_t name_hash(std::string_view name) noexcept {
    std::uint32_t h = 2166136261u;
    for (char c : name) {
        h ^= static_cast<unsigned char>(c);
        h *= 16777619u;
    }
    return h != 0 ? h : 1;
}

}  // namespace transit
