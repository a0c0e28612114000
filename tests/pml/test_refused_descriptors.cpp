// A descriptor the btl refuses for good must end with its completion callback
// and go back to the btl (pml/outbox.cpp post_desc, end_desc, drain),
// whether the refusal comes at once or on the retry of a descriptor first
// refused with out_of_resource.  Before that, a refused rendezvous fragment
// left its send waiting for good, and every refused descriptor leaked.
//
// One process (a job of one) sends to itself over the faulty fixture btl
// (tests/fixtures/faulty.cpp): a loopback that refuses the send() the test
// picks through its btl_faulty_* parameters and, when its module is finalized
// with the Context, prints how many descriptors it handed out and got back.
// ctest selects it (TRANSIT_MCA_btl=faulty) and finds it
// (TRANSIT_MCA_mca_base_component_path); each case opens its own Context with
// its own fault plan.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pml/headers.hpp"
#include "tests/fixtures/posix_regex.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/params.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using namespace std::chrono_literals;
using transit::test::StderrCapture;

// Long enough for a loaded machine; a send that waits for good fails here
// instead of hanging the test.
constexpr auto deadline = 10s;
constexpr std::uint32_t user_tag = 7;
// Above the fixture's 4 KiB eager limit, and five of its 16 KiB fragments.
constexpr std::size_t rndv_size = 64 * 1024;
constexpr std::size_t eager_size = 100;

struct FaultPlan {
    btl::Tag tag;
    unsigned nth;
    bool busy_first;
    const char* status;
    bool lost = true;    // a message is lost (and logged); false: it is sent again
    unsigned count = 1;  // refusals from the nth call on; 0: every one after it
};

void set_param(const char* name, const std::string& value) {
    params::registry().set(name, value, params::Source{params::Origin::api, "", 0});
}

struct Accounting {
    bool found = false;
    unsigned long handed_out = 0;
    unsigned long given_back = 0;
    unsigned long refused = 0;
};

Accounting parse_accounting(const std::string& text) {
    static const test::Regex line(
        R"(btl faulty: ([0-9]+) descriptor\(s\) handed out, ([0-9]+) given back, ([0-9]+) send\(s\) refused)");
    Accounting a;
    std::vector<std::string> m;
    if (!line.search(text, &m)) return a;
    a.found = true;
    a.handed_out = std::stoul(m[1]);
    a.given_back = std::stoul(m[2]);
    a.refused = std::stoul(m[3]);
    return a;
}

// Drives progress (through test, never wait) until req completes or the
// deadline passes.  True when it completed; st then has its status.
bool finish_in_time(Context& ctx, Request*& req, RequestStatus& st) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    bool done = false;
    while (!done && std::chrono::steady_clock::now() < end) ctx.test(req, done, &st);
    return done;
}

class RefusedDescriptors : public ::testing::Test {
  protected:
    void SetUp() override {
        // Run by hand, the default transports would run the cases: say why they fail.
        ASSERT_STREQ(std::getenv("TRANSIT_MCA_btl"), "faulty")
            << "run by ctest, which selects the faulty fixture btl and names its folder";
        transit::test::become_job_of_one();
    }

    // Opens a Context whose faulty module refuses as `plan` says, runs body,
    // closes the Context and checks the fixture's accounting: the injected
    // refusal happened (else the case tested nothing) and every descriptor
    // came back.
    template <typename Body>
    void run(const FaultPlan& plan, Body&& body) {
        set_param("btl_faulty_refuse_tag", std::to_string(plan.tag));
        set_param("btl_faulty_refuse_nth", std::to_string(plan.nth));
        set_param("btl_faulty_busy_first", plan.busy_first ? "true" : "false");
        set_param("btl_faulty_refuse_status", plan.status);
        set_param("btl_faulty_refuse_count", std::to_string(plan.count));
        StderrCapture capture;
        {
            Context ctx = init();
            ASSERT_EQ(ctx.size(), 1u);
            body(ctx);
        }  // the module is finalized here and reports
        const std::string text = capture.text();
        log_ = text;
        const Accounting a = parse_accounting(text);
        ASSERT_TRUE(a.found) << "no accounting line from the faulty btl in:\n" << text;
        if (plan.count == 1) {
            EXPECT_EQ(a.refused, 1u) << "the fault was not injected; the case tested nothing";
        } else {
            EXPECT_GE(a.refused, 1u) << "the fault was not injected; the case tested nothing";
        }
        EXPECT_EQ(a.handed_out, a.given_back)
            << a.handed_out - a.given_back << " descriptor(s) never given back to the btl";
        EXPECT_EQ(text.find("leaked"), std::string::npos);  // the fixture's loud report
        // Never silent: an eager send already reported success to its user.
        const bool logged =
            text.find("pml: a message to rank 0 over faulty was refused") != std::string::npos;
        EXPECT_EQ(logged, plan.lost) << (plan.lost ? "the pml said nothing of the refused message"
                                                   : "a message sent again was called refused");
    }

