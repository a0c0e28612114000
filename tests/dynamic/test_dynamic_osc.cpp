// One-sided operations and active messages with peers outside the job: two
// clients, at once, put and get 0 B to 4 MiB into a region of the server
// (its key sent in a tagged message), apply atomics to it, send active
// messages of 0 B to 4 MiB with counters at both ends, and tagged messages
// of mixed sizes whose order the server checks.  Separate processes: this
// program is the driver and, with a role argument, the server and clients.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "processes.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using transit::AtomicOp;
using transit::AtomicWidth;
using transit::Rank;
using transit::RequestStatus;
using transit::Status;

constexpr std::uint32_t tag_hello = 1;  // client: give me a region; server: its key
constexpr std::uint32_t tag_order = 2;  // mixed sizes, a sequence number first
constexpr std::uint32_t tag_check = 3;  // client: what the region should hold; server: verdict
constexpr std::uint32_t tag_quit = 9;
constexpr std::uint32_t am_id = 3;
constexpr std::size_t big = 4u << 20;
constexpr std::size_t region_size = big + 64;  // data, then the atomics' words
constexpr std::size_t atomics_at = big;

struct Hello {
    transit::CounterRef am_counter = 0;
    std::uint64_t key_length = 0;
};

struct AmHeader {
    std::uint32_t seed = 0;
    std::uint32_t length = 0;
};

struct Check {
    std::uint32_t last_seed = 0;  // of the last 4 MiB put
    std::uint32_t ams = 0;        // active messages sent
    std::uint32_t ordered = 0;    // tagged messages sent on tag_order
    std::uint32_t pad = 0;
    std::uint64_t sum64 = 0;    // at atomics_at
    std::uint64_t swapped = 0;  // at atomics_at + 8
    std::uint32_t sum32 = 0;    // at atomics_at + 16
    std::uint32_t pad2 = 0;
};

// --- the server ------------------------------------------------------------------

struct Client {
    void* base = nullptr;
    transit::MemoryRegion* region = nullptr;
    std::uint32_t ams = 0;  // active messages whose data arrived whole
    std::uint32_t next_seq = 0;
    bool bad = false;
};

struct Server {
    std::map<Rank, Client> clients;
    transit::Counter am_counter;
    // Each active message's landing, until its completion handler checks it.
    std::map<std::uint64_t, std::pair<AmHeader, std::vector<std::byte>>> landings;
    std::uint64_t next_landing = 1;
    std::uint64_t ams_checked = 0;  // active messages of the clients checked
};

transit::AmDestination on_am_header(transit::Context&, const transit::AmInfo& info, void* arg) {
    auto* s = static_cast<Server*>(arg);
    AmHeader h;
    if (info.header.size() != sizeof h) return {};
    std::memcpy(&h, info.header.data(), sizeof h);
    const std::uint64_t id = s->next_landing++;
    auto& l = s->landings[id];
    l.first = h;
    l.second.resize(info.data_length);
    return {l.second.data(), nullptr, reinterpret_cast<void*>(id)};
}

Server* the_server = nullptr;

void on_am_done(transit::Context&, Rank source, void*, std::size_t length, void* user) {
    auto it = the_server->landings.find(reinterpret_cast<std::uint64_t>(user));
    Client& c = the_server->clients[source];
    if (it == the_server->landings.end()) {
        c.bad = true;
        return;
    }
    const auto want = pattern(it->second.first.length, it->second.first.seed);
    if (length == want.size() && std::equal(want.begin(), want.end(), it->second.second.begin()))
        ++c.ams;
    else
        c.bad = true;
    the_server->landings.erase(it);
}

