#include "runtime/job_secret.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace transit::rt {

Secret random_secret() {
    Secret s{};
    std::size_t got = 0;
    while (got < s.size()) {
        const ssize_t n = ::getrandom(s.data() + got, s.size() - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
        }
        got += static_cast<std::size_t>(n);
    }
    return s;
}

namespace {

constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// One 64-bit lane: FNV-1a over both inputs (length-prefixed, so "ab"+"c" and
// "a"+"bc" differ), seeded per lane, finished with a strong mixer.
std::uint64_t lane(std::uint64_t seed, std::string_view a, std::string_view b) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL ^ mix(seed);
    auto feed = [&h](std::string_view s) {
        std::uint64_t len = s.size();
        for (int i = 0; i < 8; ++i) {
            h = (h ^ (len & 0xff)) * 0x100000001b3ULL;
            len >>= 8;
        }
        for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
        h = mix(h);
    };
    feed(a);
    feed(b);
    return mix(h + seed);
}

}  // namespace

Secret derive_secret(std::string_view a, std::string_view b) {
    Secret s{};
    const std::uint64_t lanes[2] = {lane(1, a, b), lane(2, a, b)};
    std::memcpy(s.data(), lanes, s.size());
    return s;
}

std::string to_hex(std::span<const std::byte> bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (std::byte b : bytes) {
        const auto v = std::to_integer<unsigned>(b);
        out.push_back(digits[v >> 4]);
        out.push_back(digits[v & 0xf]);
    }
    return out;
}

std::optional<Secret> secret_from_bytes(std::span<const std::byte> bytes) {
    Secret s{};
    if (bytes.size() != s.size()) return std::nullopt;
    std::memcpy(s.data(), bytes.data(), s.size());
    return s;
}

}  // namespace transit::rt
