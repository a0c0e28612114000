#include "peer_check.hpp"

#include <unistd.h>

#include <charconv>
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

}  // namespace

bool stranger_connected_to(std::uint16_t port) {
    return stranger_in("/proc/net/tcp", port) || stranger_in("/proc/net/tcp6", port);
}

}  // namespace transit::run
