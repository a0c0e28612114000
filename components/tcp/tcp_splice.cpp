#include "tcp_splice.hpp"

#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <pthread.h>

namespace transit::tcp {

namespace {

// splice(2) into a socket whose peer is gone raises SIGPIPE (it has no
// MSG_NOSIGNAL): the signal is blocked in this thread for the call, and one it
// raised is taken back, so the caller sees EPIPE as from sendmsg.
class QuietSigpipe {
  public:
    QuietSigpipe() noexcept {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t pending;
        sigemptyset(&pending);
        ::sigpending(&pending);
        was_pending_ = sigismember(&pending, SIGPIPE) == 1;
        ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    }
    ~QuietSigpipe() {
        const int saved = errno;
        if (raised_ && !was_pending_) {
            const timespec now{};
            ::sigtimedwait(&pipe_, nullptr, &now);
        }
        ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
        errno = saved;
    }
    QuietSigpipe(const QuietSigpipe&) = delete;
    QuietSigpipe& operator=(const QuietSigpipe&) = delete;
    void raised() noexcept { raised_ = true; }

  private:
    sigset_t pipe_;
    sigset_t old_;
    bool was_pending_ = false;
    bool raised_ = false;
};

// Pages the pipe takes per vmsplice; more only saves system calls.  Without
// the room (a user past /proc/sys/fs/pipe-user-pages-soft) the pipe keeps
// what the kernel gave it.
constexpr int pipe_bytes = 256 * 1024;

}  // namespace

bool SplicePipe::open() noexcept {
    if (failed_) return false;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        failed_ = true;
        return false;
    }
    read_ = Fd(fds[0]);
    write_ = Fd(fds[1]);
    ::fcntl(write_.get(), F_SETPIPE_SZ, pipe_bytes);
    return true;
}

SplicePipe::Result SplicePipe::write(const void* user, int socket, iovec& data) noexcept {
    if (held_ > 0 && user_ != user) return Result::unavailable;
    if (!read_) return Result::unavailable;
    user_ = user;
    QuietSigpipe quiet;
    for (;;) {
        if (held_ == 0) {
            if (data.iov_len == 0) return Result::done;
            // Memory the kernel cannot lend (n <= 0 with the pipe empty) is
            // copied instead: everything taken so far is in the socket.
            const ssize_t n = ::vmsplice(write_.get(), &data, 1, SPLICE_F_NONBLOCK);
            if (n <= 0) return Result::unavailable;
            data.iov_base = static_cast<char*>(data.iov_base) + n;
            data.iov_len -= static_cast<std::size_t>(n);
            held_ = static_cast<std::size_t>(n);
        }
        const unsigned more = data.iov_len > 0 ? SPLICE_F_MORE : 0u;
        const ssize_t k = ::splice(read_.get(), nullptr, socket, nullptr, held_,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK | more);
        if (k < 0) {
            if (would_block(errno)) return Result::partial;
            if (errno == EPIPE) quiet.raised();
            return Result::error;
        }
        held_ -= static_cast<std::size_t>(k);
        if (held_ > 0) return Result::partial;
    }
}

void SplicePipe::release(const void* user) noexcept {
    if (held_ == 0 || user_ != user) return;
    // What the pipe holds can only go to that socket: a new pipe instead.
    read_.reset();
    write_.reset();
    held_ = 0;
    user_ = nullptr;
    open();
}

}  // namespace transit::tcp
