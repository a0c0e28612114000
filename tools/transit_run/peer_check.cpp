#include "peer_check.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
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
    unsigned long received = 0;  // bytes in its receive queue, not yet read
    unsigned long uid = 0;
    unsigned long inode = 0;
};

// The receive queue of a "<hex tx>:<hex rx>" column; 0 if malformed.
unsigned long rx_queue_of(const std::string& queues) {
    const std::size_t colon = queues.find(':');
    if (colon == std::string::npos) return 0;
    unsigned long rx = 0;
    std::from_chars(queues.data() + colon + 1, queues.data() + queues.size(), rx, 16);
    return rx;
}

// Calls `visit` with each entry of `table` until it returns true; whether one
// did.  Lines: "sl local_address rem_address st tx:rx tr:when retrnsmt uid
// timeout inode ...".  Throws what reading the file throws.
template <class Visit>
bool any_entry(const char* table, Visit&& visit) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string sl, local, remote, state, queues, timer, retransmits, timeout;
        TcpEntry e;
        if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> e.uid >>
              timeout >> e.inode))
            continue;
        e.local_port = port_of(local);
        e.remote_port = port_of(remote);
        e.established = state == established;
        e.received = rx_queue_of(queues);
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

// The server's ends of the connections to local port `port`, by socket inode.
std::map<ino_t, TcpEntry> server_ends(std::uint16_t port) noexcept try {
    std::map<ino_t, TcpEntry> ends;
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"})
        any_entry(table, [&](const TcpEntry& e) {
            if (e.established && e.local_port == port && e.inode != 0) ends.emplace(e.inode, e);
            return false;
        });
    return ends;
} catch (...) {
    return {};
}

// The socket inode descriptor `fd` names, 0 if it is no socket.  Read from
// /proc/self/fd without touching the descriptor: other threads (the
// launcher's, the PMIx library's) open and close descriptors all the time, and
// a number read from the directory may name something else by now.
ino_t socket_inode(const std::string& fd) {
    char link[64];
    const std::string path = "/proc/self/fd/" + fd;
    const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) return 0;
    const std::string_view target(link, static_cast<std::size_t>(n));
    constexpr std::string_view prefix = "socket:[";
    if (!target.starts_with(prefix) || !target.ends_with(']')) return 0;
    unsigned long inode = 0;
    const char* first = target.data() + prefix.size();
    const char* last = target.data() + target.size() - 1;
    const auto [at, ec] = std::from_chars(first, last, inode);
    return ec == std::errc() && at == last ? static_cast<ino_t>(inode) : 0;
}

// Whether descriptor `fd` is in blocking mode, from its /proc/self/fdinfo
// "flags:" line (octal open flags); false if unknown.
bool blocking(const std::string& fd) {
    std::ifstream in("/proc/self/fdinfo/" + fd);
    std::string key;
    while (in >> key) {
        if (key != "flags:") continue;
        std::string octal;
        in >> octal;
        unsigned long flags = 0;
        const auto [at, ec] = std::from_chars(octal.data(), octal.data() + octal.size(), flags, 8);
        return ec == std::errc() && (flags & O_NONBLOCK) == 0;
    }
    return false;
}

// A connection the PMIx library has accepted but not yet admitted.
struct Unadmitted {
    int fd = -1;
    ino_t inode = 0;
    std::uint16_t client_port = 0;
    unsigned long received = 0;
};

// The blocking sockets of this process connected to local port `port`: the
// connections the PMIx library has accepted but not yet admitted (it makes a
// client's socket non-blocking once the client is in).  Found from the kernel's
// tables alone: no descriptor is touched, so none of another thread's can be
// met while it is being opened or closed.
std::vector<Unadmitted> unadmitted_connections(std::uint16_t port) {
    std::vector<Unadmitted> found;
    const std::map<ino_t, TcpEntry> ends = server_ends(port);
    if (ends.empty()) return found;
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir) return found;
    while (const dirent* e = ::readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0') continue;
        const std::string name = e->d_name;
        const auto end_of = ends.find(socket_inode(name));
        if (end_of == ends.end() || !blocking(name)) continue;
        found.push_back({static_cast<int>(fd), end_of->first,
                         static_cast<std::uint16_t>(end_of->second.remote_port),
                         end_of->second.received});
    }
    ::closedir(dir);
    return found;
}

}  // namespace

bool admitting_client_may_be_a_stranger(std::uint16_t port) {
    bool candidates = false, ours = false;
    for (const Unadmitted& c : unadmitted_connections(port)) {
        if (c.received != 0) continue;  // not yet read by the library
        long uid = owner_of("/proc/net/tcp", c.client_port, port);
        if (uid < 0) uid = owner_of("/proc/net/tcp6", c.client_port, port);
        // A client in another network namespace or on another host (the
        // server then listens beyond loopback, by the user's choice) has no
        // entry here: it is judged by the table-wide check below.
        if (uid < 0) continue;
        candidates = true;
        if (uid == static_cast<long>(::getuid())) ours = true;
    }
    return candidates ? !ours : stranger_connected_to(port);
}

long owner_of_peer(int fd) noexcept {
    sockaddr_storage local{}, remote{};
    socklen_t local_size = sizeof local, remote_size = sizeof remote;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_size) != 0)
        return -1;
    const auto port_of_address = [](const sockaddr_storage& a) -> long {
        if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
        if (a.ss_family == AF_INET6)
            return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
        return -1;
    };
    const long server_port = port_of_address(local), client_port = port_of_address(remote);
    if (server_port < 0 || client_port < 0) return -1;
    const auto client = static_cast<std::uint16_t>(client_port);
    const auto server = static_cast<std::uint16_t>(server_port);
    const long owner = owner_of("/proc/net/tcp", client, server);
    return owner >= 0 ? owner : owner_of("/proc/net/tcp6", client, server);
}

bool turn_away_admitting_client(std::uint16_t port, std::chrono::milliseconds patience) {
    const std::vector<Unadmitted> found = unadmitted_connections(port);
    if (found.size() != 1) return false;
    const int fd = found.front().fd;
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
    for (const Unadmitted& c : unadmitted_connections(port_)) {
        if (c.received != 0) continue;  // waiting for the library, not idle
        const auto known = empty_since_.find(c.inode);
        const Clock::time_point since = known == empty_since_.end() ? now : known->second;
        if (now - since >= limit_) {
            // Still the socket found (the library may have closed it and the
            // number been reused since): only then is it ours to end.
            if (socket_inode(std::to_string(c.fd)) == c.inode) {
                ::shutdown(c.fd, SHUT_RDWR);
                ++closed;
            }
        } else {
            seen.emplace(c.inode, since);
        }
    }
    empty_since_ = std::move(seen);
    return closed;
}

bool stranger_connected_to(std::uint16_t port) {
    return stranger_in("/proc/net/tcp", port) || stranger_in("/proc/net/tcp6", port);
}

}  // namespace transit::run
