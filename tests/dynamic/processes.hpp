// What the tests of peers outside the job share: each test program is a
// driver that starts itself again as the server and the clients, separate
// processes (not one job), and reads their output lines.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "transit/transit.hpp"

namespace transit_test {

// The processes this one started and has not waited for: a failing driver
// kills them, so no server outlives its test.
inline std::vector<pid_t>& running() {
    static std::vector<pid_t> pids;
    return pids;
}

[[noreturn]] inline void fail(const std::string& what) {
    std::fprintf(stderr, "[%d] FAILED: %s\n", static_cast<int>(::getpid()), what.c_str());
    for (pid_t p : running()) ::kill(p, SIGKILL);
    std::exit(1);
}

inline void check(bool cond, const std::string& what) {
    if (!cond) fail(what);
}

// A recognisable pattern for a message of n bytes.
inline std::vector<std::byte> pattern(std::size_t n, std::uint32_t seed) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
    return v;
}

inline std::string status_text(transit::Status s) {
    return std::string(transit::to_string(s));
}

// One round trip through an echo server on `tag`: `n` bytes of the pattern
// `seed` out, the same bytes back, from the server, whole.
inline void echo_once(transit::Context& ctx, transit::Rank server, std::uint32_t tag, std::size_t n,
                      std::uint32_t seed) {
    const std::string what = "echo of " + std::to_string(n) + " B";
    const auto out = pattern(n, seed);
    std::vector<std::byte> in(n + 1);  // room for one more: a longer reply shows
    transit::Request* r = nullptr;
    check(transit::ok(ctx.irecv(server, tag, in.data(), in.size(), r)), what + ": irecv");
    const transit::Status sent = ctx.send(server, tag, out.data(), n);
    check(sent == transit::Status::success, what + ": send: " + status_text(sent));
    transit::RequestStatus st;
    ctx.wait(r, &st);
    check(st.status == transit::Status::success, what + ": " + status_text(st.status));
    check(st.source == server && st.length == n,
          what + ": " + std::to_string(st.length) + " B from peer " + std::to_string(st.source));
    // Not memcmp: an empty vector's data() may be null, which memcmp may not take.
    check(std::equal(out.begin(), out.end(), in.begin()), what + " differs");
}

// Ends a server: a message on `tag`, and its answer.
inline void quit_server(transit::Context& ctx, transit::Rank server, std::uint32_t tag) {
    std::uint32_t v = 0;
    const transit::Status sent = ctx.send(server, tag, &v, sizeof v);
    check(sent == transit::Status::success, "quit: " + status_text(sent));
    const transit::Status answer = ctx.recv(server, tag, &v, sizeof v);
    check(answer == transit::Status::success, "quit answer: " + status_text(answer));
}

// An echo server: every message (up to `max` bytes) goes back to its sender
// on its tag, until one on `quit_tag` (answered too).  Every sender must be a
// peer outside the job.
inline void serve_echoes(transit::Context& ctx, std::uint32_t quit_tag, std::size_t max) {
    std::vector<std::byte> buf(max);
    for (;;) {
        transit::RequestStatus st;
        const transit::Status got =
            ctx.recv(transit::any_rank, transit::any_tag, buf.data(), buf.size(), &st);
        check(got == transit::Status::success, "server recv: " + status_text(got));
        check(st.source >= ctx.size(), "a client's message names a job rank");
        const transit::Status sent = ctx.send(st.source, st.tag, buf.data(), st.length);
        check(sent == transit::Status::success, "server reply: " + status_text(sent));
        if (st.tag == quit_tag) return;
    }
}

// A line to the driver, at once (stdout is a pipe).
template <typename... A>
void say(const char* fmt, A... a) {
    std::printf(fmt, a...);
    std::printf("\n");
    std::fflush(stdout);
}

struct Child {
    pid_t pid = -1;
    int out = -1;  // its stdout
    std::string pending;
};

