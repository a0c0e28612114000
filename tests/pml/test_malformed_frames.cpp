// Messages of the pml's own protocol that arrive malformed (shorter than
// their kind's header, or with lengths inside that do not add up) are dropped
// with a log that names the kind, the length and the sender, and the Context
// goes on working.  Before, every handler returned without a word.
//
// One process (a job of one) over the self btl; the frames are handed to the
// pml through the process's btl tag table, as a transport delivers them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pml/headers.hpp"
#include "tests/pml/inject_frame.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/params.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
namespace wire = transit::pml::wire;
using transit::test::StderrCapture;

// Delivered with no endpoint: the log says rank -1.
using transit::test::deliver;

void a_message_still_goes_through(Context& ctx) {
    std::byte out{0x5c}, in{0};
    Request* recv = nullptr;
    Request* send = nullptr;
    ASSERT_EQ(ctx.irecv(0, 1, &in, 1, recv), Status::success);
    ASSERT_TRUE(ok(ctx.isend(0, 1, &out, 1, send)));
    if (send) {
        ASSERT_EQ(ctx.wait(send), Status::success);
    }
    ASSERT_EQ(ctx.wait(recv), Status::success);
    EXPECT_EQ(in, out);
}

class MalformedFrames : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        transit::test::become_job_of_one();
        params::registry().set("btl", "self", params::Source{params::Origin::api, "", 0});
    }
};

TEST_F(MalformedFrames, EveryKindShorterThanItsHeaderIsDroppedWithALog) {
    Context ctx = init();
    ASSERT_EQ(ctx.size(), 1u);
    for (int i = 0; i < wire::kind_count; ++i) {
        const auto k = static_cast<wire::Kind>(i);
        SCOPED_TRACE(wire::name(k));
        const std::size_t n = wire::header_size(k) - 1;
        const std::string log = deliver(k, std::vector<std::byte>(n));
        const std::string expected = "pml: a message of kind " + std::string(wire::name(k)) + " (" +
                                     std::to_string(n) +
                                     " bytes) from rank -1 was dropped: shorter than its header";
        EXPECT_NE(log.find(expected), std::string::npos) << "logged: " << log;
    }
    a_message_still_goes_through(ctx);
}

// Lengths inside the header that run past the message's end.
TEST_F(MalformedFrames, LengthsPastTheEndAreDroppedWithALog) {
    Context ctx = init();
    wire::AmHdr am{};
    am.src = 0;
    am.header_len = 1000;
    std::vector<std::byte> bytes(sizeof am);
    std::memcpy(bytes.data(), &am, sizeof am);
    EXPECT_NE(deliver(wire::am, bytes)
                  .find("pml: a malformed message of kind am (" + std::to_string(sizeof am) +
                        " bytes) from rank 0 was dropped"),
              std::string::npos);

    for (std::uint8_t kind : {wire::kind_tagged, wire::kind_am}) {
        wire::RndvHdr rndv{};
        rndv.kind = kind;
        rndv.handle_len = 200;
        bytes.assign(sizeof rndv, std::byte{0});
        std::memcpy(bytes.data(), &rndv, sizeof rndv);
        EXPECT_NE(
            deliver(wire::rndv, bytes)
                .find("pml: a malformed message of kind rndv (64 bytes) from rank 0 was dropped"),
            std::string::npos)
            << "rendezvous kind " << int{kind};
    }
    a_message_still_goes_through(ctx);
}

// A peer sending garbage does not flood the log: the first ten drops of a
// kind are logged, the tenth saying the rest are not.
TEST_F(MalformedFrames, OnlyTheFirstTenDropsOfAKindAreLogged) {
    std::optional<Context> ctx(init());
    std::string log;
    for (int i = 0; i < 25; ++i) log += deliver(wire::ack, std::vector<std::byte>(3));
    std::size_t lines = 0;
    for (std::size_t at = 0;
         (at = log.find("pml: a message of kind ack (3 bytes)", at)) != std::string::npos; ++at)
        ++lines;
    EXPECT_EQ(lines, 10u) << log;
    const std::string last =
        "pml: a message of kind ack (3 bytes) from rank -1 was dropped: shorter than its header "
        "(further drops of this kind are not logged)";
    EXPECT_EQ(log.find(last), log.rfind("pml: a message of kind ack (3 bytes)"))
        << "the tenth, and only it, says the rest are not logged";
    // Another kind still has its own ten.
    EXPECT_NE(
        deliver(wire::fin, std::vector<std::byte>(3)).find("pml: a message of kind fin (3 bytes)"),
        std::string::npos);
    a_message_still_goes_through(*ctx);
    // The Context's end counts what went unlogged (fin stayed under ten).
    StderrCapture closing;
    ctx.reset();
    const std::string at_close = closing.text();
    EXPECT_NE(at_close.find(
                  "pml: 25 messages of kind ack were dropped or refused in all (15 not logged)"),
              std::string::npos)
        << at_close;
    EXPECT_EQ(at_close.find("of kind fin"), std::string::npos);
}

// A sender rank outside the job (a job of one here).
TEST_F(MalformedFrames, ASenderOutsideTheJobIsDroppedWithALog) {
    Context ctx = init();
    wire::RndvHdr rndv{};
    rndv.m.src = 5;
    rndv.kind = wire::kind_am;
    std::vector<std::byte> bytes(sizeof rndv);
    std::memcpy(bytes.data(), &rndv, sizeof rndv);
    EXPECT_NE(deliver(wire::rndv, bytes)
                  .find("pml: a malformed message of kind rndv (64 bytes) from rank 5 was dropped"),
              std::string::npos);

    wire::OscHdr osc{};
    osc.src = 5;
    bytes.assign(sizeof osc, std::byte{0});
    std::memcpy(bytes.data(), &osc, sizeof osc);
    EXPECT_NE(deliver(wire::osc_get, bytes)
                  .find("pml: a malformed message of kind osc_get (" + std::to_string(sizeof osc) +
                        " bytes) from rank 5 was dropped"),
              std::string::npos);
    a_message_still_goes_through(ctx);
}

}  // namespace
