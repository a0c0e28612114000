// Names: Context::publish / lookup / unpublish through PMIx, served by
// transit_run, and, for processes started by hand (singletons), through this
// user's name directory on the node, which transit_run shares.  This program
// is the driver (argv[1]: transit_run) and, with a role argument, the ranks
// and singletons it starts:
//   job                 a 2-rank job: rank 0 publishes its address, rank 1
//                       looks it up (waiting), connects and echoes; duplicate,
//                       unknown, foreign and unpublished names fail clearly
//   server NAME         rank 0 of a job of its own (or a singleton): publishes
//                       NAME, serves echoes until tag_quit
//   client NAME         another job or singleton: looks NAME up, connects,
//                       echoes, quits it
//   publish NAME        another: publishing NAME again gives `exists`
//   take NAME           another: publishing NAME succeeds (its holder is dead)
//   unpublish NAME      another: unpublishing NAME gives `access_denied`
//   lookup NAME WAIT_MS another: prints what lookup gives
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "pml/engine.hpp"
#include "processes.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using std::chrono::milliseconds;
using transit::Rank;
using transit::Status;

constexpr std::uint32_t tag_echo = 1;
constexpr std::uint32_t tag_quit = 9;
constexpr std::size_t big = 4u << 20;

void expect(Status got, Status want, const std::string& what) {
    check(got == want, what + ": " + status_text(got) + ", not " + status_text(want));
}

void echo_and_quit(transit::Context& ctx, const std::string& address) {
    Rank server = transit::any_rank;
    expect(ctx.connect(address, server), Status::success, "connect");
    for (std::size_t n : {std::size_t{0}, std::size_t{100}, std::size_t{65536}, big})
        echo_once(ctx, server, tag_echo, n, static_cast<std::uint32_t>(n) + ctx.rank());
    quit_server(ctx, server, tag_quit);
    expect(ctx.disconnect(server), Status::success, "disconnect");
}

// Both ranks of one job.  Rank 1 asks first and waits: rank 0 publishes a
// moment later.
int job() {
    auto ctx = transit::init();
    check(ctx.size() == 2, "the job test needs 2 ranks");
    const std::string name = "names-test-" + ctx.engine().runtime().job_id();
    if (ctx.rank() == 0) {
        const auto t = std::chrono::steady_clock::now();
        while (ms_since(t) < 300) ctx.progress();
        expect(ctx.publish(name), Status::success, "publish");
        expect(ctx.publish(name), Status::exists, "publish of a name taken (by us)");
        serve_echoes(ctx, tag_quit, big);
        expect(ctx.barrier(), Status::success, "barrier (rank 1 tried our name)");
        expect(ctx.unpublish(name), Status::success, "unpublish");
        expect(ctx.unpublish(name), Status::not_found, "unpublish again");
        expect(ctx.barrier(), Status::success, "barrier (unpublished)");
        say("rank 0 published, served, unpublished");
        return 0;
    }
    std::string address;
    const auto t = std::chrono::steady_clock::now();
    expect(ctx.lookup(name, address, milliseconds(20000)), Status::success, "lookup (waiting)");
    say("rank 1 found the name after %lld ms", ms_since(t));
    check(address.starts_with("transit:1;token="), "the address published: " + address);
    echo_and_quit(ctx, address);
    expect(ctx.unpublish(name), Status::access_denied, "unpublish of rank 0's name");
    expect(ctx.lookup(name + "-unknown", address), Status::not_found, "lookup of an unknown name");
    const auto w = std::chrono::steady_clock::now();
    expect(ctx.lookup(name + "-unknown", address, milliseconds(300)), Status::timeout,
           "lookup of an unknown name, waiting 300 ms");
    const long long waited = ms_since(w);
    check(waited >= 290 && waited < 3000, "the wait took " + std::to_string(waited) + " ms");
    for (const std::string& bad :
         std::vector<std::string>{"", "has space", "pmix.reserved", std::string(121, 'x')})
        expect(ctx.lookup(bad, address), Status::bad_param, "lookup of the bad name '" + bad + "'");
    expect(ctx.publish(""), Status::bad_param, "publish of an empty name");
    expect(ctx.barrier(), Status::success, "barrier (rank 1 tried our name)");
    expect(ctx.barrier(), Status::success, "barrier (unpublished)");
    expect(ctx.lookup(name, address), Status::not_found, "lookup of an unpublished name");
    say("rank 1 looked up, connected, echoed; an unknown name timed out after %lld ms of 300; "
        "bad names refused",
        waited);
    return 0;
}

