// pml_base_max_requests bounds the requests that may exist at once.  Past it a
// new receive is refused with out_of_resource, and a large active message
// that arrives with no request left to receive it into is declined: the
// origin's send still ends and the counters that wait for the message count
// it lost.  Before, the declined message was dropped with a log and the origin
// waited for good.
//
// One process (a job of one) over the self btl, with a limit of 64 requests:
// 63 receives that never match, then an active message to ourselves whose
// send takes the 64th request.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/pml/single_process.hpp"
#include "transit/params.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using namespace std::chrono_literals;

constexpr std::size_t limit = 64;  // one block of the request pool
constexpr std::uint32_t handler = 5;
constexpr std::uint32_t idle_tag = 99;
constexpr std::size_t am_size = 256 * 1024;  // a rendezvous over self (4 KiB eager limit)

struct Landing {
    std::vector<std::byte> buffer = std::vector<std::byte>(am_size);
    int headers = 0;
    int completions = 0;
};

AmDestination land(Context&, const AmInfo&, void* arg) {
    auto* l = static_cast<Landing*>(arg);
    ++l->headers;
    return {l->buffer.data(), nullptr, arg};
}

void landed(Context&, Rank, void*, std::size_t, void* arg) {
    ++static_cast<Landing*>(arg)->completions;
}

// Progress (never a blocking wait) until the counter's value + lost reach 1.
bool settles(Context& ctx, const Counter& c) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (c.value() + c.lost() < 1 && std::chrono::steady_clock::now() < end) ctx.progress();
    return c.value() + c.lost() >= 1;
}

// Cancels a receive that never matched and frees its request.
void release(Context& ctx, Request*& r) {
    ASSERT_EQ(ctx.cancel(r), Status::success);
    bool done = false;
    RequestStatus st;
    ctx.test(r, done, &st);
    ASSERT_TRUE(done);
    EXPECT_EQ(st.status, Status::cancelled);
}

class RequestLimit : public ::testing::Test {
  protected:
    void SetUp() override {
        transit::test::become_job_of_one();
        const params::Source api{params::Origin::api, "", 0};
        params::registry().set("btl", "self", api);
        params::registry().set("pml_base_max_requests", std::to_string(limit), api);
    }
};

TEST_F(RequestLimit, ALargeActiveMessageWithNoRequestLeftIsDeclined) {
    Context ctx = init();
    ASSERT_EQ(ctx.size(), 1u);
    Landing landing;
    ASSERT_EQ(ctx.register_am_handler(handler, land, landed, &landing), Status::success);

    std::vector<Request*> idle(limit, nullptr);
    std::byte sink[8];
    for (Request*& r : idle)
        ASSERT_EQ(ctx.irecv(0, idle_tag, sink, sizeof sink, r), Status::success);
    Request* one_more = nullptr;
    ASSERT_EQ(ctx.irecv(0, idle_tag, sink, sizeof sink, one_more), Status::out_of_resource)
        << "the limit does not hold";
    // None free: a large active message is refused at once, and nothing
    // waits for it.
    std::vector<std::byte> data(am_size, std::byte{0x42});
    Counter refused_completion;
    EXPECT_EQ(
        ctx.am_send(0, handler, {}, data.data(), data.size(), {nullptr, 0, &refused_completion}),
        Status::out_of_resource);
    ctx.progress();
    EXPECT_EQ(refused_completion.value() + refused_completion.lost(), 0u);
    // One request free: the active message's send takes it.
    release(ctx, idle.back());
    idle.pop_back();

    Counter origin, target, completion;
    const AmCounters counters{&origin, ctx.counter_ref(target), &completion};
    const Status sent = ctx.am_send(0, handler, {}, data.data(), data.size(), counters);
    ASSERT_TRUE(ok(sent)) << to_string(sent);
    ASSERT_TRUE(settles(ctx, origin)) << "the declined message's send never ended";
    ASSERT_TRUE(settles(ctx, completion)) << "the origin waits for good for its completion";
    ASSERT_TRUE(settles(ctx, target)) << "the target counter waits for good";
    EXPECT_EQ(origin.value(), 1u);
    EXPECT_EQ(completion.lost(), 1u);
    EXPECT_EQ(target.lost(), 1u);
    EXPECT_EQ(landing.headers, 0) << "the header handler saw a message that was declined";
    EXPECT_EQ(landing.completions, 0);

    // With requests free again the same message goes through.
    for (Request*& r : idle) release(ctx, r);
    Counter completion2;
    ASSERT_TRUE(
        ok(ctx.am_send(0, handler, {}, data.data(), data.size(), {nullptr, 0, &completion2})));
    ASSERT_TRUE(settles(ctx, completion2));
    EXPECT_EQ(completion2.value(), 1u);
    EXPECT_EQ(landing.completions, 1);
    EXPECT_EQ(landing.buffer, data);
}

// The limit is the number given, not rounded up to the pool's growth step
// (64 requests): before, 10 let 64 requests exist.
TEST_F(RequestLimit, TheLimitIsExact) {
    constexpr std::size_t exact = 10;
    params::registry().set("pml_base_max_requests", std::to_string(exact),
                           params::Source{params::Origin::api, "", 0});
    Context ctx = init();
    std::vector<Request*> idle(exact, nullptr);
    std::byte sink[8];
    for (Request*& r : idle)
        ASSERT_EQ(ctx.irecv(0, idle_tag, sink, sizeof sink, r), Status::success);
    Request* one_more = nullptr;
    EXPECT_EQ(ctx.irecv(0, idle_tag, sink, sizeof sink, one_more), Status::out_of_resource);
    if (one_more) release(ctx, one_more);
    for (Request*& r : idle) release(ctx, r);
}

}  // namespace
