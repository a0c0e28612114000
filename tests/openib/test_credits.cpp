#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "components/openib/openib_credits.hpp"

using transit::openib::CreditAccount;
using transit::openib::SendSlots;
using transit::openib::SrqBudget;

TEST(OpenibCredits, DataCreditsRunOutAndComeBack) {
    CreditAccount a;
    a.start(/*granted_to_us=*/2, /*granted_to_peer=*/4);
    EXPECT_TRUE(a.take_data_credit());
    EXPECT_TRUE(a.take_data_credit());
    EXPECT_FALSE(a.take_data_credit());
    EXPECT_TRUE(a.on_header(1, false));
    EXPECT_EQ(a.send_credits(), 1u);
    EXPECT_TRUE(a.take_data_credit());
}

TEST(OpenibCredits, PeerCannotReturnMoreThanOutstanding) {
    CreditAccount a;
    a.start(4, 4);
    EXPECT_FALSE(a.on_header(1, false)) << "nothing outstanding yet";
    ASSERT_TRUE(a.take_data_credit());
    EXPECT_FALSE(a.on_header(2, false));
    EXPECT_TRUE(a.on_header(1, false));
    EXPECT_FALSE(a.on_header(0, true)) << "control credit was never spent";
}

TEST(OpenibCredits, PeerCannotExceedItsGrant) {
    CreditAccount a;
    a.start(4, 2);
    EXPECT_TRUE(a.on_arrival(false));
    EXPECT_TRUE(a.on_arrival(false));
    EXPECT_FALSE(a.on_arrival(false)) << "third fragment with a grant of two";
    EXPECT_TRUE(a.on_arrival(true)) << "control slot is separate";
    EXPECT_FALSE(a.on_arrival(true)) << "only one control slot";
    a.on_buffer_reposted(false);
    EXPECT_TRUE(a.on_arrival(false));
}

TEST(OpenibCredits, ReturnsRideOnFragmentsAndCreditMessagesWaitForThreshold) {
    CreditAccount a;
    a.start(8, 8);  // threshold 4
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(a.on_arrival(false));
        a.on_buffer_reposted(false);
    }
    EXPECT_EQ(a.pending_returns(), 3u);
    EXPECT_FALSE(a.credit_message_due());
    ASSERT_TRUE(a.on_arrival(false));
    a.on_buffer_reposted(false);
    EXPECT_TRUE(a.credit_message_due());

    auto p = a.take_piggyback();
    EXPECT_EQ(p.credits, 4);
    EXPECT_FALSE(p.returns_control);
    EXPECT_EQ(a.pending_returns(), 0u);
    a.restore_piggyback(p);  // the post failed
    EXPECT_EQ(a.pending_returns(), 4u);
}

TEST(OpenibCredits, ControlCreditIsSpentOnceAndReturnedByPiggyback) {
    CreditAccount a, b;
    a.start(8, 8);
    b.start(8, 8);
    ASSERT_TRUE(a.take_control_credit());
    EXPECT_FALSE(a.take_control_credit());
    EXPECT_FALSE(a.credit_message_due());
    // b receives the credit-only message and owes the control credit back...
    ASSERT_TRUE(b.on_arrival(true));
    b.on_buffer_reposted(true);
    EXPECT_TRUE(b.owes_control());
    // ...but never sends a message just for that.
    EXPECT_FALSE(b.credit_message_due());
    auto p = b.take_piggyback();
    EXPECT_TRUE(p.returns_control);
    EXPECT_TRUE(a.on_header(p.credits, p.returns_control));
    EXPECT_TRUE(a.control_credit_available());
}

TEST(OpenibCredits, SrqBudgetNeverOverbooks) {
    SrqBudget srq(10);
    EXPECT_EQ(srq.reserve(4), 4u);  // 5 slots
    EXPECT_EQ(srq.reserve(8), 4u);  // 5 slots left: 4 data + 1 control
    EXPECT_EQ(srq.reserved(), 10u);
    EXPECT_EQ(srq.reserve(1), 0u) << "full: the connection must be refused";
    srq.release(4);
    EXPECT_EQ(srq.reserve(1), 1u);
    EXPECT_LE(srq.reserved(), srq.capacity());
    SrqBudget tiny(1);
    EXPECT_EQ(tiny.reserve(1), 0u) << "one slot cannot hold data and control";
}

