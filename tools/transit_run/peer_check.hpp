// Who is connected to the launcher's PMIx server.  OpenPMIx 4 serves over TCP
// and takes the user id a client sends as true; the kernel knows better: every
// TCP socket's owner is listed in /proc/net/tcp and /proc/net/tcp6.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <cstdint>
#include <map>

namespace transit::run {

// The user owning the other end of accepted TCP socket `fd` (the client's
// end of a connection to our server), -1 when this network namespace does not
// list it.  Never throws.
long owner_of_peer(int fd) noexcept;

// True when a socket connected to local port `port` (the client's end of a
// connection to our server) belongs to another user.
bool stranger_connected_to(std::uint16_t port);

// Whether the client the library is admitting (called from its connect
// upcall) may belong to another user.  The admitting client's socket is one
// the library has not yet made non-blocking and whose handshake it has read
// (nothing waits in it); false when one such socket is the job owner's, so a
// stranger's idle connection waiting beside it does not get a rank refused.
// With no such socket whose client end this network namespace lists (a client
// in another namespace or on another host), whether any stranger is connected
// to `port`.
bool admitting_client_may_be_a_stranger(std::uint16_t port);

// Ends the connection of the client OpenPMIx 4.2.2 is admitting on local port
// `port` (called from its connect upcall), so that the client's PMIx_Init fails
// at once instead of waiting forever.  Refusing through the upcall's return
// code is unusable: on that path the library releases the rank's record twice
// (the second refusal frees it while the job still uses it) and closes the
// socket twice; and it closes the connection as soon as the client has its
// handshake answer, when the client may not yet wait for anything: a client
// that sees the connection gone before it sends its first request drops that
// request and waits for its answer for good.  So the connection is shut down
// here, once the client's first request has arrived (or after `patience`), and
// the upcall admits it: the library then sees an ordinary lost connection, of
// the rank the client claimed to be, whose next fence therefore fails.
// The admitting socket is the one connected to `port` that the library has not
// yet made non-blocking.  False, touching nothing, unless exactly one is.
bool turn_away_admitting_client(std::uint16_t port, std::chrono::milliseconds patience);

// OpenPMIx 4.2.2 reads a new client's handshake on its one thread, from a
// blocking socket, with no time limit: a connection to the server that sends
// nothing (or stops in the middle) stalls every rank's start-up and fence for
// good.  scan() shuts down the connections not yet admitted whose receive
// queue has stayed empty for `limit` (a client sends its handshake as soon as
// it connects, and the library reads a waiting one at once); the library then
// sees the handshake fail and moves on.  Called periodically from one thread.
class IdleConnectionGuard {
  public:
    IdleConnectionGuard(std::uint16_t port, std::chrono::milliseconds limit)
        : port_(port), limit_(limit) {}
    // How many connections it shut down.
    unsigned scan();

  private:
    using Clock = std::chrono::steady_clock;
    std::uint16_t port_;
    std::chrono::milliseconds limit_;
    std::map<ino_t, Clock::time_point> empty_since_;  // by socket inode
};

}  // namespace transit::run
