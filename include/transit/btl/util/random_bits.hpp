// Unpredictable 64-bit values for the keys that name memory to peers: a peer
// that knows some keys must learn nothing from them about the others.
#pragma once

#include <sys/random.h>

#include <chrono>
#include <cstdint>
#include <random>

namespace transit::btl::util {

// 64 bits from the kernel's random source (getrandom), else from
// std::random_device; the clock only when both fail (then logged by no one:
// a process without either has larger problems).
inline std::uint64_t random_u64() noexcept {
    std::uint64_t r = 0;
    if (::getrandom(&r, sizeof r, 0) == static_cast<ssize_t>(sizeof r)) return r;
    try {
        std::random_device device;
        return std::uint64_t{device()} << 32 | device();
    } catch (...) {
        return static_cast<std::uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count());
    }
}

}  // namespace transit::btl::util
