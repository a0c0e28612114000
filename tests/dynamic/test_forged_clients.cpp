// Clients outside the job hold the server's access token, not a job secret:
// one that forges the pml's names of the server's requests, counters and
// one-sided operations must not end, write or count anything of the server's.
// Separate processes over tcp: this program is the driver and (with a role
// argument) the server and its two clients.
//   server             victim A's rendezvous send waits for A's receive;
//                      tells B its handle (as if B had learned it); checks
//                      that B's forged frames were dropped with a log and
//                      that A's message still arrives whole
//   client ADDRESS a   the victim: receives its message when told
//   client ADDRESS b   the forger: sends raw pml frames over its tcp
//                      connection, as a hostile Transit client would
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bml/r2.hpp"
#include "pml/engine.hpp"
#include "pml/headers.hpp"
#include "pml/pools.hpp"
#include "pml/request.hpp"
#include "tests/dynamic/processes.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using transit::Rank;
using transit::RequestStatus;
using transit::Status;
using transit::test::StderrCapture;
namespace wire = transit::pml::wire;

constexpr std::uint32_t tag_hello = 1;
constexpr std::uint32_t tag_data = 2;
constexpr std::uint32_t tag_names = 3;
constexpr std::uint32_t tag_done = 4;
constexpr std::uint32_t tag_go = 5;
constexpr std::size_t big = 1u << 20;  // a rendezvous over tcp

std::uint64_t handle_of(transit::Request* r) {
    return transit::pml::NamedPool<transit::pml::Req>::handle(*static_cast<transit::pml::Req*>(r));
}

// What the server tells the forger: the victim's live request, a request of
// the server's that ended, and addresses of the server's memory.
struct Names {
    std::uint64_t victim;
    std::uint64_t stale;
    std::uint64_t buffer;
    std::uint64_t counter;
};

// --- server ----------------------------------------------------------------------

int server() {
    auto ctx = transit::init();
    std::printf("%s\n", ctx.listen().c_str());
    std::fflush(stdout);

    Rank a = transit::any_rank, b = transit::any_rank;
    std::uint64_t stale = 0;
    for (int i = 0; i < 2; ++i) {
        char who = 0;
        transit::Request* r = nullptr;
        check(transit::ok(ctx.irecv(transit::any_rank, tag_hello, &who, 1, r)), "hello irecv");
        stale = handle_of(r);  // ends below: its handle goes stale
        RequestStatus st;
        check(ctx.wait(r, &st) == Status::success, "hello");
        (who == 'a' ? a : b) = st.source;
    }
    check(a != transit::any_rank && b != transit::any_rank, "both clients said hello");

    const auto out = pattern(big, 1);
    transit::Request* victim = nullptr;
    check(transit::ok(ctx.isend(a, tag_data, out.data(), out.size(), victim)), "victim isend");
    check(victim && !victim->done(), "the victim send waits for its receiver");

    std::vector<std::byte> memory(64, std::byte{0x11});
    transit::Counter counter;
    const Names names{handle_of(victim), stale, reinterpret_cast<std::uint64_t>(memory.data()),
                      reinterpret_cast<std::uint64_t>(&counter)};
    check(ctx.send(b, tag_names, &names, sizeof names) == Status::success, "names send");

    std::string log;
    {
        StderrCapture capture;  // B's frames arrive (one connection, in order) before its done
        char done = 0;
        check(ctx.recv(b, tag_done, &done, 1) == Status::success, "done from the forger");
        log = capture.text();
    }
    const std::string from = "from rank " + std::to_string(b) + " was dropped: ";
    for (const std::string& line :
         {"kind fin " + from + "it names a request with another peer",
          "kind ack " + from + "it names a request with another peer",
          "kind fin " + from + "it names no live request",
          "kind osc_get_reply " + from + "it names no one-sided operation",
          "kind am_done " + from + "it names no completion that peer owes",
          "kind am " + from + "it names no counter of ours"})
        check(log.find(line) != std::string::npos, "not logged: " + line);
    check(!victim->done(), "the forger ended the victim's request");
    check(
        std::all_of(memory.begin(), memory.end(), [](std::byte x) { return x == std::byte{0x11}; }),
        "the forger wrote into the server's memory");
    check(counter.value() == 0 && counter.lost() == 0, "the forger counted the server's counter");

    char go = 1;
    check(ctx.send(a, tag_go, &go, 1) == Status::success, "go");
    check(ctx.wait(victim) == Status::success, "the victim's send");
    char ok = 0;
    check(ctx.recv(a, tag_done, &ok, 1) == Status::success && ok == 1, "the victim's data");
    std::printf("forged frames dropped, the victim served\n");
    std::fflush(stdout);
    return 0;
}

