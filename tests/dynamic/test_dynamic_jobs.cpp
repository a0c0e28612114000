// Peers outside the job when one side is a launched job: clients that are
// the two ranks of their own transit_run job, with a singleton server; and a
// server that is rank 0 of a 2-rank job, with singleton clients.
//   TRANSIT_RUN                   the driver (argv[1]: the launcher)
//   server                        a singleton echo server; ends on tag_quit
//   jobserver                     rank 0 of its job: the same server; rank 1
//                                 waits in the final barrier
//   client ADDRESS echo|quit      0 B to 4 MiB echoes then disconnect, or quit
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "processes.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using transit::Rank;
using transit::Status;

constexpr std::uint32_t tag_echo = 1;
constexpr std::uint32_t tag_quit = 9;
constexpr std::size_t big = 4u << 20;

// Echoes until tag_quit; every sender must be a peer outside the job.
void serve(transit::Context& ctx) {
    say("%s", ctx.listen().c_str());
    serve_echoes(ctx, tag_quit, big);
}

int client(transit::Context& ctx, const std::string& address, const std::string& mode) {
    Rank server = transit::any_rank;
    check(ctx.connect(address, server) == Status::success, "connect");
    check_transport(ctx, server);
    check(server >= ctx.size(), "a server's id follows the job's ranks");
    if (mode == "quit") {
        quit_server(ctx, server, tag_quit);
        return 0;
    }
    for (std::size_t n : {std::size_t{0}, std::size_t{100}, std::size_t{65536}, big})
        echo_once(ctx, server, tag_echo, n, ctx.rank() * 1000 + static_cast<std::uint32_t>(n));
    check(ctx.disconnect(server) == Status::success, "disconnect");
    // The job's own messages still flow.
    check(ctx.barrier() == Status::success, "barrier");
    return 0;
}

int driver(const char* launcher, const std::string& me) {
    // Clients that are ranks of their own job.
    Child srv = start({me, "server"});
    const std::string address = read_line(srv, 20, "the server's address");
    Child job = start_program(
        launcher, {launcher, "-n", "2", "--timeout", "60", me, "client", address, "echo"});
    check(wait_exit(job) == 0, "the 2-rank client job failed");
    Child quit = start({me, "client", address, "quit"});
    check(wait_exit(quit) == 0, "quit");
    check(wait_exit(srv) == 0, "the singleton server failed");
    say("clients that are ranks of a 2-rank job: served");

    // A server that is rank 0 of a 2-rank job.
    Child jsrv = start_program(launcher, {launcher, "-n", "2", "--timeout", "60", me, "jobserver"});
    const std::string jaddress = read_line(jsrv, 30, "the job server's address");
    std::vector<Child> clients;
    for (int i = 0; i < 2; ++i) clients.push_back(start({me, "client", jaddress, "echo"}));
    for (Child& c : clients) check(wait_exit(c) == 0, "a client of the job server failed");
    Child jquit = start({me, "client", jaddress, "quit"});
    check(wait_exit(jquit) == 0, "quit");
    check(wait_exit(jsrv) == 0, "the 2-rank server job failed");
    say("a server that is rank 0 of a 2-rank job: served its clients");
    say("PASS");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string role = argc >= 2 ? argv[1] : "";
    if (role == "server") {
        auto ctx = transit::init();
        serve(ctx);
        return 0;
    }
    if (role == "jobserver") {
        auto ctx = transit::init();
        if (ctx.rank() == 0) serve(ctx);
        check(ctx.barrier() == Status::success, "job server barrier");
        return 0;
    }
    if (role == "client" && argc >= 4) {
        auto ctx = transit::init();
        return client(ctx, argv[2], argv[3]);
    }
    check(argc >= 2, "usage: test_dynamic_jobs TRANSIT_RUN");
    ::signal(SIGPIPE, SIG_IGN);
    return driver(argv[1], argv[0]);
}