    std::string log_;  // what the last run() wrote to stderr
};

// A rendezvous to ourselves, one of whose descriptors (a fragment, the ack)
// the plan refuses: both sides must end, not wait for good, with `expected`,
// and a transfer that succeeds delivers the data.  For a fragment, the
// receiver learns of it from frag_abort; before that it stayed matched, and
// could not be cancelled, until the Context closed.
void rendezvous_to_self_ends_with(Context& ctx, Status expected) {
    std::vector<std::byte> out(rndv_size, std::byte{0x5a}), in(rndv_size);
    Request* recv = nullptr;
    Request* send = nullptr;
    ASSERT_EQ(ctx.irecv(0, user_tag, in.data(), in.size(), recv), Status::success);
    ASSERT_EQ(ctx.isend(0, user_tag, out.data(), out.size(), send), Status::success);
    RequestStatus st;
    ASSERT_TRUE(finish_in_time(ctx, send, st)) << "the send waits for good";
    EXPECT_EQ(st.status, expected);
    ASSERT_TRUE(finish_in_time(ctx, recv, st)) << "the receive waits for good";
    EXPECT_EQ(st.status, expected);
    if (ok(expected)) {
        EXPECT_EQ(in, out);
    }
}

// (a) A rendezvous streamed in fragments whose second fragment is refused with
// out_of_resource, then, on the retry from progress, with a hard error: the
// send completes with that error, and so does the receive.  Before the fix the queued fragment was
// dropped with no callback, so frags_out never reached 0.
TEST_F(RefusedDescriptors, FragmentRefusedOnRetryFailsTheSend) {
    run({pml::wire::tag(pml::wire::frag), 2, true, "error"},
        [](Context& ctx) { rendezvous_to_self_ends_with(ctx, Status::error); });
}

// The same fragment refused at once (pump_frags' own send): the send fails
// with the btl's error and the fragment goes back.
TEST_F(RefusedDescriptors, FragmentRefusedAtOnceFailsTheSend) {
    run({pml::wire::tag(pml::wire::frag), 2, false, "unreachable"},
        [](Context& ctx) { rendezvous_to_self_ends_with(ctx, Status::unreachable); });
}

// The sequence goes on after a lost message: the next one is not held
// behind it (the stand-in took its sequence number).
void next_message_is_delivered(Context& ctx) {
    const std::uint32_t next_tag = user_tag + 1;
    std::byte next{0x44}, got{0};
    Request* recv = nullptr;
    Request* send = nullptr;
    RequestStatus st;
    ASSERT_EQ(ctx.irecv(0, next_tag, &got, 1, recv), Status::success);
    ASSERT_TRUE(ok(ctx.isend(0, next_tag, &next, 1, send)));
    if (send) {
        ASSERT_TRUE(finish_in_time(ctx, send, st));
    }
    ASSERT_TRUE(finish_in_time(ctx, recv, st)) << "the next message is held behind the lost one";
    EXPECT_EQ(st.status, Status::success);
    EXPECT_EQ(got, next);
}

