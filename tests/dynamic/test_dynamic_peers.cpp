// Peers outside the job, as separate processes: this program is the driver,
// and (with a role argument) the server and the clients it starts.
//   server                 prints its address, echoes every message to its
//                          sender, prints "gone <peer> <status>" when a
//                          client departs or fails; ends on tag `quit`
//   client ADDRESS MODE    echo | hang | badtoken | dropped | quit
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "processes.hpp"
#include "transit/log.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;

using transit::Rank;
using transit::RequestStatus;
using transit::Status;

constexpr std::uint32_t tag_echo = 1;
constexpr std::uint32_t tag_order_a = 10;
constexpr std::uint32_t tag_order_b = 11;
constexpr std::uint32_t tag_watch = 5;  // never sent: ends only when the peer goes
constexpr std::uint32_t tag_drop_me = 7;
constexpr std::uint32_t tag_other_user = 12;  // from a client of another user: tcp carries it
constexpr std::uint32_t tag_quit = 9;
constexpr std::size_t max_message = 4u << 20;

// --- server ----------------------------------------------------------------------

// Active messages from clients land here; their completions go back to the
// sender (which waits on its completion counter).
std::byte am_landing[65536];
std::uint32_t am_from_dynamic = 0;

transit::AmDestination on_am(transit::Context& ctx, const transit::AmInfo& info, void*) {
    if (info.source >= ctx.size() && info.data_length <= sizeof am_landing) ++am_from_dynamic;
    return {info.data_length <= sizeof am_landing ? am_landing : nullptr, nullptr, nullptr};
}

int server() {
    auto ctx = transit::init();
    check(ctx.register_am_handler(3, on_am, nullptr, nullptr) == Status::success, "am handler");
    std::printf("%s\n", ctx.listen().c_str());
    std::fflush(stdout);
    std::vector<std::byte> buf(max_message);
    std::map<Rank, transit::Request*> watches;
    std::uint32_t watch_buf = 0;
    for (;;) {
        transit::Request* r = nullptr;
        Status s = ctx.irecv(transit::any_rank, transit::any_tag, buf.data(), buf.size(), r);
        check(transit::ok(s), "server irecv");
        RequestStatus st;
        bool done = false;
        while (!done) {
            ctx.test(r, done, &st);
            for (auto it = watches.begin(); it != watches.end();) {
                bool gone = false;
                RequestStatus ws;
                ctx.test(it->second, gone, &ws);
                if (!gone) {
                    ++it;
                    continue;
                }
                std::printf("gone %u %s\n", it->first, std::string(to_string(ws.status)).c_str());
                std::fflush(stdout);
                it = watches.erase(it);
            }
        }
        check(st.status == Status::success, "server receive: " + std::string(to_string(st.status)));
        check(st.source >= ctx.size(), "a client's message names a job rank");
        if (!watches.count(st.source)) {
            if (st.tag != tag_other_user) check_transport(ctx, st.source);
            transit::Request* w = nullptr;
            check(transit::ok(ctx.irecv(st.source, tag_watch, &watch_buf, sizeof watch_buf, w)),
                  "watch irecv");
            watches[st.source] = w;
        }
        if (st.tag == tag_drop_me) {
            check(ctx.disconnect(st.source) == Status::success, "server disconnect");
            continue;
        }
        check(ctx.send(st.source, st.tag, buf.data(), st.length) == Status::success,
              "server reply");
        if (st.tag == tag_quit) break;
    }
    check(am_from_dynamic == 8, "active messages from clients: " + std::to_string(am_from_dynamic));
    for (auto& [peer, w] : watches) {
        ctx.cancel(w);
        ctx.wait(w);
    }
    return 0;
}

// --- clients ---------------------------------------------------------------------

void echo_sizes(transit::Context& ctx, Rank server) {
    const std::size_t sizes[] = {0, 1, 100, 4096, 65536, 1u << 20, max_message};
    std::uint32_t seed = static_cast<std::uint32_t>(::getpid());
    for (std::size_t n : sizes) echo_once(ctx, server, tag_echo, n, seed++);
}

// Messages on two tags, interleaved: each tag's replies come back in order.
void echo_order(transit::Context& ctx, Rank server) {
    constexpr std::uint32_t per_tag = 40;
    std::vector<std::uint32_t> got(2 * per_tag);
    std::vector<transit::Request*> reqs;
    for (std::uint32_t i = 0; i < per_tag; ++i)
        for (std::uint32_t t = 0; t < 2; ++t) {
            transit::Request* r = nullptr;
            check(transit::ok(ctx.irecv(server, t ? tag_order_b : tag_order_a,
                                        &got[t * per_tag + i], sizeof(std::uint32_t), r)),
                  "order irecv");
            reqs.push_back(r);
        }
    for (std::uint32_t i = 0; i < per_tag; ++i)
        for (std::uint32_t t = 0; t < 2; ++t) {
            const std::uint32_t v = t * 1000 + i;
            check(ctx.send(server, t ? tag_order_b : tag_order_a, &v, sizeof v) == Status::success,
                  "order send");
        }
    check(ctx.wait_all(reqs) == Status::success, "order wait");
    for (std::uint32_t t = 0; t < 2; ++t)
        for (std::uint32_t i = 0; i < per_tag; ++i)
            check(got[t * per_tag + i] == t * 1000 + i,
                  "tag " + std::to_string(t) + " out of order");
}

