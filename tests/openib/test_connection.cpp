#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <string>

#include "components/openib/openib_endpoint.hpp"

using transit::openib::Connection;
using transit::openib::ConnectionActions;
using transit::openib::ConnState;
namespace w = transit::openib::wire;

namespace {

// One side's verbs work, recorded.  The "QP" is just a number; connect_qp checks
// that the machine never connects one QP twice or to a different peer QP.
struct Side : ConnectionActions {
    std::uint32_t qpn;
    std::uint16_t credits_left = 16;
    std::deque<w::CmMessage>* out = nullptr;
    std::function<bool(const w::CmMessage&)> drop;  // loses outgoing messages
    int qps_created = 0;
    std::uint32_t connected_to = 0;
    int connected_calls = 0;
    std::uint16_t granted_to_us = 0, granted_to_peer = 0;
    std::string failure;
    int released = 0;
    int sent = 0;

    explicit Side(std::uint32_t q) : qpn(q) {}

    bool create_qp(w::QpAddress& local) override {
        ++qps_created;
        local.qpn = qpn;
        local.psn = 7;
        local.lid = static_cast<std::uint16_t>(qpn);
        local.mtu = 3;
        return true;
    }
    bool connect_qp(const w::QpAddress& remote) override {
        EXPECT_TRUE(connected_to == 0 || connected_to == remote.qpn) << "QP reconnected elsewhere";
        connected_to = remote.qpn;
        return true;
    }
    std::uint16_t reserve_credits() override {
        std::uint16_t g = credits_left >= 8 ? 8 : 0;
        credits_left -= g;
        return g;
    }
    void release_credits(std::uint16_t g) override {
        credits_left += g;
        ++released;
    }
    void send_cm(const w::CmMessage& m) override {
        ++sent;
        // Everything goes through the real encoder and decoder.
        std::byte buf[w::CmMessage::size];
        w::encode(m, buf);
        auto d = w::decode_cm(buf);
        ASSERT_TRUE(d) << "the machine produced an undecodable message";
        if (drop && drop(*d)) return;
        out->push_back(*d);
    }
    void connected(std::uint16_t us, std::uint16_t peer) override {
        ++connected_calls;
        granted_to_us = us;
        granted_to_peer = peer;
    }
    void failed(const char* reason) override { failure = reason; }
};

struct Pair {
    Side sa{0x100}, sb{0x200};
    std::deque<w::CmMessage> to_a, to_b;
    Connection a{
        sa,
        {.local_rank = 0, .peer_rank = 1, .job_key = 9, .retry_interval_ms = 10, .max_retries = 5}};
    Connection b{
        sb,
        {.local_rank = 1, .peer_rank = 0, .job_key = 9, .retry_interval_ms = 10, .max_retries = 5}};
    std::uint64_t now = 0;

    Pair() {
        sa.out = &to_b;
        sb.out = &to_a;
    }
    // Delivers everything in flight, then advances time; `rounds` times.
    void run(int rounds = 50) {
        for (int i = 0; i < rounds; ++i) {
            while (!to_a.empty() || !to_b.empty()) {
                if (!to_b.empty()) {
                    auto m = to_b.front();
                    to_b.pop_front();
                    b.receive(m, now);
                }
                if (!to_a.empty()) {
                    auto m = to_a.front();
                    to_a.pop_front();
                    a.receive(m, now);
                }
            }
            now += 10;
            a.tick(now);
            b.tick(now);
        }
    }
    void expect_connected() {
        ASSERT_EQ(a.state(), ConnState::connected) << sa.failure;
        ASSERT_EQ(b.state(), ConnState::connected) << sb.failure;
        EXPECT_EQ(sa.connected_to, 0x200u);
        EXPECT_EQ(sb.connected_to, 0x100u);
        EXPECT_EQ(sa.qps_created, 1);
        EXPECT_EQ(sb.qps_created, 1);
        EXPECT_EQ(sa.connected_calls, 1);
        EXPECT_EQ(sb.connected_calls, 1);
        // Each side's grant is what the other was told.
        EXPECT_EQ(sa.granted_to_us, sb.granted_to_peer);
        EXPECT_EQ(sb.granted_to_us, sa.granted_to_peer);
        EXPECT_EQ(sa.granted_to_us, 8);
    }
};

bool is(const w::CmMessage& m, w::CmType t) {
    return m.type == t;
}

}  // namespace

TEST(OpenibConnection, HandshakeConnectsBothSides) {
    Pair p;
    p.a.start(p.now);
    EXPECT_EQ(p.a.state(), ConnState::requesting);
    p.run(1);
    p.expect_connected();
    EXPECT_FALSE(p.a.waiting());
    EXPECT_FALSE(p.b.waiting());
}

TEST(OpenibConnection, LostRequestIsResent) {
    Pair p;
    int dropped = 0;
    p.sa.drop = [&](const w::CmMessage& m) { return is(m, w::CmType::request) && dropped++ < 2; };
    p.a.start(p.now);
    p.run();
    p.expect_connected();
    EXPECT_EQ(p.a.retries(), 2u) << "two resends";
}

TEST(OpenibConnection, LostReplyIsResentAndAnsweredOnce) {
    Pair p;
    int dropped = 0;
    p.sb.drop = [&](const w::CmMessage& m) { return is(m, w::CmType::reply) && dropped++ < 3; };
    p.a.start(p.now);
    p.run();
    p.expect_connected();
}

