// A server that waits sleeps in the kernel (pml_base_wait_policy=block):
//   - idle for 2 s with a client connected, it uses under 5 % of a core
//     (from /proc/<pid>/stat);
//   - in a ping-pong where both sides stop spinning after 2 µs and the client
//     pauses 0-120 µs between messages (so messages keep arriving as the
//     server arms its transports), every message arrives: a lost wake-up
//     would leave a wait asleep for pml_base_wait_block_interval (set to a
//     minute here), and the client's bounded wait fails it;
//   - a server that runs its own poll() loop on Context::event_fd() (arm,
//     poll, progress) gets every message, each announced by the descriptor.
// The same idle and ping-pong checks for a server with a progress thread
// (pml_base_progress_thread) and for one at thread level multiple: one thread
// sleeps in the kernel, the others wait for it to wake.
// Separate processes (not one job): this program is the driver (and the
// client) and, with a role argument, the server it starts.
//   server wait      echoes with wait(req, 250 ms) (the timeout path too)
//   server thread    the same, with a progress thread
//   server multiple  the same at thread level multiple, a second thread
//                    waiting in a receive of its own meanwhile
//   server evloop    echoes from a poll() loop on event_fd()
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "processes.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using std::chrono::milliseconds;
using transit::Rank;
using transit::Request;
using transit::RequestStatus;
using transit::Status;

constexpr std::uint32_t tag_echo = 1;
constexpr std::uint32_t tag_quit = 9;
constexpr std::uint32_t tag_self = 10;
constexpr std::size_t max_message = 64;
constexpr int pingpong_rounds = 3000;
constexpr int evloop_rounds = 300;

// Echoes until the quit message; `receive` finishes one receive request.
template <typename Receive>
void echo_loop(transit::Context& ctx, Receive receive) {
    std::vector<std::byte> buf(max_message);
    for (;;) {
        Request* r = nullptr;
        const Status posted =
            ctx.irecv(transit::any_rank, transit::any_tag, buf.data(), buf.size(), r);
        check(transit::ok(posted), "server irecv: " + status_text(posted));
        const RequestStatus st = receive(r);
        check(st.status == Status::success, "server receive: " + status_text(st.status));
        const Status sent = ctx.send(st.source, st.tag, buf.data(), st.length);
        check(sent == Status::success, "server reply: " + status_text(sent));
        if (st.tag == tag_quit) return;
    }
}

int server_wait(const char* mode) {
    if (std::strcmp(mode, "thread") == 0) ::setenv("TRANSIT_MCA_pml_base_progress_thread", "1", 1);
    if (std::strcmp(mode, "multiple") == 0)
        ::setenv("TRANSIT_MCA_pml_base_thread_level", "multiple", 1);
    auto ctx = transit::init();
    // At thread level multiple, a second thread waits meanwhile for a message
    // that comes only at the end (the quit's tag from the server itself).
    std::thread other;
    std::uint64_t never = 0;
    Request* never_r = nullptr;
    if (std::strcmp(mode, "multiple") == 0) {
        check(ctx.thread_level() == transit::ThreadLevel::multiple, "thread level multiple");
        check(transit::ok(ctx.irecv(ctx.rank(), tag_self, &never, sizeof never, never_r)),
              "server irecv from itself");
        other = std::thread([&] {
            RequestStatus st;
            const Status s = ctx.wait(never_r, &st);
            check(s == Status::success && never == tag_self, "the second thread's receive");
        });
    }
    say("address %s", ctx.listen().c_str());
    echo_loop(ctx, [&](Request*& r) {
        RequestStatus st;
        Status s;
        while ((s = ctx.wait(r, milliseconds(250), &st)) == Status::timeout)
            check(r != nullptr, "a wait that timed out released its request");
        check(r == nullptr, "a finished wait kept its request");
        return st;
    });
    if (other.joinable()) {
        const std::uint64_t value = tag_self;
        check(ctx.send(ctx.rank(), tag_self, &value, sizeof value) == Status::success,
              "server send to itself");
        other.join();
    }
    return 0;
}

int server_evloop() {
    auto ctx = transit::init();
    const int fd = ctx.event_fd();
    check(fd >= 0, "event_fd is -1 over a transport that can wake a sleeper");
    say("address %s", ctx.listen().c_str());
    echo_loop(ctx, [&](Request*& r) {
        for (;;) {
            while (ctx.progress() > 0) {
            }
            bool done = false;
            RequestStatus st;
            check(transit::ok(ctx.test(r, done, &st)) || done, "server test");
            if (done) return st;
            const Status armed = ctx.arm();
            if (armed == Status::not_available) continue;  // work came meanwhile
            check(armed == Status::success, "arm: " + status_text(armed));
            pollfd p{fd, POLLIN, 0};
            // The client answers within milliseconds; 10 s without the
            // descriptor turning readable is a message it never announced.
            const int n = ::poll(&p, 1, 10000);
            check(n == 1 && (p.revents & POLLIN), "event_fd not readable for 10 s");
        }
    });
    return 0;
}