// Whether the one transport selected serves clients of the same user only:
// vader, UCT's posix and libfabric's shm (the server's shared memory is not
// open to others).
bool same_user_only() {
    const char* btl = std::getenv("TRANSIT_MCA_btl");
    const char* tl = std::getenv("TRANSIT_MCA_btl_uct_transports");
    const char* provider = std::getenv("TRANSIT_MCA_btl_ofi_provider_include");
    if (btl == nullptr) return false;
    const std::string b = btl;
    return b == "self,vader" || (b == "self,uct" && tl != nullptr && std::string(tl) == "posix") ||
           (b == "self,ofi" && provider != nullptr && std::string(provider) == "shm");
}

// A client of another user (run by root only): over a transport that serves
// the same user only its connect fails with a clear error, and with tcp
// selected tcp carries it.
int other_user_client(const std::string& address) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) fail("cannot become nobody");
    auto ctx = transit::init();
    Rank server = transit::any_rank;
    const Status s = ctx.connect(address, server);
    if (same_user_only()) {
        check(s == Status::unreachable,
              "another user's connect over shared memory: " + std::string(to_string(s)));
        return 0;
    }
    check(s == Status::success, "another user's connect: " + std::string(to_string(s)));
    for (const std::string& t : ctx.transports(server).send)
        check(t.rfind("vader", 0) != 0, "another user's client carried by vader");
    std::uint32_t v = 7, back = 0;
    transit::Request* r = nullptr;
    check(transit::ok(ctx.irecv(server, tag_other_user, &back, sizeof back, r)), "irecv");
    check(ctx.send(server, tag_other_user, &v, sizeof v) == Status::success, "send");
    RequestStatus st;
    ctx.wait(r, &st);
    check(st.status == Status::success && back == 7, "another user's echo");
    check(ctx.disconnect(server) == Status::success, "disconnect");
    return 0;
}

int client(const std::string& address, const std::string& mode) {
    if (mode == "otheruser") return other_user_client(address);
    auto ctx = transit::init();
    Rank server = transit::any_rank;
    std::string addr = address;
    if (mode == "badtoken") {
        const std::size_t at = addr.find("token=") + 6;
        addr[at] = addr[at] == '0' ? '1' : '0';
    }
    check(ctx.connect(addr, server) == Status::success, "connect");
    check(server >= ctx.size(), "a server's id follows the job's ranks");
    // Text that is no address: refused with a clear error, no peer made.
    for (const char* bad :
         {"", "transit:1;token=zz", "http://server:80", "transit:1;token=00",
          "transit:1;node=00;btl.tcp.1=00", "transit:1;token=", "transit:2;x=1"}) {
        Rank again = 7;
        check(ctx.connect(bad, again) == Status::bad_param && again == transit::any_rank,
              std::string("address '") + bad + "' not refused");
    }
    check(ctx.disconnect(0) == Status::bad_param, "a job rank disconnected");
    if (mode == "echo") {
        check_transport(ctx, server);
        echo_sizes(ctx, server);
        echo_order(ctx, server);
        // Active messages to the server, eager and rendezvous sized.
        for (std::size_t n : {std::size_t{8}, std::size_t{60000}}) {
            auto data = pattern(n, 3);
            transit::Counter done;
            const std::uint32_t hdr = 42;
            check(transit::ok(ctx.am_send(server, 3, std::as_bytes(std::span(&hdr, 1)), data.data(),
                                          n, {nullptr, 0, &done})),
                  "am_send");
            check(ctx.counter_wait(done, 1) == Status::success, "am completion");
        }
        check(ctx.disconnect(server) == Status::success, "client disconnect");
        std::byte b{};
        check(ctx.send(server, tag_echo, &b, 1) != Status::success, "send after disconnect");
    } else if (mode == "hang") {
        std::uint32_t v = 1;
        check(ctx.send(server, tag_echo, &v, sizeof v) == Status::success, "hang send");
        check(ctx.recv(server, tag_echo, &v, sizeof v) == Status::success, "hang recv");
        std::printf("ready\n");
        std::fflush(stdout);
        for (;;) ::pause();
    } else if (mode == "badtoken") {
        // The server tells us why before it closes: our operations end
        // access_denied, and one error line says the token was refused.
        struct Lines {
            int refused = 0;  // error lines naming the refused token
            int other = 0;    // other error lines
        } lines;
        transit::log::set_sink(
            [](const transit::log::Line& line, void* arg) {
                auto& l = *static_cast<Lines*>(arg);
                if (line.severity == transit::log::Severity::error)
                    ++(line.text.find("the server refused the token") != std::string_view::npos
                           ? l.refused
                           : l.other);
                std::fprintf(stderr, "%.*s\n", static_cast<int>(line.text.size()),
                             line.text.data());
            },
            &lines);
        std::uint32_t v = 1;
        transit::Request* r = nullptr;
        check(transit::ok(ctx.irecv(server, tag_echo, &v, sizeof v, r)), "badtoken irecv");
        const Status sent = ctx.send(server, tag_echo, &v, sizeof v);  // may fail now or later
        check(sent == Status::success || sent == Status::access_denied,
              "refused client's send: " + std::string(to_string(sent)));
        RequestStatus st;
        ctx.wait(r, &st);
        check(st.status == Status::access_denied,
              "refused client: " + std::string(to_string(st.status)));
        check(ctx.send(server, tag_echo, &v, sizeof v) == Status::access_denied,
              "a send after the refusal");
        transit::log::set_sink(nullptr, nullptr);
        check(lines.refused == 1 && lines.other == 0,
              "the refusal logged " + std::to_string(lines.refused) +
                  " line(s) naming the token, " + std::to_string(lines.other) +
                  " other error line(s)");
    } else if (mode == "dropped") {
        std::uint32_t v = 0;
        transit::Request* r = nullptr;
        check(transit::ok(ctx.irecv(server, 3, &v, sizeof v, r)), "dropped irecv");
        check(ctx.send(server, tag_drop_me, &v, sizeof v) == Status::success, "drop_me send");
        RequestStatus st;
        ctx.wait(r, &st);
        check(st.status == Status::peer_departed,
              "server's disconnect seen as: " + std::string(to_string(st.status)));
    } else if (mode == "quit") {
        quit_server(ctx, server, tag_quit);
    } else {
        fail("unknown mode " + mode);
    }
    return 0;
}

