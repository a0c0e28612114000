// Every protocol, whichever of send and receive is posted first: a message to
// ourselves and, in a job, to the next rank, of sizes on both sides of each
// protocol boundary (eager limit, pml_base_rndv_split_min, fragment sizes),
// sent contiguous (rdma rendezvous, split from rndv_split_min on) or from an
// iovec list (pipelined fragments), received exactly, through wildcards,
// truncated, or into an iovec list.  Each exchange is posted as a program
// does it (isend then irecv, or irecv then isend) and then only progressed.
//
// A send to ourselves of rndv_split_min bytes or more posted before its
// receive never completed: the whole split ran inside the receiver's offer of
// it, which then waited for a reply already received.
//
//   pml_rendezvous_order [--singleton] [gtest options]
// --singleton: a job of one, even under a launcher (ctest's own environment).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "pml/engine.hpp"
#include "tests/pml/byte_period.hpp"
#include "tests/pml/single_process.hpp"
#include "transit/transit.hpp"

namespace {

using namespace transit;
using namespace std::chrono_literals;

std::unique_ptr<Context> the_context;

Context& ctx() {
    return *the_context;
}

enum class Order { send_first, recv_first };

// How the receive is posted.
enum class Recv { exact, any_source, any_tag, any_both, truncating, iovec };

struct Variant {
    const char* name;
    bool send_iovec;  // pipelined fragments instead of an rdma rendezvous
    Recv recv;
};

constexpr std::array variants{
    Variant{"contiguous to exact", false, Recv::exact},
    Variant{"contiguous to any source", false, Recv::any_source},
    Variant{"contiguous to any tag", false, Recv::any_tag},
    Variant{"contiguous to any source and tag", false, Recv::any_both},
    Variant{"contiguous to truncating", false, Recv::truncating},
    Variant{"contiguous to iovec", false, Recv::iovec},
    Variant{"iovec to exact", true, Recv::exact},
    Variant{"iovec to any source and tag", true, Recv::any_both},
    Variant{"iovec to truncating", true, Recv::truncating},
};

constexpr std::byte fill{0xee};
constexpr std::size_t guard = 64;  // bytes past the receive's capacity that must stay untouched
constexpr auto deadline = 10s;     // one exchange; a hang becomes a failure

std::byte pattern(Rank src, std::size_t size, std::size_t i) {
    return static_cast<std::byte>((i * 131 + src * 17 + size * 7) & 0xff);
}

// One period of the pattern (it depends on the low byte of i only), or the
// `size` bytes of a shorter message.
transit::test::BytePeriod pattern_period(Rank src, std::size_t size) {
    transit::test::BytePeriod p{};
    for (std::size_t i = 0; i < std::min(size, p.size()); ++i) p[i] = pattern(src, size, i);
    return p;
}

// Sizes on both sides of every protocol boundary, the same on every rank (the
// eager limits to every rank: symmetric in the jobs this test runs).
std::vector<std::size_t> boundary_sizes() {
    pml::Engine& e = ctx().engine();
    std::vector<std::size_t> edges{e.settings().rndv_split_min, std::size_t{32} << 10,
                                   std::size_t{64} << 10, std::size_t{128} << 10,
                                   std::size_t{1} << 20};
    // Fragment sizes of the in-tree btls are among the edges (32k-128k).
    for (Rank r = 0; r < ctx().size(); ++r) edges.push_back(e.eager_message_limit(r));
    std::vector<std::size_t> sizes{0, 1, 4u << 20};
    for (std::size_t edge : edges)
        if (edge > 0) sizes.insert(sizes.end(), {edge - 1, edge, edge + 1});
    sizes.push_back(3 * (std::size_t{64} << 10) + 7);  // several fragments, a ragged tail
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    return sizes;
}

// Three pieces of unequal length over `base` (some empty for small sizes).
std::array<iovec, 3> split_in_three(std::byte* base, std::size_t size) {
    const std::size_t a = size / 3;
    const std::size_t b = size / 2;
    return {iovec{base, a}, iovec{base + a, b - a}, iovec{base + b, size - b}};
}

// Progresses until both requests are done (test() releases each): false
// after the deadline, with both still pending.
bool progress_until_done(Request*& s, Request*& r, RequestStatus& rst, Status& sst) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    RequestStatus st;
    while (s || r) {
        ctx().progress();
        bool done = false;
        if (s && ok(ctx().test(s, done, &st)) && done) sst = st.status;
        if (r) ctx().test(r, done, &rst);
        if (std::chrono::steady_clock::now() > end) return false;
    }
    return true;
}

