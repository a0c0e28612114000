#include "peer_check.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace transit::run {
namespace {

constexpr const char* established = "01";

// The port of an address column, "<hex address>:<hex port>"; -1 if malformed
// (this runs on PMIx's thread: nothing may throw).
long port_of(const std::string& address) {
    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos) return -1;
    long port = -1;
    const char* end = address.data() + address.size();
    const auto [at, ec] = std::from_chars(address.data() + colon + 1, end, port, 16);
    return ec == std::errc() && at == end ? port : -1;
}

// Lines: "sl local_address rem_address st tx:rx tr:when retrnsmt uid ...".
bool stranger_in(const char* table, std::uint16_t port) noexcept try {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string sl, local, remote, state, queues, timer, retransmits;
        unsigned long uid = 0;
        if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid))
            continue;
        if (state == established && port_of(remote) == port && uid != ::getuid()) return true;
    }
    return false;
} catch (...) {
    return true;  // cannot tell: refuse rather than admit a stranger
}

// The local port of `fd` if it is a connected TCP socket, else 0.
std::uint16_t connected_port(int fd) noexcept {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
    len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
    if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    return 0;
}

// The one blocking socket of this process connected to local port `port`;
// -1 if there is none or more than one.
int admitting_socket(std::uint16_t port) noexcept {
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return -1;
    int found = -1, count = 0;
    while (const dirent* e = ::readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
        const int flags = ::fcntl(static_cast<int>(fd), F_GETFL);
        if (flags < 0 || (flags & O_NONBLOCK) != 0) continue;
        if (connected_port(static_cast<int>(fd)) != port) continue;
        found = static_cast<int>(fd);
        ++count;
    }
    ::closedir(dir);
    return count == 1 ? found : -1;
}

}  // namespace

bool turn_away_admitting_client(std::uint16_t port, std::chrono::milliseconds patience) {
    const int fd = admitting_socket(port);
    if (fd < 0) return false;
    const auto until = std::chrono::steady_clock::now() + patience;
    for (;;) {
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd, POLLIN, 0};  // readable: the request arrived, or the client left
        if (::poll(&p, 1, static_cast<int>(left.count())) >= 0 || errno != EINTR) break;
    }
    ::shutdown(fd, SHUT_RDWR);
    return true;
}

bool stranger_connected_to(std::uint16_t port) {
    return stranger_in("/proc/net/tcp", port) || stranger_in("/proc/net/tcp6", port);
}

}  // namespace transit::run
