// The tcp module's pipe for payloads sent by reference (tcp_splice.hpp), on
// real loopback TCP connections: the bytes arrive whole and in order across
// partial writes, the pipe is lent to one socket at a time, and a peer gone
// gives an error, not SIGPIPE.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "components/tcp/tcp_sigpipe.hpp"
#include "components/tcp/tcp_splice.hpp"

using transit::tcp::Fd;
using transit::tcp::SigpipeScope;
using transit::tcp::SplicePipe;
using Result = SplicePipe::Result;

namespace {

// Both ends of a loopback TCP connection; the sending end is non-blocking.
struct Connection {
    Fd sender;
    Fd receiver;
};

Connection connect_loopback() {
    Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    EXPECT_EQ(::listen(listener.get(), 1), 0);
    Connection c;
    c.sender = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(c.sender.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    c.receiver = Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_TRUE(c.receiver);
    ::fcntl(c.sender.get(), F_SETFL, ::fcntl(c.sender.get(), F_GETFL) | O_NONBLOCK);
    return c;
}

std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
    std::vector<std::byte> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
    return v;
}

// Reads what is there now (up to `max` bytes) into `into`.
void drain(int fd, std::vector<std::byte>& into, std::size_t max) {
    std::vector<std::byte> buf(max);
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n > 0) into.insert(into.end(), buf.begin(), buf.begin() + n);
}

// Reads until `into` holds `size` bytes; false if the sender stalls.
bool read_all(int fd, std::vector<std::byte>& into, std::size_t size) {
    while (into.size() < size) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 5000) != 1) return false;
        drain(fd, into, 1 << 20);
    }
    return true;
}

// Writes 4 MiB, again and again, to a connection its peer reset, until three
// writes have failed; returns how many did (3 unless the writes kept working).
int fail_three_writes_to_reset_connection(unsigned seed) {
    Connection c = connect_loopback();
    const linger reset{1, 0};  // close with RST
    ::setsockopt(c.receiver.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    c.receiver.reset();
    const std::vector<std::byte> src = pattern(4u << 20, seed);
    SplicePipe pipe;
    int errors = 0;
    for (int i = 0; i < 100 && errors < 3; ++i) {
        iovec data{const_cast<std::byte*>(src.data()), src.size()};
        pipe.release(&c);
        if (pipe.write(&c, c.sender.get(), data) == Result::error) ++errors;
    }
    return errors;
}

bool sigpipe_pending() {
    sigset_t p;
    sigemptyset(&p);
    ::sigpending(&p);
    return sigismember(&p, SIGPIPE) == 1;
}

}  // namespace

