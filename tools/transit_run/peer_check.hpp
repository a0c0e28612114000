// Who is connected to the launcher's PMIx server.  OpenPMIx 4 serves over TCP
// and takes the user id a client sends as true; the kernel knows better: every
// TCP socket's owner is listed in /proc/net/tcp and /proc/net/tcp6.
#pragma once

#include <cstdint>

namespace transit::run {

// True when a socket connected to local port `port` (the client's end of a
// connection to our server) belongs to another user.
bool stranger_connected_to(std::uint16_t port);

}  // namespace transit::run
