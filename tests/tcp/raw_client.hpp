// Raw client sockets to a rank's tcp listener, as a stranger would open them.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

#include "components/tcp/tcp_interfaces.hpp"
#include "tests/mp/mp.hpp"

namespace tcptest {

using namespace transit;

// A raw client socket to rank `peer`'s first tcp address.
inline int connect_raw(Rank peer) {
    std::vector<std::byte> blob;
    if (!ok(mp::runtime().modex_recv(peer, "btl.tcp.1", blob))) return -1;
    auto addrs = tcp::decode_addresses(blob);
    for (const auto& a : addrs) {
        // Same node: its loopback; another node: never a loopback address.
        if (a.loopback != mp::runtime().on_this_node(peer)) continue;
        const int fd = ::socket(a.address.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_storage ss;
        const socklen_t len = a.address.to_sockaddr(a.port, ss);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) return fd;
        ::close(fd);
    }
    return -1;
}

// True when the other side closes the connection within `ms` (EOF or reset),
// reading and discarding anything it sends.
inline bool closed_by_peer(int fd, int ms) {
    for (int waited = 0; waited < ms; waited += 10) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 10) <= 0) continue;
        char buf[256];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return true;
    }
    return false;
}

}  // namespace tcptest
