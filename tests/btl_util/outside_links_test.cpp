// OutsideLinks and the OutsideLink it changes: a client's join is answered,
// refused or given up at its deadline, a server's admission opens a link at
// once, a goodbye or a death ends a live link once, release says whether a
// goodbye is owed, and the count of waiting joins stays right through all of
// it.  Deadlines are given as time points: nothing sleeps.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "transit/btl/util/outside_links.hpp"

namespace transit::test {
namespace {

using btl::util::OutsideLink;
using btl::util::OutsideLinks;
using Clock = OutsideLink::Clock;
using State = OutsideLink::State;

struct Peer {
    OutsideLink outside;
    bool given_up = false;  // what a transport's "failed" or "dead" is
};

Peer* live_peer(Peer& p) {
    return p.given_up ? nullptr : &p;
}

TEST(OutsideLinks, AJoinWelcomedOpensTheLink) {
    OutsideLinks links;
    OutsideLink link;
    EXPECT_EQ(link.state(), State::none);
    EXPECT_FALSE(link.live());
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    EXPECT_TRUE(links.join_sent(link, deadline));
    EXPECT_TRUE(link.joining());
    EXPECT_TRUE(link.live());
    EXPECT_EQ(link.deadline(), deadline);
    EXPECT_EQ(links.joining(), 1u);
    EXPECT_FALSE(links.join_sent(link, deadline));  // one join a link
    EXPECT_EQ(links.joining(), 1u);

    EXPECT_TRUE(links.welcome(link));
    EXPECT_TRUE(link.open());
    EXPECT_EQ(links.joining(), 0u);
    EXPECT_FALSE(links.welcome(link));  // a second welcome changes nothing
    EXPECT_FALSE(links.refuse(link));   // nor a refusal after the welcome
    EXPECT_TRUE(link.open());
    EXPECT_FALSE(link.overdue(deadline + std::chrono::hours(1)));
}

TEST(OutsideLinks, AJoinRefused) {
    OutsideLinks links;
    OutsideLink link;
    ASSERT_TRUE(links.join_sent(link, 1.0));
    EXPECT_TRUE(links.refuse(link));
    EXPECT_TRUE(link.refused());
    EXPECT_FALSE(link.live());
    EXPECT_EQ(links.joining(), 0u);
    EXPECT_FALSE(links.welcome(link));
    EXPECT_FALSE(links.goodbye_received(link));
    EXPECT_FALSE(links.release(link));  // no goodbye owed to a server that refused
    EXPECT_TRUE(link.released());
}

TEST(OutsideLinks, TheDeadlineFromTheJoinTimeout) {
    OutsideLinks links;
    OutsideLink link;
    const auto before = Clock::now();
    ASSERT_TRUE(links.join_sent(link, 2.5));
    const auto after = Clock::now();
    EXPECT_GE(link.deadline(), before + std::chrono::milliseconds(2500));
    EXPECT_LE(link.deadline(), after + std::chrono::milliseconds(2500));
}

TEST(OutsideLinks, AJoinNeverWelcomedTimesOutAtItsDeadline) {
    OutsideLinks links;
    std::vector<Peer> peers(3);
    const auto t0 = Clock::now();
    ASSERT_TRUE(links.join_sent(peers[0].outside, t0 + std::chrono::seconds(1)));
    ASSERT_TRUE(links.join_sent(peers[1].outside, t0 + std::chrono::seconds(2)));
    ASSERT_TRUE(links.admitted(peers[2].outside));  // a client of ours: no deadline
    EXPECT_EQ(links.joining(), 2u);

    Peer* late[4];
    EXPECT_EQ(links.expire_joins(peers, live_peer, t0, late), 0u);
    EXPECT_EQ(links.expire_joins(peers, live_peer, t0 + std::chrono::seconds(1), late), 1u);
    EXPECT_EQ(late[0], &peers[0]);
    EXPECT_TRUE(peers[0].outside.timed_out());
    EXPECT_FALSE(peers[0].outside.live());
    EXPECT_EQ(links.joining(), 1u);
    // Given up once: the next sweep does not hand it out again.
    EXPECT_EQ(links.expire_joins(peers, live_peer, t0 + std::chrono::seconds(1), late), 0u);
    // A welcome after the deadline is too late.
    EXPECT_FALSE(links.welcome(peers[0].outside));
    EXPECT_TRUE(peers[0].outside.timed_out());

    EXPECT_EQ(links.expire_joins(peers, live_peer, t0 + std::chrono::seconds(3), late), 1u);
    EXPECT_EQ(late[0], &peers[1]);
    EXPECT_EQ(links.joining(), 0u);
    EXPECT_TRUE(peers[2].outside.open());
}

TEST(OutsideLinks, TheSweepSkipsPeersGivenUpAndStopsAtItsBatch) {
    OutsideLinks links;
    std::vector<Peer> peers(20);
    const auto t0 = Clock::now();
    for (Peer& p : peers) ASSERT_TRUE(links.join_sent(p.outside, t0));
    peers[3].given_up = true;  // failed another way: the transport reports it itself
    Peer* late[16];
    EXPECT_EQ(links.expire_joins(peers, live_peer, t0, late), 16u);
    EXPECT_EQ(links.joining(), 4u);
    EXPECT_EQ(links.expire_joins(peers, live_peer, t0, late), 3u);  // the rest, next time
    EXPECT_EQ(links.joining(), 1u);
    EXPECT_TRUE(peers[3].outside.joining());
    EXPECT_EQ(links.expire_joins(peers, live_peer, t0, late), 0u);
    // Its release settles its join.
    EXPECT_TRUE(links.release(peers[3].outside));
    EXPECT_EQ(links.joining(), 0u);
}

TEST(OutsideLinks, ReleaseAfterAGoodbye) {
    OutsideLinks links;
    OutsideLink link;
    ASSERT_TRUE(links.admitted(link));
    EXPECT_FALSE(links.admitted(link));
    EXPECT_TRUE(links.goodbye_received(link));
    EXPECT_TRUE(link.departed());
    EXPECT_FALSE(links.goodbye_received(link));  // a second goodbye is not news
    EXPECT_FALSE(links.lost(link));              // its exit after the goodbye is no failure
    EXPECT_TRUE(link.departed());
    EXPECT_FALSE(links.release(link));  // it left: no goodbye owed
    EXPECT_TRUE(link.released());
    EXPECT_EQ(links.joining(), 0u);
}

TEST(OutsideLinks, ReleaseAfterADeath) {
    OutsideLinks links;
    OutsideLink joining;
    OutsideLink open;
    ASSERT_TRUE(links.join_sent(joining, Clock::now() + std::chrono::seconds(10)));
    ASSERT_TRUE(links.join_sent(open, Clock::now() + std::chrono::seconds(10)));
    ASSERT_TRUE(links.welcome(open));
    EXPECT_TRUE(links.lost(joining));  // the server died before it answered
    EXPECT_TRUE(links.lost(open));
    EXPECT_EQ(links.joining(), 0u);
    EXPECT_FALSE(links.goodbye_received(open));  // a goodbye after the death changes nothing
    EXPECT_TRUE(open.lost());
    EXPECT_FALSE(links.release(joining));
    EXPECT_FALSE(links.release(open));
    EXPECT_TRUE(joining.released());
    EXPECT_FALSE(joining.overdue(Clock::time_point::max()));
}

TEST(OutsideLinks, ReleaseOfALiveLinkOwesAGoodbye) {
    OutsideLinks links;
    OutsideLink joining;
    OutsideLink open;
    OutsideLink unused;
    ASSERT_TRUE(links.join_sent(joining, Clock::now()));
    ASSERT_TRUE(links.admitted(open));
    EXPECT_TRUE(links.release(joining));
    EXPECT_EQ(links.joining(), 0u);
    EXPECT_TRUE(links.release(open));
    EXPECT_FALSE(links.release(unused));  // never joined: nobody listens
    EXPECT_FALSE(links.release(open));    // released once
    EXPECT_EQ(links.joining(), 0u);
}

}  // namespace
}  // namespace transit::test