// Far more than the socket buffers hold: the pipe keeps what the socket did
// not take and hands it on at the next call, and the reader sees every byte
// in order.
TEST(TcpSplice, LargePayloadArrivesWholeAcrossPartialWrites) {
    Connection c = connect_loopback();
    const int small = 64 * 1024;
    ::setsockopt(c.receiver.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    const std::vector<std::byte> src = pattern(16u << 20, 3);
    SplicePipe pipe;
    iovec data{const_cast<std::byte*>(src.data()), src.size()};
    std::vector<std::byte> got;
    int partials = 0;
    for (;;) {
        const Result r = pipe.write(&c, c.sender.get(), data);
        ASSERT_NE(r, Result::error) << std::strerror(errno);
        ASSERT_NE(r, Result::unavailable);
        if (r == Result::done) break;
        ++partials;
        drain(c.receiver.get(), got, 256 * 1024);
    }
    EXPECT_GT(partials, 0);
    EXPECT_EQ(data.iov_len, 0u);
    ASSERT_TRUE(read_all(c.receiver.get(), got, src.size())) << "stalled at " << got.size();
    EXPECT_TRUE(got == src);
}

// While one socket's bytes wait in the pipe, another socket is told to copy
// and none of its payload is taken; once they are written (or the first
// socket is released) the pipe serves the other.
TEST(TcpSplice, PipeIsLentToOneSocketAtATime) {
    Connection first = connect_loopback();
    Connection second = connect_loopback();
    const std::vector<std::byte> a = pattern(16u << 20, 5);
    const std::vector<std::byte> b = pattern(1u << 20, 9);
    SplicePipe pipe;
    iovec da{const_cast<std::byte*>(a.data()), a.size()};
    ASSERT_EQ(pipe.write(&first, first.sender.get(), da), Result::partial);
    iovec db{const_cast<std::byte*>(b.data()), b.size()};
    EXPECT_EQ(pipe.write(&second, second.sender.get(), db), Result::unavailable);
    EXPECT_EQ(db.iov_len, b.size());

    // The first socket's reader takes everything: its payload completes.
    std::vector<std::byte> got_a;
    Result r = Result::partial;
    while (r == Result::partial) {
        drain(first.receiver.get(), got_a, 1 << 20);
        r = pipe.write(&first, first.sender.get(), da);
    }
    ASSERT_EQ(r, Result::done);
    ASSERT_TRUE(read_all(first.receiver.get(), got_a, a.size()));
    EXPECT_TRUE(got_a == a);

    // Now the second socket's payload goes through the pipe.
    std::vector<std::byte> got_b;
    r = Result::partial;
    while (r == Result::partial) {
        r = pipe.write(&second, second.sender.get(), db);
        ASSERT_NE(r, Result::unavailable);
        drain(second.receiver.get(), got_b, 1 << 20);
    }
    ASSERT_EQ(r, Result::done);
    ASSERT_TRUE(read_all(second.receiver.get(), got_b, b.size()));
    EXPECT_TRUE(got_b == b);

    // A socket released with bytes in the pipe frees it for the others.
    Connection third = connect_loopback();
    iovec dc{const_cast<std::byte*>(a.data()), a.size()};
    ASSERT_EQ(pipe.write(&third, third.sender.get(), dc), Result::partial);
    iovec dd{const_cast<std::byte*>(b.data()), b.size()};
    EXPECT_EQ(pipe.write(&second, second.sender.get(), dd), Result::unavailable);
    pipe.release(&second);  // not the holder: nothing changes
    EXPECT_EQ(pipe.write(&second, second.sender.get(), dd), Result::unavailable);
    pipe.release(&third);
    EXPECT_NE(pipe.write(&second, second.sender.get(), dd), Result::unavailable);
}

// splice(2) itself raises SIGPIPE on a connection the peer has reset; the
// process (default disposition: killed) must see an error instead, and no
// SIGPIPE may be left pending.
TEST(TcpSplice, PeerGoneIsAnErrorNotSigpipe) {
    ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);
    Connection c = connect_loopback();
    const linger reset{1, 0};  // close with RST
    ::setsockopt(c.receiver.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    c.receiver.reset();
    const std::vector<std::byte> src = pattern(4u << 20, 7);
    SplicePipe pipe;
    Result r = Result::partial;
    int errors = 0;
    for (int i = 0; i < 100 && errors < 3; ++i) {
        iovec data{const_cast<std::byte*>(src.data()), src.size()};
        pipe.release(&c);
        r = pipe.write(&c, c.sender.get(), data);
        if (r == Result::error) {
            ++errors;
            EXPECT_TRUE(errno == EPIPE || errno == ECONNRESET) << std::strerror(errno);
        }
    }
    EXPECT_EQ(errors, 3) << "writes to a reset connection kept succeeding";
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    EXPECT_FALSE(sigismember(&pending, SIGPIPE));
}

// The pipe takes 1 MiB (the default /proc/sys/fs/pipe-max-size) where the
// system allows it: a 1 MiB payload goes in one vmsplice and one splice.
TEST(TcpSplice, PipeTakesAMebibyteWhereAllowed) {
    long max = 0;
    if (FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "r")) {
        if (std::fscanf(f, "%ld", &max) != 1) max = 0;
        std::fclose(f);
    }
    if (max < (1 << 20)) GTEST_SKIP() << "pipe-max-size is " << max;
    SplicePipe pipe;
    EXPECT_EQ(pipe.capacity(), std::size_t{1} << 20);
}