// `program` with `args` (args[0] is its argv[0]); a program without a '/' is
// looked for in PATH.
inline Child start_program(const char* program, std::vector<std::string> args) {
    int fds[2];
    check(::pipe(fds) == 0, "pipe");
    Child c;
    c.pid = ::fork();
    check(c.pid >= 0, "fork");
    if (c.pid == 0) {
        ::dup2(fds[1], 1);
        ::close(fds[0]);
        ::close(fds[1]);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        ::execvp(program, argv.data());
        std::_Exit(127);
    }
    ::close(fds[1]);
    c.out = fds[0];
    running().push_back(c.pid);
    return c;
}

// This program again, with `args` (args[0] is argv[0]).  Under netns_peers.sh
// the server (args[1] "server") runs in the network namespace
// TRANSIT_TEST_SERVER_NS and everything else in TRANSIT_TEST_CLIENT_NS: two
// nodes joined by a veth pair.
inline Child start(std::vector<std::string> args) {
    const bool server = args.size() > 1 && args[1] == "server";
    const char* ns = std::getenv(server ? "TRANSIT_TEST_SERVER_NS" : "TRANSIT_TEST_CLIENT_NS");
    if (ns == nullptr) return start_program("/proc/self/exe", std::move(args));
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    check(n > 0, "readlink /proc/self/exe");
    args[0].assign(self, static_cast<std::size_t>(n));
    args.insert(args.begin(), {"ip", "netns", "exec", ns});
    return start_program("ip", std::move(args));
}

// The child's next line, or fail after `seconds`.
inline std::string read_line(Child& c, int seconds, const std::string& what) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    for (;;) {
        if (auto nl = c.pending.find('\n'); nl != std::string::npos) {
            std::string line = c.pending.substr(0, nl);
            c.pending.erase(0, nl + 1);
            return line;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end - std::chrono::steady_clock::now());
        check(left.count() > 0, "timed out waiting for " + what);
        pollfd p{c.out, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        char buf[4096];
        const ssize_t n = ::read(c.out, buf, sizeof buf);
        check(n > 0, "end of output waiting for " + what);
        c.pending.append(buf, static_cast<std::size_t>(n));
    }
}

inline int wait_exit(Child& c) {
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    std::erase(running(), c.pid);
    ::close(c.out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// With TRANSIT_TEST_PEER_BTL set (by the test's definition), the transport
// that must carry every message to `peer`: the one the bml chose for it.
inline void check_transport(transit::Context& ctx, transit::Rank peer) {
    const char* want = std::getenv("TRANSIT_TEST_PEER_BTL");
    if (want == nullptr) return;
    const transit::PeerTransports t = ctx.transports(peer);
    std::string got;
    // By component: a module's name may add its interface ("tcp:lo").
    for (const std::string& s : t.send) got += (got.empty() ? "" : ",") + s.substr(0, s.find(':'));
    check(got == want,
          "peer " + std::to_string(peer) + " carried by '" + got + "', not '" + want + "'");
    // TRANSIT_TEST_PEER_MODULE: the module too, by the start of its name up to
    // a ';' ("ofi:tcp" for "ofi:tcp;ofi_rxm").
    if (const char* module = std::getenv("TRANSIT_TEST_PEER_MODULE")) {
        const std::string m = module;
        for (const std::string& s : t.send)
            check(s.starts_with(m) && (s.size() == m.size() || s[m.size()] == ';'),
                  "peer " + std::to_string(peer) + " carried by " + s + ", not " + m);
    }
    // Across network namespaces (netns_peers.sh) the peer is on another node:
    // loopback cannot reach it.
    if (std::getenv("TRANSIT_TEST_CLIENT_NS") == nullptr) return;
    for (const std::string& s : t.send)
        check(s.find(":lo") == std::string::npos,
              "peer " + std::to_string(peer) + " on another node carried by " + s);
}

inline long long ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
}

}  // namespace transit_test
