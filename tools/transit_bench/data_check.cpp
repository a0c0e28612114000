// The bytes of the data check (bench.hpp): a pattern that differs by
// position, size and direction, so a lost, shifted, truncated or stale
// message is told from the right one.
#include <fmt/format.h>

#include "tools/transit_bench/bench.hpp"

namespace transit::bench {

namespace {

std::byte pattern(std::size_t i, std::size_t size, int which) noexcept {
    return static_cast<std::byte>((i * 131 + size * 7 + static_cast<std::size_t>(which)) & 0xff);
}

}  // namespace

void fill_pattern(std::span<std::byte> buf, int which) noexcept {
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(i, buf.size(), which);
}

std::string pattern_mismatch(std::span<const std::byte> got, std::size_t size, int which) {
    if (got.size() != size) return fmt::format("{} bytes arrived, {} were sent", got.size(), size);
    for (std::size_t i = 0; i < size; ++i)
        if (got[i] != pattern(i, size, which))
            return fmt::format("byte {} of {} differs (0x{:02x}, expected 0x{:02x})", i, size,
                               static_cast<unsigned>(got[i]),
                               static_cast<unsigned>(pattern(i, size, which)));
    return {};
}

}  // namespace transit::bench
