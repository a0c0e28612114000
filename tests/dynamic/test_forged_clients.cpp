// Clients outside the job hold the server's access token, not a job secret:
// one that forges the pml's names of the server's requests, counters and
// one-sided operations, sends job-control frames or guesses memory keys must
// not end, write, read or count anything of the server's.  Every frame kind
// the pml has is sent by the forger.  Separate processes over tcp and over
// vader: this program is the driver and (with a role argument) the server and
// its two clients.
//   server             victim A's rendezvous send waits for A's receive;
//                      tells B its handle (as if B had learned it) and the
//                      keys of two regions (one for everyone, one scoped to
//                      A), never that of a third; checks that B's forged
//                      frames were dropped or refused with a log, that no
//                      region changed but where B's key allowed, that no
//                      barrier signal counted, and that A's message still
//                      arrives whole
//   client ADDRESS a   the victim: receives its message when told
//   client ADDRESS b   the forger: sends raw pml frames over its connection
//                      and one-sided operations through doctored keys, as a
//                      hostile Transit client would
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "bml/r2.hpp"
#include "pml/engine.hpp"
#include "pml/headers.hpp"
#include "pml/pools.hpp"
#include "pml/remote_key.hpp"
#include "pml/request.hpp"
#include "tests/dynamic/processes.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/name_hash.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit_test;
using transit::Disconnect;
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
constexpr std::uint32_t tag_keys = 6;
constexpr std::uint32_t tag_forged_rndv = 7;
constexpr std::size_t page = 4096;
constexpr std::size_t key_guesses = 200;  // more than the drop log prints
constexpr std::size_t big = 1u << 20;     // a rendezvous over tcp

std::uint64_t handle_of(transit::Request* r) {
    return transit::pml::NamedPool<transit::pml::Req>::handle(*static_cast<transit::pml::Req*>(r));
}

// What the server tells the forger: the victim's live request, a request of
// the server's that ended, and addresses of the server's memory (the hidden
// region's as if found by probing near its own).
struct Names {
    std::uint64_t victim;
    std::uint64_t stale;
    std::uint64_t buffer;
    std::uint64_t counter;
    std::uint64_t hidden;
};

std::string peer_btl() {
    const char* btl = std::getenv("TRANSIT_TEST_PEER_BTL");
    return btl ? btl : "";
}

