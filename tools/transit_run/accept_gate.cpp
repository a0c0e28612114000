#include "accept_gate.hpp"

#include <dlfcn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "peer_check.hpp"

namespace transit::run {
namespace {

std::atomic<AcceptGate> the_gate{nullptr};

using Accept = int (*)(int, sockaddr*, socklen_t*);

Accept next_accept() noexcept {
    static const Accept next = reinterpret_cast<Accept>(::dlsym(RTLD_NEXT, "accept"));
    return next;
}

}  // namespace

void set_accept_gate(AcceptGate gate) noexcept {
    next_accept();  // resolved now, not first on the library's thread
    the_gate.store(gate, std::memory_order_release);
}

}  // namespace transit::run

// Every accept() of the process: transit_run accepts nothing itself, the PMIx
// server library does (on its listener thread).  A refused connection is
// closed and reported as ECONNABORTED, which the library's listener skips as a
// client that gave up (it would stop listening on EAGAIN or an unknown error).
extern "C" __attribute__((visibility("default"))) int accept(int fd, sockaddr* addr,
                                                             socklen_t* len) {
    const transit::run::Accept next = transit::run::next_accept();
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    const int s = next(fd, addr, len);
    const transit::run::AcceptGate gate = transit::run::the_gate.load(std::memory_order_acquire);
    if (s < 0 || !gate || gate(transit::run::owner_of_peer(s))) return s;
    ::close(s);
    errno = ECONNABORTED;
    return -1;
}