// A thread that blocks SIGPIPE itself keeps it blocked, and a SIGPIPE that was
// pending before the write stays pending: only the one splice raised is taken.
TEST(TcpSplice, ThreadBlockingSigpipeKeepsItsMaskAndItsPendingSignal) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &pipe_set, &old), 0);

    // Nothing pending before: what splice raised is taken back.
    EXPECT_EQ(fail_three_writes_to_reset_connection(11), 3);
    EXPECT_FALSE(sigpipe_pending());

    // One pending before (the thread's own): it is still there after.
    ASSERT_EQ(::pthread_kill(::pthread_self(), SIGPIPE), 0);
    ASSERT_TRUE(sigpipe_pending());
    EXPECT_EQ(fail_three_writes_to_reset_connection(11), 3);
    EXPECT_TRUE(sigpipe_pending());

    sigset_t now;
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
    EXPECT_TRUE(sigismember(&now, SIGPIPE)) << "the write unblocked SIGPIPE";
    const timespec zero{};
    ::sigtimedwait(&pipe_set, nullptr, &zero);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// A thread that does not block SIGPIPE finds it unblocked after a write that
// failed, with nothing pending.
TEST(TcpSplice, UnblockedSigpipeStaysUnblocked) {
    ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);
    EXPECT_EQ(fail_three_writes_to_reset_connection(13), 3);
    EXPECT_FALSE(sigpipe_pending());
    sigset_t now;
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
    EXPECT_FALSE(sigismember(&now, SIGPIPE));
}

// Within one scope (a progress pass) the signal mask is changed twice however
// many payloads are lent, the first lent write blocking SIGPIPE and the end of
// the scope restoring it; a peer gone in the middle is still an error, not a
// signal, and the mask is the thread's own again after the scope.
TEST(TcpSplice, OneSigpipeGuardPerScope) {
    ASSERT_NE(::signal(SIGPIPE, SIG_DFL), SIG_ERR);
    Connection live = connect_loopback();
    Connection dead = connect_loopback();
    const linger reset{1, 0};
    ::setsockopt(dead.receiver.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    dead.receiver.reset();
    const std::vector<std::byte> src = pattern(64 * 1024, 13);
    SplicePipe pipe;
    const unsigned long before = SigpipeScope::mask_calls();
    {
        const SigpipeScope pass;
        EXPECT_EQ(SigpipeScope::mask_calls(), before) << "a scope with nothing lent costs nothing";
        std::vector<std::byte> got;
        for (int i = 0; i < 8; ++i) {
            iovec data{const_cast<std::byte*>(src.data()), src.size()};
            ASSERT_EQ(pipe.write(&live, live.sender.get(), data), Result::done);
            ASSERT_TRUE(read_all(live.receiver.get(), got, src.size() * (i + 1)));
        }
        int errors = 0;
        for (int i = 0; i < 100 && errors < 1; ++i) {
            iovec data{const_cast<std::byte*>(src.data()), src.size()};
            pipe.release(&dead);
            if (pipe.write(&dead, dead.sender.get(), data) == Result::error) ++errors;
        }
        EXPECT_EQ(errors, 1);
        EXPECT_EQ(SigpipeScope::mask_calls(), before + 1) << "SIGPIPE blocked once for the scope";
        sigset_t now;
        ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
        EXPECT_TRUE(sigismember(&now, SIGPIPE));
    }
    EXPECT_EQ(SigpipeScope::mask_calls(), before + 2);
    sigset_t now;
    ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
    EXPECT_FALSE(sigismember(&now, SIGPIPE)) << "the scope left SIGPIPE blocked";
    EXPECT_FALSE(sigpipe_pending());
}