bool all_of(const std::vector<std::byte>& v, std::size_t from, std::byte x) {
    return std::all_of(v.begin() + static_cast<std::ptrdiff_t>(from), v.end(),
                       [x](std::byte b) { return b == x; });
}

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
    // open: B holds its key; hidden: nobody does; scoped: for A alone.
    std::vector<std::byte> open(page, std::byte{0}), hidden(page, std::byte{0x22}),
        scoped(page, std::byte{0x33});
    transit::MemoryRegion *open_r = nullptr, *hidden_r = nullptr, *scoped_r = nullptr;
    check(ctx.register_memory(open.data(), page, open_r) == Status::success, "register open");
    check(ctx.register_memory(hidden.data(), page, hidden_r) == Status::success, "register hidden");
    const Rank only_a[] = {a};
    check(ctx.register_memory(scoped.data(), page, scoped_r, transit::RegionScope::only(only_a)) ==
              Status::success,
          "register scoped");
    const Names names{handle_of(victim), stale, reinterpret_cast<std::uint64_t>(memory.data()),
                      reinterpret_cast<std::uint64_t>(&counter),
                      reinterpret_cast<std::uint64_t>(hidden.data())};
    check(ctx.send(b, tag_names, &names, sizeof names) == Status::success, "names send");
    const auto open_key = ctx.pack_key(open_r), scoped_key = ctx.pack_key(scoped_r);
    std::vector<std::byte> keys(sizeof(std::uint32_t));
    const auto open_len = static_cast<std::uint32_t>(open_key.size());
    std::memcpy(keys.data(), &open_len, sizeof open_len);
    keys.insert(keys.end(), open_key.begin(), open_key.end());
    keys.insert(keys.end(), scoped_key.begin(), scoped_key.end());
    check(ctx.send(b, tag_keys, keys.data(), keys.size()) == Status::success, "keys send");

    std::string log;
    char granted = -1;  // how many forged one-sided operations B saw succeed
    {
        // B's raw frames went before its one-sided round trips, its done (a
        // raw match frame claiming to come from rank 0) last.
        StderrCapture capture;
        RequestStatus st;
        check(ctx.recv(transit::any_rank, tag_done, &granted, 1, &st) == Status::success,
              "done from the forger");
        check(st.source == b, "a match frame claiming rank 0 counted as from " +
                                  std::to_string(st.source) + ", not from its sender");
        log = capture.text();
    }
    check(granted == 0, "the server granted " + std::to_string(granted) +
                            " of the forger's one-sided operations");
    check(!victim->done(), "the forger ended the victim's request");
    check(all_of(memory, 0, std::byte{0x11}), "the forger wrote into the server's memory");
    check(counter.value() == 0 && counter.lost() == 0, "the forger counted the server's counter");
    check(all_of(hidden, 0, std::byte{0x22}), "the forger wrote a region whose key it never had");
    check(all_of(scoped, 0, std::byte{0x33}), "the forger wrote a region scoped to another peer");
    check(all_of(open, 8, std::byte{0}) && open[0] == std::byte{0x44},
          "the forger's put through its own key did not land, or landed elsewhere");
    check(ctx.engine().barrier_arrivals() == 0,
          std::to_string(ctx.engine().barrier_arrivals()) +
              " barrier signals from outside the job were counted");
    const std::string from = "from rank " + std::to_string(b) + " was ";
    const std::string dropped = from + "dropped: ", refused = from + "refused: ";
    for (const std::string& line :
         {"kind fin " + dropped + "it names a request with another peer",
          "kind ack " + dropped + "it names a request with another peer",
          "kind fin " + dropped + "it names no live request",
          "kind frag " + dropped,
          "kind split " + dropped,
          "kind split_fin " + dropped,
          "kind frag_abort " + dropped,
          "kind osc_get_reply " + dropped + "it names no one-sided operation",
          "kind osc_ack " + dropped + "it names no one-sided operation",
          "kind osc_atomic_reply " + dropped + "it names no one-sided operation",
          "kind am_done " + dropped + "it names no completion that peer owes",
          "kind am " + dropped + "it names no counter of ours",
          "kind barrier " + refused + "job control from a peer outside the job",
          "kind osc_put " + refused + "it reaches outside the region its key names",
          "kind osc_get " + refused + "it reaches outside the region its key names",
          "kind osc_atomic " + refused + "it reaches outside the region its key names",
          "kind osc_put " + refused + "the region is not registered for that peer",
          "kind osc_put " + refused + "it names no live region of ours",
          std::string("kind osc_put ") + "from rank",
          std::string("(further drops of this kind are not logged)")})
        check(log.find(line) != std::string::npos, "not logged: " + line);
    if (peer_btl() == "tcp")  // B's guesses at tcp's own keys
        check(log.find("refused a put at 0x") != std::string::npos &&
                  log.find("(further refusals in this window are counted)") != std::string::npos,
              "tcp logged no refused key guesses");
    // The rendezvous header it sent claiming rank 0 is its own message.
    RequestStatus probed;
    bool found = false;
    check(ctx.iprobe(transit::any_rank, tag_forged_rndv, found, probed) == Status::success &&
              found && probed.source == b,
          "a forged rendezvous header named another sender");

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

// The region a packed key names, as this process holds it: doctored below.
transit::pml::RemoteKeyImpl* impl(transit::RemoteKey* k) {
    return reinterpret_cast<transit::pml::RemoteKeyImpl*>(k);
}

// Issues `op` through `key` and flushes: 1 when the server granted it.
template <typename Op>
int granted(transit::Context& ctx, Rank server, Op op) {
    const Status s = op();
    if (!transit::ok(s)) return 0;
    return ctx.flush(server) == Status::success ? 1 : 0;
}