TEST(OpenibConnection, LostReadyIsRepairedByTheReplyTimer) {
    Pair p;
    p.sa.drop = [&](const w::CmMessage& m) { return is(m, w::CmType::ready) && p.sa.sent < 3; };
    p.a.start(p.now);
    p.run(1);
    EXPECT_EQ(p.a.state(), ConnState::connected);
    EXPECT_EQ(p.b.state(), ConnState::accepting) << "ready was lost";
    p.run();
    p.expect_connected();
}

TEST(OpenibConnection, FirstFragmentConfirmsTheReplier) {
    Pair p;
    p.sa.drop = [](const w::CmMessage& m) { return is(m, w::CmType::ready); };
    p.a.start(p.now);
    p.run(1);
    ASSERT_EQ(p.b.state(), ConnState::accepting);
    p.b.fragment_arrived();  // a's first send landed on b's QP
    p.expect_connected();
}

TEST(OpenibConnection, SimultaneousStartLowerRankWins) {
    Pair p;
    p.a.start(p.now);
    p.b.start(p.now);
    p.run();
    p.expect_connected();
    EXPECT_EQ(p.sb.released, 0) << "the higher rank keeps its grant for the winning connection";
}

TEST(OpenibConnection, SimultaneousStartWithLosses) {
    for (int seed = 0; seed < 200; ++seed) {
        Pair p;
        unsigned state = static_cast<unsigned>(seed) * 2654435761u + 1;
        auto lossy = [&state](const w::CmMessage&) {
            state = state * 1103515245u + 12345u;
            return (state >> 16) % 3 == 0;  // a third of all messages lost
        };
        p.sa.drop = lossy;
        p.sb.drop = lossy;
        p.a.start(p.now);
        if (seed % 2) p.b.start(p.now);
        p.sa.drop = p.sb.drop = lossy;
        p.run(200);
        if (p.a.state() == ConnState::failed || p.b.state() == ConnState::failed) {
            // Allowed only when retries ran out; then both must say why.
            EXPECT_FALSE(p.sa.failure.empty() && p.sb.failure.empty()) << seed;
            continue;
        }
        // Both connected to each other, or (rarely) the accepting side still
        // waits only if its partner is connected and will confirm by sending.
        ASSERT_EQ(p.a.state(), ConnState::connected) << "seed " << seed;
        if (p.b.state() == ConnState::accepting) p.b.fragment_arrived();
        p.expect_connected();
    }
}

TEST(OpenibConnection, UnansweredRequestFailsAfterRetries) {
    Pair p;
    p.sa.drop = [](const w::CmMessage&) { return true; };
    p.a.start(p.now);
    p.run(20);
    EXPECT_EQ(p.a.state(), ConnState::failed);
    EXPECT_EQ(p.sa.failure, "connection request timed out");
    EXPECT_EQ(p.sa.sent, 6) << "first attempt plus max_retries";
    EXPECT_EQ(p.sa.credits_left, 16) << "grant released on failure";
    EXPECT_EQ(p.b.state(), ConnState::idle);
}

TEST(OpenibConnection, PeerWithoutReceiveBuffersRejects) {
    Pair p;
    p.sb.credits_left = 0;
    p.a.start(p.now);
    p.run(1);
    EXPECT_EQ(p.a.state(), ConnState::failed);
    EXPECT_EQ(p.sa.failure, "the peer has no receive buffers left for a new connection");
    EXPECT_EQ(p.b.state(), ConnState::idle);
}

TEST(OpenibConnection, NoLocalBuffersFailsAtOnce) {
    Pair p;
    p.sa.credits_left = 0;
    p.a.start(p.now);
    EXPECT_EQ(p.a.state(), ConnState::failed);
    EXPECT_EQ(p.sa.sent, 0);
}

TEST(OpenibConnection, StaleReplyIsIgnored) {
    Pair p;
    p.a.start(p.now);
    w::CmMessage stale;
    stale.type = w::CmType::reply;
    stale.src = {0x300, 1, 1, 3, {}};
    stale.dst_qpn = 0x999;  // not a's QP
    stale.credits = 4;
    p.a.receive(stale, p.now);
    EXPECT_EQ(p.a.state(), ConnState::requesting);
    EXPECT_EQ(p.sa.connected_to, 0u);
    p.run(1);
    p.expect_connected();
}

TEST(OpenibConnection, DuplicatesAfterConnectAreHarmless) {
    Pair p;
    std::vector<w::CmMessage> seen;
    p.sa.drop = [&](const w::CmMessage& m) {
        seen.push_back(m);
        return false;
    };
    p.a.start(p.now);
    p.run(1);
    p.expect_connected();
    for (const auto& m : seen) p.b.receive(m, p.now);  // replay a's request and ready
    p.run(1);
    p.expect_connected();
}

TEST(OpenibConnection, FailIsFinal) {
    Pair p;
    p.a.start(p.now);
    p.run(1);
    p.a.fail("QP entered the error state");
    EXPECT_EQ(p.a.state(), ConnState::failed);
    EXPECT_EQ(p.sa.failure, "QP entered the error state");
    p.a.start(p.now);
    p.a.fail("again");
    EXPECT_EQ(p.sa.failure, "QP entered the error state");
}