// One message of `size` bytes from `src` to `dst` (either may be us, or both).
void exchange(Rank src, Rank dst, std::size_t size, const Variant& v, Order order,
              std::uint32_t tag) {
    const Rank me = ctx().rank();
    const bool sending = me == src;
    const bool receiving = me == dst;
    if (!sending && !receiving) {
        ctx().barrier();
        return;
    }
    const transit::test::BytePeriod period = pattern_period(src, size);
    std::vector<std::byte> out(size);
    transit::test::fill_with(out.data(), size, period);
    const std::size_t capacity = v.recv == Recv::truncating ? size / 2 : size;
    std::vector<std::byte> in(capacity + guard, fill);
    auto out_pieces = split_in_three(out.data(), size);
    auto in_pieces = split_in_three(in.data(), capacity);

    Request* s = nullptr;
    Request* r = nullptr;
    auto post_send = [&] {
        const Status st = v.send_iovec ? ctx().isendv(dst, tag, out_pieces, s)
                                       : ctx().isend(dst, tag, out.data(), size, s);
        ASSERT_TRUE(ok(st)) << to_string(st);
    };
    auto post_recv = [&] {
        const Rank from = v.recv == Recv::any_source || v.recv == Recv::any_both ? any_rank : src;
        const std::uint32_t t = v.recv == Recv::any_tag || v.recv == Recv::any_both ? any_tag : tag;
        const Status st = v.recv == Recv::iovec ? ctx().irecvv(from, t, in_pieces, r)
                                                : ctx().irecv(from, t, in.data(), capacity, r);
        ASSERT_TRUE(ok(st)) << to_string(st);
    };
    // Between ranks, the first side's post reaches the other before it posts.
    if (order == Order::send_first) {
        if (sending) post_send();
        if (src != dst) ctx().barrier();
        if (receiving) post_recv();
    } else {
        if (receiving) post_recv();
        if (src != dst) ctx().barrier();
        if (sending) post_send();
    }
    if (::testing::Test::HasFatalFailure()) std::_Exit(1);  // a request may be live

    RequestStatus rst;
    Status sst = Status::success;
    if (!progress_until_done(s, r, rst, sst)) {
        // The requests still hold our buffers: no way to go on safely.
        std::fprintf(stderr,
                     "[rank %u] FAIL: %zu bytes from rank %u to rank %u (%s, %s) not done after "
                     "%lld s: send %s, receive %s\n",
                     me, size, src, dst, v.name,
                     order == Order::send_first ? "send posted first" : "receive posted first",
                     static_cast<long long>(deadline.count()), s ? "pending" : "done",
                     r ? "pending" : "done");
        std::fflush(stderr);
        std::_Exit(1);
    }
    if (sending) {
        EXPECT_EQ(sst, Status::success);
    }
    if (!receiving) return;
    const Status want = capacity < size ? Status::truncated : Status::success;
    EXPECT_EQ(rst.status, want);
    EXPECT_EQ(rst.source, src);
    EXPECT_EQ(rst.tag, tag);
    EXPECT_EQ(rst.length, capacity);
    EXPECT_EQ(rst.sent_length, size);
    EXPECT_EQ(transit::test::first_wrong_byte(in.data(), capacity, period), capacity)
        << "first wrong byte";
    EXPECT_TRUE(std::all_of(in.begin() + static_cast<std::ptrdiff_t>(capacity), in.end(),
                            [](std::byte b) { return b == fill; }))
        << "wrote past the receive's capacity";
}

struct Case {
    Order order;
    std::size_t variant;
};

class RendezvousOrder : public ::testing::TestWithParam<Case> {
  protected:
    // Every size and variant from src to dst, all ranks in step.
    void run_all(Rank src, Rank dst) {
        const Case c = GetParam();
        const Variant& v = variants[c.variant];
        for (std::size_t size : boundary_sizes()) {
            SCOPED_TRACE(::testing::Message() << size << " bytes from rank " << src << " to rank "
                                              << dst << ", " << v.name);
            exchange(src, dst, size, v, c.order, 7);
        }
    }
};

TEST_P(RendezvousOrder, ToSelf) {
    run_all(ctx().rank(), ctx().rank());
}

TEST_P(RendezvousOrder, ToNextRank) {
    if (ctx().size() < 2) GTEST_SKIP() << "a job of one";
    const std::uint32_t n = ctx().size();
    // In turn, each rank sends to the next (one message in flight in the job);
    // the others take part in the barriers only.
    for (Rank src = 0; src < n; ++src) run_all(src, (src + 1) % n);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
    std::string name = info.param.order == Order::send_first ? "SendFirst_" : "RecvFirst_";
    for (const char* p = variants[info.param.variant].name; *p; ++p)
        name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
    return name;
}

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    for (Order o : {Order::send_first, Order::recv_first})
        for (std::size_t v = 0; v < variants.size(); ++v) cases.push_back({o, v});
    return cases;
}

// A rank that ends a test early must not send into the next test's wildcard
// receives of another rank.
class BarrierAfterEachTest : public ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo&) override {
        if (the_context) the_context->barrier();
    }
};

INSTANTIATE_TEST_SUITE_P(Pml, RendezvousOrder, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    bool singleton = false;
    for (int i = 1; i < argc; ++i)
        singleton = singleton || std::strcmp(argv[i], "--singleton") == 0;
    if (singleton) test::become_job_of_one();
    try {
        the_context = std::make_unique<Context>(init(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "pml_rendezvous_order: %s\n", e.what());
        return 2;
    }
    std::string sizes;
    for (std::size_t size : boundary_sizes()) sizes += " " + std::to_string(size);
    std::printf("rank %u: sizes%s\n", ctx().rank(), sizes.c_str());
    ::testing::UnitTest::GetInstance()->listeners().Append(
        new BarrierAfterEachTest);  // gtest takes ownership
    const int rc = RUN_ALL_TESTS();
    the_context.reset();
    return rc;
}