int server() {
    auto ctx = transit::init();
    Server s;
    the_server = &s;
    check(ctx.register_am_handler(am_id, on_am_header, on_am_done, &s) == Status::success,
          "am handler");
    say("%s", ctx.listen().c_str());
    std::vector<std::byte> buf(big);
    for (;;) {
        RequestStatus st;
        check(ctx.recv(transit::any_rank, transit::any_tag, buf.data(), buf.size(), &st) ==
                  Status::success,
              "server recv");
        Client& c = s.clients[st.source];
        if (st.tag == tag_hello) {
            c.base = ctx.mem_alloc(region_size);
            check(c.base != nullptr, "mem_alloc");
            std::memset(c.base, 0, region_size);
            check(ctx.register_memory(c.base, region_size, c.region) == Status::success,
                  "register_memory");
            const auto key = ctx.pack_key(c.region);
            Hello h{ctx.counter_ref(s.am_counter), key.size()};
            std::vector<std::byte> out(sizeof h + key.size());
            std::memcpy(out.data(), &h, sizeof h);
            std::copy(key.begin(), key.end(), out.begin() + sizeof h);
            check(ctx.send(st.source, tag_hello, out.data(), out.size()) == Status::success,
                  "hello reply");
        } else if (st.tag == tag_order) {
            std::uint32_t seq = ~0u;
            if (st.length >= sizeof seq) std::memcpy(&seq, buf.data(), sizeof seq);
            const auto want = pattern(st.length, seq);
            if (seq != c.next_seq++ ||
                !std::equal(want.begin() + sizeof seq, want.end(), buf.begin() + sizeof seq))
                c.bad = true;
        } else if (st.tag == tag_check) {
            Check k;
            std::memcpy(&k, buf.data(), sizeof k);
            // Active messages are not ordered with tagged ones: wait for them.
            const auto t = std::chrono::steady_clock::now();
            while (c.ams < k.ams && !c.bad && ms_since(t) < 20000) ctx.progress();
            const auto* bytes = static_cast<const std::byte*>(c.base);
            const auto want = pattern(big, k.last_seed);
            std::uint64_t sum64 = 0, swapped = 0;
            std::uint32_t sum32 = 0;
            std::memcpy(&sum64, bytes + atomics_at, 8);
            std::memcpy(&swapped, bytes + atomics_at + 8, 8);
            std::memcpy(&sum32, bytes + atomics_at + 16, 4);
            std::string verdict = "ok";
            if (!std::equal(want.begin(), want.end(), bytes)) verdict = "region differs";
            if (sum64 != k.sum64 || swapped != k.swapped || sum32 != k.sum32)
                verdict = "atomics: " + std::to_string(sum64) + " " + std::to_string(swapped) +
                          " " + std::to_string(sum32);
            if (c.ams != k.ams || c.bad)
                verdict = "active messages: " + std::to_string(c.ams) + " of " +
                          std::to_string(k.ams) + (c.bad ? " (one was wrong)" : "");
            if (c.next_seq != k.ordered)
                verdict = "ordered messages: " + std::to_string(c.next_seq) + " of " +
                          std::to_string(k.ordered) + (c.bad ? " (out of order)" : "");
            check(ctx.deregister_memory(c.region) == Status::success, "deregister");
            ctx.mem_free(c.base);
            s.clients.erase(st.source);
            check(ctx.send(st.source, tag_check, verdict.data(), verdict.size()) == Status::success,
                  "verdict");
            s.ams_checked += k.ams;
        } else if (st.tag == tag_quit) {
            // Every active message counted at the target too.
            check(ctx.counter_get(s.am_counter) == s.ams_checked,
                  "target counter: " + std::to_string(ctx.counter_get(s.am_counter)) + " of " +
                      std::to_string(s.ams_checked));
            check(ctx.send(st.source, tag_quit, buf.data(), 0) == Status::success, "quit reply");
            break;
        }
    }
    return 0;
}

// --- clients ---------------------------------------------------------------------

void expect(Status s, const std::string& what) {
    check(s == Status::success, what + ": " + std::string(transit::to_string(s)));
}