// --- driver ----------------------------------------------------------------------

int driver(const char* self) {
    const std::string me = self;
    Child srv = start({me, "server"});
    const std::string address = read_line(srv, 20, "the server's address");
    check(address.rfind("transit:1;token=", 0) == 0 && address.find('\n') == std::string::npos,
          "address form: " + address);
    std::printf("address: %s\n", address.c_str());

    // Several clients at once, each its own process.
    std::vector<Child> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(start({me, "client", address, "echo"}));
    for (Child& c : clients) check(wait_exit(c) == 0, "an echo client failed");
    for (int i = 0; i < 3; ++i) {
        const std::string gone = read_line(srv, 10, "a departure");
        check(gone.find("peer departed") != std::string::npos, "departure seen as: " + gone);
    }
    std::printf("3 echo clients served, their disconnects seen\n");

    Child bad = start({me, "client", address, "badtoken"});
    check(wait_exit(bad) == 0, "the client with a wrong token was not refused");
    std::printf("wrong token refused\n");

    Child dropped = start({me, "client", address, "dropped"});
    check(wait_exit(dropped) == 0, "the server's disconnect was not seen by its client");
    const std::string gone = read_line(srv, 10, "the dropped client's end");
    check(gone.find("peer departed") != std::string::npos, "dropped client seen as: " + gone);
    std::printf("server-side disconnect seen by the client\n");

    if (::geteuid() == 0) {
        Child other = start({me, "client", address, "otheruser"});
        check(wait_exit(other) == 0, "the client of another user");
        if (!same_user_only()) {
            const std::string left = read_line(srv, 10, "the other user's departure");
            check(left.find("peer departed") != std::string::npos, "other user seen as: " + left);
        }
        std::printf("a client of another user: not over shared memory\n");
    }

    Child hang = start({me, "client", address, "hang"});
    check(read_line(hang, 20, "the hanging client") == "ready", "hanging client");
    const auto killed_at = std::chrono::steady_clock::now();
    ::kill(hang.pid, SIGKILL);
    wait_exit(hang);
    const std::string failed = read_line(srv, 10, "the killed client's failure");
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - killed_at)
                        .count();
    check(failed.find("peer failed") != std::string::npos, "killed client seen as: " + failed);
    std::printf("killed client: peer_failed at the server after %lld ms\n",
                static_cast<long long>(ms));

    Child after = start({me, "client", address, "echo"});
    check(wait_exit(after) == 0, "a client after the kill was not served");
    read_line(srv, 10, "the last client's departure");
    Child quit = start({me, "client", address, "quit"});
    check(wait_exit(quit) == 0, "quit client");
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
