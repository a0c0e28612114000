// The processes of a test with peers outside the job: this program is the
// driver and (with a role argument) each of the processes it starts, which
// report on their stdout.
#pragma once

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace transit::test {

[[noreturn]] inline void fail(const std::string& what) {
    std::fprintf(stderr, "[%d] FAILED: %s\n", static_cast<int>(::getpid()), what.c_str());
    std::exit(1);
}

inline void check(bool cond, const std::string& what) {
    if (!cond) fail(what);
}

struct Child {
    pid_t pid = -1;
    int out = -1;  // its stdout
    std::string pending;
};

inline Child start(std::vector<std::string> args) {
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
        ::execv("/proc/self/exe", argv.data());
        std::_Exit(127);
    }
    ::close(fds[1]);
    c.out = fds[0];
    return c;
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
    ::close(c.out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace transit::test