int client(const std::string& address, std::uint32_t seed) {
    auto ctx = transit::init();
    Rank server = transit::any_rank;
    expect(ctx.connect(address, server), "connect");
    check_transport(ctx, server);
    // The region's key, in a tagged message.
    std::vector<std::byte> hello(4096);
    transit::Request* r = nullptr;
    check(transit::ok(ctx.irecv(server, tag_hello, hello.data(), hello.size(), r)), "irecv");
    expect(ctx.send(server, tag_hello, hello.data(), 0), "hello");
    RequestStatus st;
    ctx.wait(r, &st);
    expect(st.status, "hello reply");
    Hello h;
    std::memcpy(&h, hello.data(), sizeof h);
    check(st.length == sizeof h + h.key_length, "hello length");
    transit::RemoteKey* key = nullptr;
    expect(ctx.unpack_key({hello.data() + sizeof h, h.key_length}, key), "unpack_key");

    // put then get back, 0 B to 4 MiB.
    Check k;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{8}, std::size_t{4096},
                          std::size_t{65536}, std::size_t{1} << 20, big}) {
        k.last_seed = seed + static_cast<std::uint32_t>(n);
        const auto out = pattern(n, k.last_seed);
        expect(ctx.put(server, out.data(), n, key, 0), "put " + std::to_string(n));
        expect(ctx.flush(server), "flush after put " + std::to_string(n));
        std::vector<std::byte> in(n);
        expect(ctx.get(server, in.data(), n, key, 0), "get " + std::to_string(n));
        expect(ctx.flush(server), "flush after get " + std::to_string(n));
        check(in == out, "get of " + std::to_string(n) + " B differs from the put");
    }
    // Atomics, on words of this client's own region.
    for (std::uint64_t i = 1; i <= 100; ++i) {
        expect(ctx.atomic(server, AtomicOp::add, AtomicWidth::bits64, key, atomics_at, i),
               "atomic add");
        k.sum64 += i;
    }
    std::uint64_t before = 0;
    expect(ctx.atomic(server, AtomicOp::add, AtomicWidth::bits64, key, atomics_at, 1, &before),
           "fetch add");
    expect(ctx.flush(server), "flush atomics");
    check(before == k.sum64, "fetch-add saw " + std::to_string(before));
    k.sum64 += 1;
    std::uint64_t old = 7;
    expect(ctx.cswap(server, AtomicWidth::bits64, key, atomics_at + 8, 0, 42, &old), "cswap");
    expect(ctx.flush(server), "flush cswap");
    check(old == 0, "cswap saw " + std::to_string(old));
    k.swapped = 42;
    for (std::uint32_t i = 0; i < 10; ++i) {
        expect(ctx.atomic(server, AtomicOp::add, AtomicWidth::bits32, key, atomics_at + 16, 3),
               "atomic add 32");
        k.sum32 += 3;
    }
    expect(ctx.flush(server), "flush atomics 32");

    // Active messages with counters at both ends, 0 B to 4 MiB.
    transit::Counter origin, done;
    for (std::size_t n : {std::size_t{0}, std::size_t{8}, std::size_t{4096}, std::size_t{65536},
                          std::size_t{1} << 20, big}) {
        const AmHeader ah{seed + 1000 + static_cast<std::uint32_t>(n),
                          static_cast<std::uint32_t>(n)};
        const auto data = pattern(n, ah.seed);
        const Status as = ctx.am_send(server, am_id, std::as_bytes(std::span(&ah, 1)), data.data(),
                                      n, {&origin, h.am_counter, &done});
        check(transit::ok(as),
              "am_send " + std::to_string(n) + ": " + std::string(transit::to_string(as)));
        ++k.ams;
        expect(ctx.counter_wait(origin, k.ams), "am origin counter");
        expect(ctx.counter_wait(done, k.ams), "am completion counter");
    }

    // Tagged messages of mixed sizes, all in flight at once: in order at the server.
    std::vector<std::vector<std::byte>> msgs;
    std::vector<transit::Request*> sends;
    const std::size_t sizes[] = {4, 100, 70000, std::size_t{1} << 20, 5, big, 4096};
    for (std::uint32_t i = 0; i < 21; ++i) {
        msgs.push_back(pattern(sizes[i % 7], i));
        std::memcpy(msgs.back().data(), &i, sizeof i);
        transit::Request* q = nullptr;
        check(transit::ok(ctx.isend(server, tag_order, msgs.back().data(), msgs.back().size(), q)),
              "order isend");
        sends.push_back(q);
        ++k.ordered;
    }
    expect(ctx.wait_all(sends), "order sends");

    std::string verdict(256, '\0');
    check(transit::ok(ctx.irecv(server, tag_check, verdict.data(), verdict.size(), r)), "irecv");
    expect(ctx.send(server, tag_check, &k, sizeof k), "check");
    ctx.wait(r, &st);
    verdict.resize(st.length);
    check(verdict == "ok", "the server found: " + verdict);
    ctx.release_key(key);
    expect(ctx.disconnect(server), "disconnect");
    say("ok");
    return 0;
}

int driver(const std::string& me) {
    Child srv = start({me, "server"});
    const std::string address = read_line(srv, 20, "the server's address");
    std::vector<Child> clients;
    for (int i = 0; i < 2; ++i)
        clients.push_back(start({me, "client", address, std::to_string(100 * (i + 1))}));
    for (Child& c : clients) {
        check(read_line(c, 120, "a client's result") == "ok", "a client");
        check(wait_exit(c) == 0, "a client failed");
    }
    Child quit = start({me, "quit", address});
    check(wait_exit(quit) == 0, "quit");
    check(wait_exit(srv) == 0, "the server failed");
    say("PASS");
    return 0;
}

int quit(const std::string& address) {
    auto ctx = transit::init();
    Rank server = transit::any_rank;
    expect(ctx.connect(address, server), "connect");
    quit_server(ctx, server, tag_quit);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "server") return server();
    if (argc >= 4 && std::string(argv[1]) == "client")
        return client(argv[2], static_cast<std::uint32_t>(std::atoi(argv[3])));
    if (argc >= 3 && std::string(argv[1]) == "quit") return quit(argv[2]);
    ::signal(SIGPIPE, SIG_IGN);
    return driver(argv[0]);
}
