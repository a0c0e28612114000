// No per-client leak: one server, 1,000 connect/exchange/disconnect cycles
// from a client process, and the server's memory and its per-peer records
// (pml peers, runtime entries, bml and transport endpoints) before and after.
// Separate processes: this program is the driver and, with a role argument,
// the server and the client it starts.
//   server                  echoes; on tag_measure, once every earlier
//                           client is gone, answers with a Measure
//   client ADDRESS CYCLES   warms up, measures, cycles, measures, prints both
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pml/engine.hpp"
#include "processes.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using transit::PeerEvent;
using transit::PeerEventKind;
using transit::Rank;
using transit::RequestStatus;
using transit::Status;

constexpr std::uint32_t tag_echo = 1;
constexpr std::uint32_t tag_measure = 2;
constexpr std::uint32_t tag_quit = 9;
constexpr int warm_up = 50;

// What the server holds, with the measuring client the one peer connected.
struct Measure {
    std::uint64_t heap = 0;  // bytes allocated (mallinfo2), 0 when not known
    std::uint64_t rss = 0;   // resident bytes (/proc/self/statm)
    std::uint64_t fds = 0;   // open descriptors
    std::uint64_t pml = 0, runtime = 0, bml = 0, transports = 0;
    std::uint64_t boxes = 0;  // fast paths held for clients (vader's spare fast boxes)
    std::uint64_t joined = 0, left = 0;
};

std::uint64_t resident_bytes() {
    unsigned long size = 0, resident = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    std::fclose(f);
    return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::uint64_t open_fds() {
    std::uint64_t n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d)) ++n;
        ::closedir(d);
    }
    return n;
}

void settle_descriptors(transit::Context& ctx) {
    const auto start = std::chrono::steady_clock::now();
    auto still = start;
    for (int n = open_fds(); ms_since(start) < 2000 && ms_since(still) < 200;) {
        ctx.progress();
        if (const int now = open_fds(); now != n) {
            n = now;
            still = std::chrono::steady_clock::now();
        }
    }
}

struct Counts {
    std::uint64_t joined = 0, left = 0;
};

void count_event(transit::Context&, const PeerEvent& e, void* c) {
    auto* counts = static_cast<Counts*>(c);
    if (e.kind == PeerEventKind::joined)
        ++counts->joined;
    else
        ++counts->left;
}

int server() {
    auto ctx = transit::init();
    Counts counts;
    ctx.on_peer_event(count_event, &counts);
    say("%s", ctx.listen().c_str());
    std::vector<std::byte> buf(1u << 20);
    for (;;) {
        RequestStatus st;
        check(ctx.recv(transit::any_rank, transit::any_tag, buf.data(), buf.size(), &st) ==
                  Status::success,
              "server recv");
        if (st.tag == tag_measure) {
            check_transport(ctx, st.source);
            // Every earlier client gone (its event seen, so its records released).
            while (counts.joined != counts.left + 1) ctx.progress();
            // UCT's tcp closes a connection some polls after its endpoint
            // goes: progress until the descriptors have held still a while.
            settle_descriptors(ctx);
            Measure m;
            m.heap = mallinfo2().uordblks;
            m.rss = resident_bytes();
            m.fds = open_fds();
            const auto r = ctx.engine().dynamic_records();
            m.pml = r.pml;
            m.runtime = r.runtime;
            m.bml = r.bml;
            m.transports = r.transports;
            m.boxes = r.fast_paths;
            m.joined = counts.joined;
            m.left = counts.left;
            check(ctx.send(st.source, tag_measure, &m, sizeof m) == Status::success, "measure");
            continue;
        }
        check(ctx.send(st.source, st.tag, buf.data(), st.length) == Status::success, "reply");
        if (st.tag == tag_quit) return 0;
    }
}

// One client's life: connect, one exchange (1 MiB, a rendezvous, every
// 100th time), disconnect.
void cycle(transit::Context& ctx, const std::string& address, int i) {
    Rank server = transit::any_rank;
    check(ctx.connect(address, server) == Status::success, "connect");
    const std::size_t n = i % 100 == 0 ? (1u << 20) : 64;
    echo_once(ctx, server, tag_echo, n, static_cast<std::uint32_t>(i));
    check(ctx.disconnect(server) == Status::success, "disconnect");
}

Measure measure(transit::Context& ctx, const std::string& address) {
    Rank server = transit::any_rank;
    check(ctx.connect(address, server) == Status::success, "connect");
    check_transport(ctx, server);
    Measure m;
    transit::Request* r = nullptr;
    check(transit::ok(ctx.irecv(server, tag_measure, &m, sizeof m, r)), "irecv");
    check(ctx.send(server, tag_measure, &m, sizeof m) == Status::success, "send");
    ctx.wait(r);
    check(ctx.disconnect(server) == Status::success, "disconnect");
    return m;
}

