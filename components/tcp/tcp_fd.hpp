// An owned file descriptor (sockets, epoll sets, pipes), and what a failed
// non-blocking call on one means.
#pragma once

#include <unistd.h>

#include <cerrno>

namespace transit::tcp {

// An owned file descriptor.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) noexcept : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = o.release();
        }
        return *this;
    }
    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept {
        const int f = fd_;
        fd_ = -1;
        return f;
    }
    void reset() noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

  private:
    int fd_ = -1;
};

// A non-blocking call that failed for now only: try again when the socket says so.
inline bool would_block(int e) noexcept {
    return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

}  // namespace transit::tcp
