#include "tcp_splice.hpp"

#include "tcp_sigpipe.hpp"

#include <cerrno>

#include <fcntl.h>

namespace transit::tcp {

namespace {

// Bytes the pipe takes per vmsplice: a 1 MiB payload in one vmsplice and one
// splice when the socket has the room, rather than four of each.  1 MiB is
// the default /proc/sys/fs/pipe-max-size; where it is lower, or a user is past
// /proc/sys/fs/pipe-user-pages-soft, the pipe takes the smaller sizes, down to
// what the kernel gave it.
constexpr int pipe_sizes[] = {1024 * 1024, 256 * 1024};

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
    for (const int size : pipe_sizes)
        if (::fcntl(write_.get(), F_SETPIPE_SZ, size) >= 0) break;
    const int size = ::fcntl(write_.get(), F_GETPIPE_SZ);
    capacity_ = size > 0 ? static_cast<std::size_t>(size) : 0;
    return true;
}

SplicePipe::Result SplicePipe::write(const void* user, int socket, iovec& data) noexcept {
    if (held_ > 0 && user_ != user) return Result::unavailable;
    if (!read_) return Result::unavailable;
    user_ = user;
    SigpipeScope scope;  // inside a progress pass's scope: guarded once for the pass
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
        SigpipeScope::guard();
        const ssize_t k = ::splice(read_.get(), nullptr, socket, nullptr, held_,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK | more);
        if (k < 0) {
            if (would_block(errno)) return Result::partial;
            if (errno == EPIPE) SigpipeScope::raised();
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
    capacity_ = 0;
    held_ = 0;
    user_ = nullptr;
    open();
}

}  // namespace transit::tcp
