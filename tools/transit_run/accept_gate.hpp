// A gate on the connections the PMIx server library accepts.
//
// OpenPMIx 4.2.2 serves over TCP, reads a new client's handshake as soon as it
// has accepted the connection, and acts on it before it tells the host
// (transit_run) anything: a client naming a rank of the job becomes one more
// connection of that rank, and its handshake sets how the server stores the
// whole job's data (the "gds" module the client names).  Another user who
// knows the job's namespace could thus break the job however transit_run
// answers afterwards: the real ranks' data went where they do not look, and
// their fences failed or hung.  So transit_run defines accept() itself: the
// library's calls come here first (a definition in the executable comes before
// libc's), and a connection whose other end the kernel says belongs to another
// user is closed before the library reads a byte of it.
#pragma once

#include <sys/types.h>

namespace transit::run {

// Called on the library's listener thread for each connection accepted, with
// the user owning the connection's other end (-1 when the kernel's tables here
// do not list it: a client in another network namespace or on another host);
// false closes the connection, and the library sees an aborted attempt.
using AcceptGate = bool (*)(long owner) noexcept;

// Installs `gate` (nullptr: every connection passes).
void set_accept_gate(AcceptGate gate) noexcept;

}  // namespace transit::run