// --- driver ----------------------------------------------------------------------

Child launch(const char* launcher, const std::string& me, std::vector<std::string> args) {
    std::vector<std::string> argv{launcher, "-n", "1", "--timeout", "60", me};
    argv.insert(argv.end(), args.begin(), args.end());
    return start_program(launcher, argv);
}

// What a singleton's lookup of `name` prints.
std::string singleton_lookup(const std::string& me, const std::string& name, const char* wait_ms) {
    Child c = start({me, "lookup", name, wait_ms});
    std::string line = read_line(c, 30, "the singleton's lookup");
    check(wait_exit(c) == 0, "the singleton's lookup");
    return line;
}

// Processes started by hand, no launcher: the name directory keeps the names.
void singletons(const char* launcher, const std::string& me) {
    const std::string name = "names-test-single-" + std::to_string(::getpid());
    Child srv = start({me, "server", name});
    check(read_line(srv, 30, "the singleton server's publication") == "published", "server");
    Child dup = start({me, "publish", name});
    check(wait_exit(dup) == 0, "a second singleton publishing the name");
    Child thief = start({me, "unpublish", name});
    check(wait_exit(thief) == 0, "a second singleton unpublishing the name");
    Child cl = start({me, "client", name});
    check(wait_exit(cl) == 0, "the singleton client");
    check(wait_exit(srv) == 0, "the singleton server");
    check(singleton_lookup(me, name, "0") == "not found", "the name of a server that ended");
    const auto t = std::chrono::steady_clock::now();
    check(singleton_lookup(me, name, "300") == "timeout", "a lookup waiting 300 ms");
    say("singletons: one published, one looked it up and was served, a second publisher got "
        "exists, a stranger's unpublish was refused; a wait ended in timeout (%lld ms with start)",
        ms_since(t));

    // A singleton killed outright: its name is free for the next publisher.
    const std::string killed = name + "-killed";
    Child victim = start({me, "server", killed});
    check(read_line(victim, 30, "the victim's publication") == "published", "victim");
    ::kill(victim.pid, SIGKILL);
    wait_exit(victim);
    Child taker = start({me, "take", killed});
    check(wait_exit(taker) == 0, "taking over a killed singleton's name");
    say("a killed singleton's name: taken over");

    // transit_run's ranks and singletons share the directory.
    const std::string shared = name + "-job";
    Child job_srv = launch(launcher, me, {"server", shared});
    check(read_line(job_srv, 30, "the job server's publication") == "published", "job server");
    Child single_cl = start({me, "client", shared});
    check(wait_exit(single_cl) == 0, "the singleton client of a transit_run server");
    check(wait_exit(job_srv) == 0, "the transit_run server");
    say("a singleton found a transit_run rank's name and was served");

    // A directory of the user's choosing (runtime_names_dir): transit_run
    // keeps its ranks' names there too, told by the environment or by --mca.
    char chosen[] = "/tmp/names-test-chosen-XXXXXX";
    check(::mkdtemp(chosen) != nullptr, "mkdtemp");
    const std::string by_env = name + "-env", by_mca = name + "-mca";
    ::setenv("TRANSIT_MCA_runtime_names_dir", chosen, 1);
    Child env_srv = launch(launcher, me, {"server", by_env});
    check(read_line(env_srv, 30, "the job server's publication") == "published", "job server");
    Child env_cl = start({me, "client", by_env});
    check(wait_exit(env_cl) == 0, "a singleton looking in the chosen directory (environment)");
    check(wait_exit(env_srv) == 0, "the transit_run server (environment)");
    ::unsetenv("TRANSIT_MCA_runtime_names_dir");
    Child mca_srv = start_program(launcher, {launcher, "-n", "1", "--timeout", "60", "--mca",
                                             "runtime_names_dir", chosen, me, "server", by_mca});
    check(read_line(mca_srv, 30, "the job server's publication") == "published", "job server");
    ::setenv("TRANSIT_MCA_runtime_names_dir", chosen, 1);
    Child mca_cl = start({me, "client", by_mca});
    ::unsetenv("TRANSIT_MCA_runtime_names_dir");
    check(wait_exit(mca_cl) == 0, "a singleton looking in the chosen directory (--mca)");
    check(wait_exit(mca_srv) == 0, "the transit_run server (--mca)");
    std::filesystem::remove_all(chosen);
    say("transit_run kept its ranks' names in the chosen runtime_names_dir");

    // A directory that others could write to is refused.
    const std::string open_dir = "/tmp/names-test-open-" + std::to_string(::getpid());
    check(::mkdir(open_dir.c_str(), 0777) == 0 && ::chmod(open_dir.c_str(), 0777) == 0,
          "mkdir " + open_dir);
    ::setenv("TRANSIT_MCA_runtime_names_dir", open_dir.c_str(), 1);
    const std::string refused = singleton_lookup(me, name, "0");
    ::unsetenv("TRANSIT_MCA_runtime_names_dir");
    ::rmdir(open_dir.c_str());
    check(refused == "error", "a lookup in a directory open to all: " + refused);
    say("a name directory open to others: refused");
}