// One-sided operations the forger's keys do not allow: through its key
// stretched over the server's memory and stripped of the transports'
// handles (so the server's pml serves it: memory without a key), through
// guessed keys (the pml's and tcp's own) and through a key scoped to another
// peer.  Returns how many the server granted.
int forge_one_sided(transit::Context& ctx, Rank server, const Names& n,
                    std::span<const std::byte> open_packed,
                    std::span<const std::byte> scoped_packed) {
    int got = 0;
    transit::RemoteKey *open = nullptr, *scoped = nullptr, *probe = nullptr, *guess = nullptr;
    check(ctx.unpack_key(open_packed, open) == Status::success, "open key");
    check(ctx.unpack_key(scoped_packed, scoped) == Status::success, "scoped key");
    // What the key allows: the first 8 bytes of the open region.
    const std::uint64_t mine = 0x4444444444444444ull;
    check(ctx.put(server, &mine, sizeof mine, open, 0) == Status::success &&
              ctx.flush(server) == Status::success,
          "a put through the forger's own key");

    // Memory without a key: from the open region's base to the hidden one.
    check(ctx.unpack_key(open_packed, probe) == Status::success, "probe key");
    impl(probe)->entries.clear();
    impl(probe)->size = std::uint64_t{1} << 40;
    const std::uint64_t reach = n.hidden - impl(probe)->base;
    std::uint64_t word = 0x5555555555555555ull, fetched = 0;
    got += granted(ctx, server, [&] { return ctx.put(server, &word, 8, probe, reach); });
    got += granted(ctx, server, [&] { return ctx.get(server, &word, 8, probe, reach); });
    got += granted(ctx, server, [&] {
        return ctx.atomic(server, transit::AtomicOp::add, transit::AtomicWidth::bits64, probe,
                          reach, 1, &fetched);
    });

    // A key for the region scoped to the victim alone.
    got += granted(ctx, server, [&] { return ctx.put(server, &word, 8, scoped, 0); });

    // The pml's keys: the next slots with secrets near the forger's own.
    check(ctx.unpack_key(open_packed, guess) == Status::success, "guess key");
    impl(guess)->entries.clear();
    impl(guess)->base = n.hidden;
    for (std::size_t i = 0; i < key_guesses; ++i) {
        impl(guess)->region = impl(open)->region + 1 + static_cast<std::uint32_t>(i % 4);
        impl(guess)->secret = impl(open)->secret + i / 4 + 1;
        if (ctx.put(server, &word, 8, guess, 0) != Status::success) break;
    }
    got += ctx.flush(server) == Status::success ? 1 : 0;

    // tcp's own keys: ids near the forger's (serial << 24 | index), with its
    // own key's secret, straight at the hidden region.
    if (peer_btl() == "tcp") {
        const std::uint32_t tcp = transit::name_hash("tcp");
        std::vector<std::byte> handle;
        for (const auto& e : impl(open)->entries)
            if (e.component == tcp) handle = e.handle;
        check(handle.size() >= 8, "the open key holds a tcp handle");
        std::uint64_t id = 0;
        std::memcpy(&id, handle.data(), sizeof id);
        for (std::int64_t serial = -3; serial <= 3; ++serial)
            for (std::int64_t index = -3; index <= 3; ++index) {
                const std::uint64_t guessed = id + static_cast<std::uint64_t>(serial << 24) +
                                              static_cast<std::uint64_t>(index);
                std::memcpy(handle.data(), &guessed, sizeof guessed);
                impl(guess)->entries = {{tcp, handle}};
                got += granted(ctx, server, [&] { return ctx.put(server, &word, 8, guess, 0); });
            }
    }
    for (transit::RemoteKey* k : {open, scoped, probe, guess}) ctx.release_key(k);
    return got;
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
    // The kinds not above: each names a request, an operation or a sender.
    const wire::FragHdr frag{n.victim, 0};
    send_raw(ctx, server, wire::frag, &frag, sizeof frag, 64);
    const wire::SplitHdr split{n.victim, 1, 0, 64, n.buffer, 0, 0, 0};
    send_raw(ctx, server, wire::split, &split, sizeof split);
    const wire::SplitFinHdr split_fin{n.victim, 0, 0};
    send_raw(ctx, server, wire::split_fin, &split_fin, sizeof split_fin);
    const wire::FragAbortHdr frag_abort{n.victim, 0, 0, 0};
    send_raw(ctx, server, wire::frag_abort, &frag_abort, sizeof frag_abort);
    const wire::OscReplyHdr osc_reply{0, 0, n.buffer, 8, 0};
    send_raw(ctx, server, wire::osc_ack, &osc_reply, sizeof osc_reply);
    send_raw(ctx, server, wire::osc_atomic_reply, &osc_reply, sizeof osc_reply);
    // Job control: four barrier signals (two epochs, two rounds).
    for (std::uint32_t i = 0; i < 4; ++i) {
        const wire::BarrierHdr barrier{0, i / 2, i % 2, 0};
        send_raw(ctx, server, wire::barrier, &barrier, sizeof barrier);
    }
    // A throttle claiming rank 0: it can only throttle the server's sends to us.
    const wire::ThrottleHdr throttle{0, 1};
    send_raw(ctx, server, wire::throttle, &throttle, sizeof throttle);
    // Raw one-sided requests naming slots and secrets never given out.
    for (std::uint32_t slot = 0; slot < 4; ++slot) {
        wire::OscHdr h{};
        h.region = slot;
        h.secret = 0x0123456789abcdefull + slot;
        h.addr = n.hidden;
        h.len = 8;
        h.width = 8;
        send_raw(ctx, server, wire::osc_put, &h, sizeof h, 8);
        send_raw(ctx, server, wire::osc_get, &h, sizeof h);
        send_raw(ctx, server, wire::osc_atomic, &h, sizeof h);
    }
    // Tagged frames claiming rank 0, in our sequence after our hello (0):
    // a rendezvous header (2) and a stand-in for a lost message (3), ahead of
    // the done (1) the caller sends last.
    wire::RndvHdr rndv{};
    rndv.m = {0, tag_forged_rndv, 2};
    rndv.total = 8;
    rndv.sreq = 1;
    rndv.kind = wire::kind_tagged;
    send_raw(ctx, server, wire::rndv, &rndv, sizeof rndv);
    const wire::LostHdr lost{{0, tag_forged_rndv + 1, 3}, 0, 8};
    send_raw(ctx, server, wire::lost, &lost, sizeof lost);
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
        std::vector<std::byte> keys(4096);
        RequestStatus st;
        check(ctx.recv(server, tag_keys, keys.data(), keys.size(), &st) == Status::success, "keys");
        std::uint32_t open_len = 0;
        std::memcpy(&open_len, keys.data(), sizeof open_len);
        const std::span<const std::byte> all(keys.data() + 4, st.length - 4);
        forge(ctx, server, names);
        const int got =
            forge_one_sided(ctx, server, names, all.first(open_len), all.subspan(open_len));
        // done: a match frame claiming rank 0, our tagged message after hello.
        struct {
            wire::MatchHdr m;
            char granted;
        } done{{0, tag_done, 1}, static_cast<char>(got)};
        static_assert(offsetof(decltype(done), granted) == sizeof(wire::MatchHdr));
        send_raw(ctx, server, wire::match, &done, sizeof done.m + sizeof done.granted);
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
    // The forger numbered frames its own pml never counted, so a graceful bye
    // (numbered after what the pml sent) would never be confirmed: it leaves
    // abortively, as a misbehaving client would be cut off.
    const Disconnect how = who == 'b' ? Disconnect::abortive : Disconnect::graceful;
    check(ctx.disconnect(server, how) == Status::success, "disconnect");
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