// An eager message to ourselves, refused by the plan: nothing arrives, but the
// receive it would have matched completes with the refusal's status (the
// sender's stand-in, wire::lost, takes its place in the sequence), and the
// next message is delivered.  `expected`: the send's status, when the refusal
// came before the send completed.  Before the stand-in the receive stayed
// posted, and every later message from the sender was held, out of order, for
// good.
void eager_message_fails_at_the_receiver(Context& ctx, std::optional<Status> expected,
                                         Status receive_status) {
    std::vector<std::byte> out(eager_size, std::byte{0x33}), in(eager_size);
    Request* recv = nullptr;
    Request* send = nullptr;
    ASSERT_EQ(ctx.irecv(0, user_tag, in.data(), in.size(), recv), Status::success);
    const Status posted = ctx.isend(0, user_tag, out.data(), out.size(), send);
    ASSERT_TRUE(posted == Status::completed || posted == Status::success) << to_string(posted);
    RequestStatus st;
    ASSERT_TRUE(finish_in_time(ctx, send, st));
    if (expected) {
        EXPECT_EQ(st.status, *expected);
    }
    ASSERT_TRUE(finish_in_time(ctx, recv, st)) << "the receive of the lost message never ended";
    EXPECT_EQ(st.status, receive_status);
    EXPECT_EQ(st.length, 0u);
    EXPECT_EQ(st.sent_length, eager_size);
    next_message_is_delivered(ctx);
}

// (b) An eager message whose send() is refused with a hard error at once: the
// send completes with that error, and so does the receive.
TEST_F(RefusedDescriptors, EagerRefusedAtOnceFailsTheSend) {
    run({pml::wire::tag(pml::wire::match), 1, false, "unreachable"}, [](Context& ctx) {
        eager_message_fails_at_the_receiver(ctx, Status::unreachable, Status::unreachable);
    });
}

// An eager message queued on out_of_resource and refused on the retry.  Its
// send completed when the data was copied, before the btl refused it, so its
// status says nothing about the refusal; what counts is that the queued
// descriptor goes back to the btl (checked by run), the receive fails with
// the refusal and the loss is logged (checked by run too).
TEST_F(RefusedDescriptors, EagerRefusedOnRetryGivesTheDescriptorBack) {
    run({pml::wire::tag(pml::wire::match), 1, true, "error"}, [](Context& ctx) {
        eager_message_fails_at_the_receiver(ctx, std::nullopt, Status::error);
    });
}

// A rendezvous whose header the plan refuses for good: the send fails with
// the refusal instead of waiting for an answer, the receive it would have
// matched fails the same way (the stand-in takes the header's sequence
// number), and the next message is delivered.  Before, a header refused at
// once was sent again from progress for good, and one refused on its retry
// left the send waiting.
void rendezvous_header_refused(Context& ctx, Status expected) {
    std::vector<std::byte> out(rndv_size, std::byte{0x5a}), in(rndv_size);
    Request* recv = nullptr;
    Request* send = nullptr;
    ASSERT_EQ(ctx.irecv(0, user_tag, in.data(), in.size(), recv), Status::success);
    const Status posted = ctx.isend(0, user_tag, out.data(), out.size(), send);
    ASSERT_TRUE(posted == Status::completed || posted == Status::success) << to_string(posted);
    RequestStatus st;
    if (send) {
        ASSERT_TRUE(finish_in_time(ctx, send, st)) << "the send waits for an answer for good";
        EXPECT_EQ(st.status, expected);
    }
    ASSERT_TRUE(finish_in_time(ctx, recv, st)) << "the receive waits for the lost header";
    EXPECT_EQ(st.status, expected);
    EXPECT_EQ(st.sent_length, rndv_size);
    next_message_is_delivered(ctx);
}

TEST_F(RefusedDescriptors, RendezvousHeaderRefusedAtOnceFailsBothSides) {
    run({pml::wire::tag(pml::wire::rndv), 1, false, "unreachable"},
        [](Context& ctx) { rendezvous_header_refused(ctx, Status::unreachable); });
}

TEST_F(RefusedDescriptors, RendezvousHeaderRefusedOnRetryFailsBothSides) {
    run({pml::wire::tag(pml::wire::rndv), 1, true, "error"},
        [](Context& ctx) { rendezvous_header_refused(ctx, Status::error); });
}

// A control message (the receiver's ack, asking for the fragments) queued on
// out_of_resource and refused for good on the retry: it goes back to the
// control queue and is sent again, so the transfer completes.  Before, it was
// dropped (its sender had counted it sent) and both sides waited for good.
TEST_F(RefusedDescriptors, ControlMessageRefusedOnRetryIsSentAgain) {
    run({pml::wire::tag(pml::wire::ack), 1, true, "error", false},
        [](Context& ctx) { rendezvous_to_self_ends_with(ctx, Status::success); });
}

