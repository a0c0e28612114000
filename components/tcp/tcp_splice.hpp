// Sending a payload by reference: the pages of the memory a put or a get
// reply carries are lent to the socket instead of copied into it (vmsplice
// into a pipe, then splice from the pipe into the socket).  Over loopback the
// receiver then copies straight from the sender's pages: one copy of the data
// instead of two.
//
// The socket reads the memory when it sends (over loopback: when the receiver
// reads), not when the frame is queued, so the memory must not change before
// the other side has read it.  put and get guarantee that: a put completes at
// its reply, sent once the target has read the data, and a get's target
// memory is the sender's buffer of a rendezvous (released by fin, sent once
// the receiver has it all) or a window the target does not write while
// another process reads it.
#pragma once

#include <cstddef>

#include <sys/uio.h>

#include "tcp_fd.hpp"

namespace transit::tcp {

// One pipe per module, lent to one link at a time: the link whose payload
// the socket did not take whole keeps it until the rest is in (the others copy
// meanwhile), so a process holds one pipe per interface however many peers.
class SplicePipe {
  public:
    // The pipe is made at once: a process's descriptors do not change with
    // the traffic (a server's count stays flat while clients come and go).
    SplicePipe() noexcept { open(); }

    enum class Result {
        done,         // all of the payload is in the socket
        partial,      // the socket is full: call again once it is writable
        error,        // errno says why
        unavailable,  // no pipe for it, or memory it cannot lend: send the rest by copy
    };

    // Hands `data` to `socket`, advancing it past what the pipe took; bytes
    // the socket did not take stay in the pipe, which stays `user`'s until a
    // later call has written them.
    Result write(const void* user, int socket, iovec& data) noexcept;
    // `user`'s socket is gone: the pages the pipe holds for it are released.
    void release(const void* user) noexcept;
    // Bytes one vmsplice can lend (0: no pipe, every payload is copied).
    std::size_t capacity() const noexcept { return capacity_; }

  private:
    bool open() noexcept;

    Fd read_;
    Fd write_;
    const void* user_ = nullptr;  // whose bytes the pipe holds
    std::size_t held_ = 0;        // in the pipe, not yet in the socket
    std::size_t capacity_ = 0;    // the pipe's size
    bool failed_ = false;         // no pipe could be made: every payload is copied
};

}  // namespace transit::tcp
