#include "runtime/job_secret.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
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

int secret_file(const Secret& secret) {
    const int fd = ::memfd_create("transit-job-secret", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
    // Sealed: a rank can read the secret, not change it for the others.
    constexpr int seals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
    if (::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size()) ||
        ::fcntl(fd, F_ADD_SEALS, seals) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        throw std::runtime_error("cannot write the job secret file: " + why);
    }
    return fd;
}

Secret read_secret_file(std::string_view fd_text) {
    int fd = -1;
    const auto [end, ec] = std::from_chars(fd_text.data(), fd_text.data() + fd_text.size(), fd);
    auto fail = [&](const std::string& why) {
        return std::runtime_error(std::string("cannot read the job secret from ") + secret_fd_var +
                                  "=" + std::string(fd_text) + ": " + why);
    };
    if (ec != std::errc() || end != fd_text.data() + fd_text.size() || fd < 0)
        throw fail("not a descriptor number");
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw fail(std::strerror(errno));
    Secret s{};
    if (!S_ISREG(st.st_mode) || st.st_size != static_cast<off_t>(s.size()))
        throw fail("not the launcher's 16-byte secret file");
    errno = 0;
    if (::pread(fd, s.data(), s.size(), 0) != static_cast<ssize_t>(s.size()))
        throw fail(errno ? std::strerror(errno) : "short read");
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
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