TEST(OpenibCredits, SendSlots) {
    SendSlots sq(2);
    EXPECT_TRUE(sq.take());
    EXPECT_TRUE(sq.take());
    EXPECT_FALSE(sq.take());
    EXPECT_EQ(sq.in_flight(), 2u);
    sq.give();
    EXPECT_TRUE(sq.take());
    sq.give();
    sq.give();
    sq.give();  // a spurious completion cannot create slots
    EXPECT_EQ(sq.free(), 2u);
}

// Two peers exchanging fragments over an in-order channel, each following the
// protocol the module follows.  Checks: no receiver ever sees more fragments
// than it reserved buffers for, and all traffic drains (no credit deadlock),
// including when only one side has data to send.
namespace {

struct Frag {
    bool credit_only;
    std::uint16_t credits;
    bool returns_control;
};

struct Peer {
    CreditAccount acct;
    int to_send = 0;
    int received = 0;
    std::deque<bool> unreposted;  // fragments received, buffer not yet reposted
};

bool send_one(Peer& p, std::deque<Frag>& wire) {
    if (p.to_send > 0 && p.acct.take_data_credit()) {
        auto pb = p.acct.take_piggyback();
        wire.push_back({false, pb.credits, pb.returns_control});
        --p.to_send;
        return true;
    }
    if (p.acct.credit_message_due() && p.acct.take_control_credit()) {
        auto pb = p.acct.take_piggyback();
        wire.push_back({true, pb.credits, pb.returns_control});
        return true;
    }
    return false;
}

bool receive_one(Peer& p, std::deque<Frag>& wire) {
    if (wire.empty()) return false;
    Frag f = wire.front();
    wire.pop_front();
    EXPECT_TRUE(p.acct.on_arrival(f.credit_only)) << "receiver overrun";
    EXPECT_TRUE(p.acct.on_header(f.credits, f.returns_control)) << "bogus credit return";
    if (f.credit_only) {
        // As the module does: a credit-only buffer goes back to the SRQ at once.
        p.acct.on_buffer_reposted(true);
        return true;
    }
    ++p.received;
    p.unreposted.push_back(false);
    return true;
}

bool repost_one(Peer& p) {
    if (p.unreposted.empty()) return false;
    p.acct.on_buffer_reposted(p.unreposted.front());
    p.unreposted.pop_front();
    return true;
}

void run(int a_msgs, int b_msgs, std::uint32_t grant_a, std::uint32_t grant_b, unsigned seed) {
    Peer a, b;
    a.acct.start(grant_b, grant_a);
    b.acct.start(grant_a, grant_b);
    a.to_send = a_msgs;
    b.to_send = b_msgs;
    std::deque<Frag> ab, ba;
    std::mt19937 rng(seed);
    int idle_rounds = 0;
    for (int step = 0; step < 1000000 && idle_rounds < 1000; ++step) {
        bool progressed = false;
        switch (rng() % 6) {
            case 0:
                progressed = send_one(a, ab);
                break;
            case 1:
                progressed = send_one(b, ba);
                break;
            case 2:
                progressed = receive_one(b, ab);
                break;
            case 3:
                progressed = receive_one(a, ba);
                break;
            case 4:
                progressed = repost_one(a);
                break;
            case 5:
                progressed = repost_one(b);
                break;
        }
        idle_rounds = progressed ? 0 : idle_rounds + 1;
    }
    EXPECT_EQ(b.received, a_msgs) << "seed " << seed;
    EXPECT_EQ(a.received, b_msgs) << "seed " << seed;
}

}  // namespace

TEST(OpenibCredits, FlowControlDrainsOneWayTraffic) {
    for (unsigned seed = 1; seed <= 20; ++seed) run(500, 0, 4, 4, seed);
}

TEST(OpenibCredits, FlowControlDrainsTwoWayTraffic) {
    for (unsigned seed = 1; seed <= 20; ++seed) run(400, 300, 8, 3, seed);
}

TEST(OpenibCredits, FlowControlWithGrantOfOne) {
    for (unsigned seed = 1; seed <= 20; ++seed) run(200, 50, 1, 1, seed);
}