// Clock ticks the process has run (user + system), from /proc/<pid>/stat.
long long cpu_ticks(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');  // the command name may hold spaces
    check(close != std::string::npos, "/proc/" + std::to_string(pid) + "/stat");
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    long long utime = 0, stime = 0;
    // Fields 3.. follow the name; utime and stime are fields 14 and 15.
    for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoll(field);
        if (i == 15) stime = std::stoll(field);
    }
    return utime + stime;
}

// One round trip of `n` bytes; the wait for the answer is bounded.
void round_trip(transit::Context& ctx, Rank server, std::uint32_t tag, std::uint32_t i,
                const char* what) {
    std::uint64_t out = 0x5eed0000ull + i, in = 0;
    Request* r = nullptr;
    check(transit::ok(ctx.irecv(server, tag, &in, sizeof in, r)), std::string(what) + ": irecv");
    const Status sent = ctx.send(server, tag, &out, sizeof out);
    check(sent == Status::success, std::string(what) + ": send: " + status_text(sent));
    RequestStatus st;
    const Status got = ctx.wait(r, milliseconds(10000), &st);
    check(got != Status::timeout, std::string(what) + ": no answer within 10 s at round " +
                                      std::to_string(i) + " (a lost wake-up)");
    check(got == Status::success && in == out,
          std::string(what) + ": round " + std::to_string(i) + ": " + status_text(got));
}

// Busy for `us` microseconds (not a sleep: the gap is the point, not a wait).
void pause_us(int us) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
    while (std::chrono::steady_clock::now() < end) {
    }
}

void pingpong(transit::Context& ctx, Rank server, int rounds, const char* what) {
    for (int i = 0; i < rounds; ++i) {
        round_trip(ctx, server, tag_echo, static_cast<std::uint32_t>(i), what);
        pause_us((i * 7) % 121);
    }
}

// Starts the server in `mode` and connects to it.
Rank start_server(transit::Context& ctx, const char* mode, Child& srv) {
    srv = start({"test_dynamic_idle", "server", mode});
    const std::string line = read_line(srv, 30, std::string("the address of server ") + mode);
    check(line.rfind("address ", 0) == 0, "server said: " + line);
    Rank server = 0;
    const Status c = ctx.connect(line.substr(8), server);
    check(c == Status::success, "connect: " + status_text(c));
    check_transport(ctx, server);
    return server;
}

void stop_server(transit::Context& ctx, Rank server, Child& srv) {
    round_trip(ctx, server, tag_quit, 0, "quit");
    ctx.disconnect(server);  // the server's goodbye needs our answer
    check(wait_exit(srv) == 0, "the server failed");
}

// Per cent of a core `pid` used over 2 s.
double idle_percent(pid_t pid) {
    const long long before = cpu_ticks(pid);
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(milliseconds(2000));  // the measurement, not a wait for it
    const long long used = cpu_ticks(pid) - before;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double percent =
        100.0 * static_cast<double>(used) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / seconds;
    std::printf("idle server: %.2f %% of a core over %.1f s\n", percent, seconds);
    return percent;
}

int driver() {
    // Both sides stop spinning almost at once, so nearly every message meets
    // a process that is arming or asleep; a lost wake-up sleeps a minute.
    ::setenv("TRANSIT_MCA_pml_base_wait_spin_time", "2", 1);
    ::setenv("TRANSIT_MCA_pml_base_wait_block_interval", "60000", 1);
    auto ctx = transit::init();

    Child srv;
    Rank server = 0;
    for (const char* mode : {"wait", "thread", "multiple"}) {
        server = start_server(ctx, mode, srv);
        round_trip(ctx, server, tag_echo, 0, "first echo");
        // The server waits in its receive, with a client connected.
        const double percent = idle_percent(srv.pid);
        check(percent < 5.0, std::string("an idle server (") + mode + ") used " +
                                 std::to_string(percent) + " % of a core");
        pingpong(ctx, server, pingpong_rounds, mode);
        stop_server(ctx, server, srv);
    }

    server = start_server(ctx, "evloop", srv);
    pingpong(ctx, server, evloop_rounds, "event loop");
    stop_server(ctx, server, srv);
    std::printf("PASSED\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::strcmp(argv[1], "server") == 0)
        return std::strcmp(argv[2], "evloop") == 0 ? server_evloop() : server_wait(argv[2]);
    return driver();
}