void print(const char* when, const Measure& m) {
    say("%s heap=%llu rss=%llu fds=%llu pml=%llu runtime=%llu bml=%llu btl=%llu boxes=%llu "
        "joined=%llu left=%llu",
        when, static_cast<unsigned long long>(m.heap), static_cast<unsigned long long>(m.rss),
        static_cast<unsigned long long>(m.fds), static_cast<unsigned long long>(m.pml),
        static_cast<unsigned long long>(m.runtime), static_cast<unsigned long long>(m.bml),
        static_cast<unsigned long long>(m.transports), static_cast<unsigned long long>(m.boxes),
        static_cast<unsigned long long>(m.joined), static_cast<unsigned long long>(m.left));
}

int client(const std::string& address, int cycles) {
    auto ctx = transit::init();
    for (int i = 0; i < warm_up; ++i) cycle(ctx, address, i + 1);
    const Measure before = measure(ctx, address);
    const auto t = std::chrono::steady_clock::now();
    for (int i = 0; i < cycles; ++i) cycle(ctx, address, i);
    const long long ms = ms_since(t);
    const Measure after = measure(ctx, address);
    print("before", before);
    print("after", after);
    say("cycles %d in %lld ms", cycles, ms);
    // The client keeps nothing of the servers it left either; the boxes it
    // gave them are free once the server let go of them (its release comes
    // through progress).
    auto mine = ctx.engine().dynamic_records();
    for (const auto t0 = std::chrono::steady_clock::now();
         mine.fast_paths != 0 && ms_since(t0) < 2000; mine = ctx.engine().dynamic_records())
        ctx.progress();
    say("client pml=%zu runtime=%zu bml=%zu btl=%zu boxes=%zu", mine.pml, mine.runtime, mine.bml,
        mine.transports, mine.fast_paths);
    Rank server = transit::any_rank;
    check(ctx.connect(address, server) == Status::success, "connect");
    quit_server(ctx, server, tag_quit);
    return 0;
}

// "key=value" out of a line.
long long field(const std::string& line, const std::string& key) {
    const std::size_t at = line.find(" " + key + "=");
    check(at != std::string::npos, "no " + key + " in: " + line);
    return std::stoll(line.substr(at + key.size() + 2));
}

int driver(const std::string& me, int cycles) {
    Child srv = start({me, "server"});
    const std::string address = read_line(srv, 20, "the server's address");
    Child cl = start({me, "client", address, std::to_string(cycles)});
    const std::string before = read_line(cl, 120, "the first measure");
    const std::string after = read_line(cl, 120, "the second measure");
    const std::string took = read_line(cl, 10, "the time");
    const std::string mine = read_line(cl, 10, "the client's records");
    check(wait_exit(cl) == 0, "the client failed");
    check(wait_exit(srv) == 0, "the server failed");
    say("%s\n%s\n%s\n%s", before.c_str(), after.c_str(), took.c_str(), mine.c_str());
    // The measuring client is the one peer then: one record per layer at
    // most, the same number both times.
    for (const char* k : {"pml", "runtime", "bml", "btl", "boxes"}) {
        check(field(after, k) == field(before, k) && field(after, k) <= 1,
              std::string(k) + " records: " + before + " / " + after);
        check(field(mine, k) == 0, std::string("client's ") + k + " records: " + mine);
    }
    // Over vader the measuring client holds a spare fast box of the server's,
    // and every earlier client's box was free again for the next.
    if (const char* btl = std::getenv("TRANSIT_TEST_PEER_BTL"); btl && std::string(btl) == "vader")
        check(field(before, "boxes") == 1, "fast boxes held for one client: " + before);
    check(field(after, "joined") - field(before, "joined") == cycles + 1 &&
              field(after, "left") - field(before, "left") == cycles + 1,
          "every client's join and leave reported: " + before + " / " + after);
    check(field(after, "fds") == field(before, "fds"), "descriptors: " + before + " / " + after);
    // A bit per id stays (whether it departed); the heap may also move by
    // what allocators keep.  Per client: under 64 bytes.
    const long long heap = field(after, "heap") - field(before, "heap");
    const long long rss = field(after, "rss") - field(before, "rss");
    say("server growth over %d clients: heap %lld B (%lld B per client), rss %lld B", cycles + 1,
        heap, heap / (cycles + 1), rss);
    // No heap count (mallinfo2 is 0): a sanitizer's allocator, whose
    // quarantine holds freed memory, so the resident size says nothing either.
    if (field(before, "heap") > 0) {
        check(heap < 64LL * (cycles + 1), "heap grew by " + std::to_string(heap) + " B");
        // The resident size also keeps what the allocator and libfabric's
        // pools reached at their high-water mark once (over ofi's tcp about
        // 1.1 MiB, the same after 300 clients as after 2,000): allowed once,
        // beside 1 KiB per client.  The heap check above is the leak check.
        constexpr long long high_water = 2LL << 20;
        check(rss < high_water + 1024LL * (cycles + 1),
              "rss grew by " + std::to_string(rss) + " B");
    }
    say("PASS");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "server") return server();
    if (argc >= 4 && std::string(argv[1]) == "client") return client(argv[2], std::atoi(argv[3]));
    ::signal(SIGPIPE, SIG_IGN);
    return driver(argv[0], argc >= 2 ? std::atoi(argv[1]) : 1000);
}