// --- clients ---------------------------------------------------------------------

// A pml message as a Transit pml would send it, over our tcp connection.
void send_raw(transit::Context& ctx, Rank server, wire::Kind k, const void* hdr, std::size_t n,
              std::size_t data_len = 0) {
    std::vector<std::byte> bytes(n + data_len, std::byte{0x5a});
    std::memcpy(bytes.data(), hdr, n);
    const transit::bml::Endpoint* ep = ctx.engine().peer_endpoint(server);
    check(ep && !ep->eager.empty(), "an endpoint to the server");
    const transit::bml::BtlRef& b = ep->eager[0];
    for (;;) {
        transit::btl::Convertor none(nullptr, 0);
        const Status s = b.module->sendi(b.endpoint, &none, bytes.data(), bytes.size(), 0,
                                         transit::btl::no_order, 0, wire::tag(k), nullptr);
        if (s == Status::completed || s == Status::success) return;
        check(s == Status::out_of_resource, "raw send: " + std::string(to_string(s)));
        ctx.progress();
    }
}

void forge(transit::Context& ctx, Rank server, const Names& n) {
    const wire::FinHdr fin{n.victim};
    send_raw(ctx, server, wire::fin, &fin, sizeof fin);
    const wire::AckHdr ack{n.victim, 1};
    send_raw(ctx, server, wire::ack, &ack, sizeof ack);
    const wire::FinHdr stale{n.stale};
    send_raw(ctx, server, wire::fin, &stale, sizeof stale);
    const wire::OscReplyHdr reply{0, 0, n.buffer, 64, 0};
    send_raw(ctx, server, wire::osc_get_reply, &reply, sizeof reply, 64);
    const wire::AmDoneHdr am_done{n.counter, 0, 0};
    send_raw(ctx, server, wire::am_done, &am_done, sizeof am_done);
    const wire::AmHdr am{0, 0, 0, 0, n.counter, 0};
    send_raw(ctx, server, wire::am, &am, sizeof am);
}

int client(const std::string& address, const std::string& role) {
    auto ctx = transit::init();
    Rank server = transit::any_rank;
    check(ctx.connect(address, server) == Status::success, "connect");
    const char who = role[0];
    check(ctx.send(server, tag_hello, &who, 1) == Status::success, "hello");
    if (who == 'b') {
        Names names{};
        check(ctx.recv(server, tag_names, &names, sizeof names) == Status::success, "names");
        forge(ctx, server, names);
        const char done = 1;
        check(ctx.send(server, tag_done, &done, 1) == Status::success, "done");
    } else {
        char go = 0;
        check(ctx.recv(server, tag_go, &go, 1) == Status::success, "go");
        std::vector<std::byte> in(big);
        RequestStatus st;
        check(ctx.recv(server, tag_data, in.data(), in.size(), &st) == Status::success, "data");
        const auto want = pattern(big, 1);
        const char ok = st.length == big && std::equal(in.begin(), in.end(), want.begin()) ? 1 : 0;
        check(ctx.send(server, tag_done, &ok, 1) == Status::success, "done");
    }
    check(ctx.disconnect(server) == Status::success, "disconnect");
    return 0;
}

// --- driver ----------------------------------------------------------------------

int driver(const char* self) {
    const std::string me = self;
    Child srv = start({me, "server"});
    const std::string address = read_line(srv, 20, "the server's address");
    Child a = start({me, "client", address, "a"});
    Child b = start({me, "client", address, "b"});
    check(wait_exit(b) == 0, "the forger failed");
    check(wait_exit(a) == 0, "the victim failed");
    check(read_line(srv, 20, "the server's verdict") == "forged frames dropped, the victim served",
          "server");
    check(wait_exit(srv) == 0, "the server failed");
    std::printf("PASS\n");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "server") return server();
    if (argc >= 4 && std::string(argv[1]) == "client") return client(argv[2], argv[3]);
    return driver(argv[0]);
}