// The receiver's ack refused for good every time it is sent (a transport that
// refuses the peer and never reports it lost), at once or after a busy
// answer each time: after pml_base_control_refusal_grace the peer is taken as
// failed, so the rendezvous ends on both sides with peer_failed.  Before, the
// ack was retried from progress for good and both sides waited.  (The peer is
// our own rank here: the fixture is a loopback.)
void rendezvous_ends_when_every_ack_is_refused(Context& ctx) {
    rendezvous_to_self_ends_with(ctx, Status::peer_failed);
    // The failure holds: a new send to the peer fails at once.
    std::byte one{0x11};
    Request* again = nullptr;
    EXPECT_EQ(ctx.isend(0, user_tag, &one, 1, again), Status::peer_failed);
}

class ControlRefusedForGood : public RefusedDescriptors,
                              public ::testing::WithParamInterface<bool> {};

TEST_P(ControlRefusedForGood, FailsThePeerAfterTheGrace) {
    set_param("pml_base_control_refusal_grace", "200");
    const bool busy_first = GetParam();
    run({pml::wire::tag(pml::wire::ack), 1, busy_first, "error", false, 0},
        [](Context& ctx) { rendezvous_ends_when_every_ack_is_refused(ctx); });
    set_param("pml_base_control_refusal_grace", "2000");
    EXPECT_NE(log_.find("pml: the transport to rank 0 has refused every control message for"),
              std::string::npos)
        << "the pml did not say why it failed the peer";
}

INSTANTIATE_TEST_SUITE_P(RefusedAtOnceOrOnRetry, ControlRefusedForGood, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "OnRetry" : "AtOnce"; });

// An active message above the eager limit goes as a rendezvous; one of its
// fragments is refused for good.  Its completion handler runs "once all data
// is in place" (transit.hpp): never here; its target and completion counters
// count it as lost, so waits on them end with an error; the loss is logged.
// Before frag_abort the target waited for good; before the check in am_finish
// a lost message's handler ran on a partial buffer; before Counter::lost a
// wait on its completion counter never ended.
struct AmLanding {
    std::vector<std::byte> buffer = std::vector<std::byte>(rndv_size);
    bool completed = false;
};

TEST_F(RefusedDescriptors, ActiveMessageWithARefusedFragmentIsNotCompleted) {
    run({pml::wire::tag(pml::wire::frag), 2, false, "error"}, [](Context& ctx) {
        AmLanding landing;
        constexpr std::uint32_t handler = 3;
        auto header = [](Context&, const AmInfo&, void* arg) {
            return AmDestination{static_cast<AmLanding*>(arg)->buffer.data(), nullptr, arg};
        };
        auto done = [](Context&, Rank, void*, std::size_t, void* arg) {
            static_cast<AmLanding*>(arg)->completed = true;
        };
        ASSERT_EQ(ctx.register_am_handler(handler, header, done, &landing), Status::success);
        std::vector<std::byte> data(rndv_size, std::byte{0x42});
        Counter origin, target, completion;
        const AmCounters counters{&origin, ctx.counter_ref(target), &completion};
        ASSERT_EQ(ctx.am_send(0, handler, {}, data.data(), data.size(), counters), Status::success);
        // The origin's buffer is free again once its fragments are accounted for.
        const auto end = std::chrono::steady_clock::now() + deadline;
        while (ctx.counter_get(origin) < 1 && std::chrono::steady_clock::now() < end)
            ctx.progress();
        ASSERT_EQ(ctx.counter_get(origin), 1u) << "the refused am's send never ended";
        // Counted as lost where it was awaited, so a wait on it ends.
        EXPECT_EQ(ctx.counter_wait(completion, 1), Status::error);
        EXPECT_EQ(ctx.counter_wait(target, 1), Status::error);
        EXPECT_FALSE(landing.completed) << "the completion handler ran on a partial message";
        EXPECT_EQ(ctx.counter_get(target), 0u);
        EXPECT_EQ(ctx.counter_get(completion), 0u);
        EXPECT_EQ(target.lost(), 1u);
        EXPECT_EQ(completion.lost(), 1u);
    });
    EXPECT_NE(log_.find("pml: an active message of 65536 bytes from rank 0 was lost (error)"),
              std::string::npos)
        << "the lost active message was not reported";
}

}  // namespace
