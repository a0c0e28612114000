#include "peer_check.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

// One socket of /proc/net/tcp(6).
struct TcpEntry {
    long local_port = -1, remote_port = -1;
    bool established = false;
    unsigned long uid = 0;
};

// Calls `visit` with each entry of `table` until it returns true; whether one
// did.  Lines: "sl local_address rem_address st tx:rx tr:when retrnsmt uid ...".
// Throws what reading the file throws.
template <class Visit>
bool any_entry(const char* table, Visit&& visit) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string sl, local, remote, state, queues, timer, retransmits;
        TcpEntry e;
        if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> e.uid))
            continue;
        e.local_port = port_of(local);
        e.remote_port = port_of(remote);
        e.established = state == established;
        if (visit(e)) return true;
    }
    return false;
}

bool stranger_in(const char* table, std::uint16_t port) noexcept try {
    return any_entry(table, [port](const TcpEntry& e) {
        return e.established && e.remote_port == port && e.uid != ::getuid();
    });
} catch (...) {
    return true;  // cannot tell: refuse rather than admit a stranger
}

// The user owning the socket whose local port is `client_port` and remote port
// `server_port` (the client's end of a connection to us); -1 if not listed.
long owner_of(const char* table, std::uint16_t client_port, std::uint16_t server_port) noexcept
    try {
    long owner = -1;
    any_entry(table, [&](const TcpEntry& e) {
        if (e.local_port != client_port || e.remote_port != server_port) return false;
        owner = static_cast<long>(e.uid);
        return true;
    });
    return owner;
} catch (...) {
    return -1;
}

std::uint16_t port_in(const sockaddr_storage& addr) noexcept {
    if (addr.ss_family == AF_INET)
        return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    return 0;
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
    return port_in(addr);
}

// The peer's port of connected socket `fd`, 0 if unknown.
std::uint16_t peer_port(int fd) noexcept {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
    return port_in(addr);
}

// Every blocking socket of this process connected to local port `port`: the
// connections the PMIx library has accepted but not yet admitted (it makes a
// client's socket non-blocking once the client is in).
std::vector<int> unadmitted_sockets(std::uint16_t port) {
    std::vector<int> fds;
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return fds;
    while (const dirent* e = ::readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == ::dirfd(dir)) continue;
        const int flags = ::fcntl(static_cast<int>(fd), F_GETFL);
        if (flags < 0 || (flags & O_NONBLOCK) != 0) continue;
        if (connected_port(static_cast<int>(fd)) == port) fds.push_back(static_cast<int>(fd));
    }
    ::closedir(dir);
    return fds;
}

// Bytes waiting to be read in `fd`; -1 if unknown.
int queued_bytes(int fd) noexcept {
    int queued = 0;
    return ::ioctl(fd, FIONREAD, &queued) == 0 ? queued : -1;
}

// The one blocking socket of this process connected to local port `port`;
// -1 if there is none or more than one.
int admitting_socket(std::uint16_t port) {
    const std::vector<int> fds = unadmitted_sockets(port);
    return fds.size() == 1 ? fds.front() : -1;
}

}  // namespace

bool admitting_client_may_be_a_stranger(std::uint16_t port) {
    bool candidates = false, ours = false;
    for (const int fd : unadmitted_sockets(port)) {
        if (queued_bytes(fd) != 0) continue;  // not yet read by the library
        const std::uint16_t client = peer_port(fd);
        long uid = owner_of("/proc/net/tcp", client, port);
        if (uid < 0) uid = owner_of("/proc/net/tcp6", client, port);
        // A client in another network namespace or on another host (the
        // server then listens beyond loopback, by the user's choice) has no
        // entry here: it is judged by the table-wide check below.
        if (uid < 0) continue;
        candidates = true;
        if (uid == static_cast<long>(::getuid())) ours = true;
    }
    return candidates ? !ours : stranger_connected_to(port);
}

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

unsigned IdleConnectionGuard::scan() {
    const auto now = Clock::now();
    std::map<ino_t, Clock::time_point> seen;
    unsigned closed = 0;
    for (const int fd : unadmitted_sockets(port_)) {
        struct stat st {};
        if (::fstat(fd, &st) != 0) continue;
        const int queued = queued_bytes(fd);
        if (queued != 0) continue;  // waiting for the library, not idle (or unknown)
        const auto known = empty_since_.find(st.st_ino);
        const Clock::time_point since = known == empty_since_.end() ? now : known->second;
        if (now - since >= limit_) {
            ::shutdown(fd, SHUT_RDWR);
            ++closed;
        } else {
            seen.emplace(st.st_ino, since);
        }
    }
    empty_since_ = std::move(seen);
    return closed;
}

bool stranger_connected_to(std::uint16_t port) {
    return stranger_in("/proc/net/tcp", port) || stranger_in("/proc/net/tcp6", port);
}

}  // namespace transit::run