int driver(const char* launcher, const std::string& me) {
    singletons(launcher, me);

    Child j = start_program(launcher, {launcher, "-n", "2", "--timeout", "60", me, "job"});
    for (int i = 0; i < 3; ++i) say("  %s", read_line(j, 60, "the job's report").c_str());
    check(wait_exit(j) == 0, "the 2-rank job failed");
    say("one job: rank 0 published, rank 1 looked it up and was served");

    // Separate transit_run invocations: the name is seen by the others.
    const std::string name = "names-test-" + std::to_string(::getpid());
    Child srv = launch(launcher, me, {"server", name});
    check(read_line(srv, 30, "the server's publication") == "published", "server");
    Child dup = launch(launcher, me, {"publish", name});
    check(wait_exit(dup) == 0, "publishing a name another job holds");
    Child cl = launch(launcher, me, {"client", name});
    check(wait_exit(cl) == 0, "the client job failed");
    check(wait_exit(srv) == 0, "the server job failed");
    Child gone = launch(launcher, me, {"lookup", name, "0"});
    check(read_line(gone, 30, "the lookup") == "not found", "the name of a job that ended");
    check(wait_exit(gone) == 0, "the lookup job");
    say("two transit_run jobs: one published, the other looked it up; gone with its job");

    // A launcher killed outright leaves its file: its names are gone all the same.
    const std::string killed = name + "-killed";
    Child victim = launch(launcher, me, {"server", killed});
    check(read_line(victim, 30, "the victim's publication") == "published", "victim");
    ::kill(victim.pid, SIGKILL);
    wait_exit(victim);
    Child after = launch(launcher, me, {"lookup", killed, "0"});
    check(read_line(after, 30, "the lookup") == "not found", "the name of a killed launcher");
    check(wait_exit(after) == 0, "the lookup job");
    say("a killed launcher's names: gone");
    say("PASS");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string role = argc >= 2 ? argv[1] : "";
    if (role == "job") return job();
    if (role == "server" && argc >= 3) {
        auto ctx = transit::init();
        expect(ctx.publish(argv[2]), Status::success, "publish");
        say("published");
        serve_echoes(ctx, tag_quit, big);
        return 0;
    }
    if (role == "client" && argc >= 3) {
        auto ctx = transit::init();
        std::string address;
        expect(ctx.lookup(argv[2], address, milliseconds(10000)), Status::success, "lookup");
        echo_and_quit(ctx, address);
        return 0;
    }
    if (role == "publish" && argc >= 3) {
        auto ctx = transit::init();
        expect(ctx.publish(argv[2]), Status::exists, "publish of another job's name");
        return 0;
    }
    if (role == "take" && argc >= 3) {
        auto ctx = transit::init();
        expect(ctx.publish(argv[2]), Status::success, "publish of a dead process's name");
        return 0;
    }
    if (role == "unpublish" && argc >= 3) {
        auto ctx = transit::init();
        expect(ctx.unpublish(argv[2]), Status::access_denied, "unpublish of another's name");
        return 0;
    }
    if (role == "lookup" && argc >= 4) {
        auto ctx = transit::init();
        std::string address;
        const Status s = ctx.lookup(argv[2], address, milliseconds(std::atoi(argv[3])));
        say("%s", ok(s) ? address.c_str() : status_text(s).c_str());
        return 0;
    }
    check(argc >= 2, "usage: test_dynamic_names TRANSIT_RUN");
    ::signal(SIGPIPE, SIG_IGN);
    return driver(argv[1], argv[0]);
}
