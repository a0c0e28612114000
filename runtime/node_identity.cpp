#include "runtime/node_identity.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <string_view>

namespace transit::rt {
namespace {

std::string read_first_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// "ino:dev" of a path, or "-" when it cannot be examined (no /proc, no /dev/shm):
// an unknown part is simply the same for every process that lacks it.
std::string file_identity(const char* path) {
    struct stat st {};
    if (::stat(path, &st) != 0) return "-";
    return fmt::format("{}:{}", static_cast<unsigned long long>(st.st_ino),
                       static_cast<unsigned long long>(st.st_dev));
}

std::uint64_t fnv1a(std::string_view s) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    return h;
}

std::string host_name() {
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) return "unknown";
    return buf.data();
}

}  // namespace

std::string local_node_id() {
    const std::string identity = fmt::format(
        "boot={} net={} ipc={} shm={}", read_first_line("/proc/sys/kernel/random/boot_id"),
        file_identity("/proc/self/ns/net"), file_identity("/proc/self/ns/ipc"),
        file_identity("/dev/shm"));
    return fmt::format("{}-{:016x}", host_name(), fnv1a(identity));
}

}  // namespace transit::rt
