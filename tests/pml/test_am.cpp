// Active messages: a header handler that places data at an offset it reads
// from the user header, completion handlers, and all three counters.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tests/pml/pml_env.hpp"

namespace {

using namespace transit;
using transit::test::ctx;
using transit::test::first_bad;
using transit::test::make_data;

struct Target {
    std::vector<std::byte> buffer = std::vector<std::byte>(8u << 20);
    std::uint64_t completions = 0;
    std::size_t last_length = 0;
    Rank last_source = any_rank;
    std::uint64_t last_offset = 0;
};

Target& target() {
    static Target t;
    return t;
}

// The user header holds the offset at which the data must land.
AmDestination place_at_offset(Context&, const AmInfo& info, void* arg) {
    auto* t = static_cast<Target*>(arg);
    std::uint64_t offset = 0;
    if (info.header.size() == sizeof offset)
        std::memcpy(&offset, info.header.data(), sizeof offset);
    t->last_offset = offset;
    return {t->buffer.data() + offset, nullptr, t};
}

void count_completion(Context&, Rank source, void*, std::size_t length, void* user) {
    auto* t = static_cast<Target*>(user);
    ++t->completions;
    t->last_length = length;
    t->last_source = source;
}

constexpr std::uint32_t handler_id = 3;

TEST(ActiveMessages, RegisterTwiceIsAnError) {
    static bool registered = false;
    if (!registered) {
        ASSERT_EQ(
            ctx().register_am_handler(handler_id, place_at_offset, count_completion, &target()),
            Status::success);
        registered = true;
    }
    EXPECT_EQ(ctx().register_am_handler(handler_id, place_at_offset, count_completion, &target()),
              Status::exists);
    EXPECT_EQ(
        ctx().register_am_handler(Context::am_max_handlers, place_at_offset, nullptr, nullptr),
        Status::bad_param);
}

// Each rank sends to the next; offsets and sizes cover eager and rendezvous.
TEST(ActiveMessages, HeaderHandlerPlacesDataWithAllCounters) {
    const Rank me = ctx().rank();
    const std::uint32_t n = ctx().size();
    const Rank to = (me + 1) % n;
    // The target counter lives at the target: exchange references with tagged messages.
    Counter target_counter;
    CounterRef mine = ctx().counter_ref(target_counter);
    // Whoever targets us (the rank before) needs our ref; we need the next rank's.
    Request* r2;
    CounterRef next_ref = 0;
    ASSERT_TRUE(ok(ctx().irecv(to, 71, &next_ref, sizeof next_ref, r2)));
    ASSERT_EQ(ctx().send((me + n - 1) % n, 71, &mine, sizeof mine), Status::success);
    ASSERT_EQ(ctx().wait(r2), Status::success);
    const std::uint64_t before = target().completions;  // before anyone may send
    ASSERT_TRUE(ctx().barrier() == Status::success);

    // Each message gets its own odd offset in the target buffer: AMs are not
    // ordered, so overlapping ones could land in any order.
    const std::size_t sizes[] = {0, 16, 1000, 70000, 3u << 20};
    std::uint64_t offsets[std::size(sizes)];
    Counter origin, completion;
    std::vector<std::vector<std::byte>> data;
    std::uint64_t at = 12345;
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
        data.push_back(make_data(me, sizes[i], 5));
        offsets[i] = at;
        at += sizes[i] + 7;
    }
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
        std::uint64_t off = offsets[i];
        ASSERT_TRUE(
            ok(ctx().am_send(to, handler_id, {reinterpret_cast<const std::byte*>(&off), sizeof off},
                             data[i].data(), sizes[i], {&origin, next_ref, &completion})));
    }
    EXPECT_EQ(ctx().counter_wait(origin, std::size(sizes)), Status::success);
    EXPECT_EQ(ctx().counter_wait(completion, std::size(sizes)), Status::success);
    EXPECT_EQ(ctx().counter_wait(target_counter, std::size(sizes)), Status::success);
    EXPECT_EQ(ctx().counter_get(origin), std::size(sizes));
    EXPECT_EQ(ctx().counter_get(completion), std::size(sizes));
    EXPECT_EQ(ctx().counter_get(target_counter), std::size(sizes));
    EXPECT_EQ(target().completions - before, std::size(sizes));
    ASSERT_EQ(ctx().barrier(), Status::success);
    const Rank from = (me + n - 1) % n;
    for (std::size_t i = 0; i < std::size(sizes); ++i)
        EXPECT_EQ(first_bad(target().buffer.data() + offsets[i], from, sizes[i], 5), sizes[i])
            << "message " << i << " of " << sizes[i] << " bytes";
    EXPECT_EQ(target().last_source, from);
}

TEST(ActiveMessages, HeaderHandlerMayDiscard) {
    static bool registered = false;
    static std::uint64_t seen = 0;
    if (!registered) {
        ASSERT_EQ(ctx().register_am_handler(
                      4, [](Context&, const AmInfo&, void*) { return AmDestination{}; },
                      [](Context&, Rank, void* buf, std::size_t, void*) {
                          if (!buf) ++seen;
                      },
                      nullptr),
                  Status::success);
        registered = true;
    }
    auto data = make_data(ctx().rank(), 200000);
    Counter done;
    const std::uint64_t before = seen;
    ASSERT_TRUE(
        ok(ctx().am_send(ctx().rank(), 4, {}, data.data(), data.size(), {nullptr, 0, &done})));
    ASSERT_TRUE(ok(ctx().am_send(ctx().rank(), 4, {}, data.data(), 10, {nullptr, 0, &done})));
    EXPECT_EQ(ctx().counter_wait(done, 2), Status::success);
    EXPECT_EQ(seen - before, 2u);
}

// A server that names a counter per client releases the ref when the client
// goes: a message naming it afterwards is not delivered and its origin counts
// it lost; the counter, named again, gets a new ref.
TEST(ActiveMessages, AReleasedCounterRefNamesNothing) {
    static bool registered = false;
    static int runs = 0;
    if (!registered) {
        ASSERT_EQ(ctx().register_am_handler(
                      6,
                      [](Context&, const AmInfo&, void*) {
                          ++runs;
                          return AmDestination{};
                      },
                      nullptr, nullptr),
                  Status::success);
        registered = true;
    }
    const Rank me = ctx().rank();
    Counter target, completion;
    const CounterRef ref = ctx().counter_ref(target);
    ASSERT_NE(ref, 0u);
    const std::byte data[8]{};
    ASSERT_TRUE(ok(ctx().am_send(me, 6, {}, data, sizeof data, {nullptr, ref, &completion})));
    ASSERT_EQ(ctx().counter_wait(completion, 1), Status::success);
    EXPECT_EQ(target.value(), 1u);
    const int runs_before = runs;

    EXPECT_EQ(ctx().release_counter_ref(ref), Status::success);
    EXPECT_EQ(ctx().release_counter_ref(ref), Status::bad_param) << "released already";
    EXPECT_EQ(ctx().release_counter_ref(0), Status::bad_param);
    ASSERT_TRUE(ok(ctx().am_send(me, 6, {}, data, sizeof data, {nullptr, ref, &completion})));
    EXPECT_EQ(ctx().counter_wait(completion, 2), Status::error) << "never counts: lost";
    EXPECT_EQ(completion.lost(), 1u);
    EXPECT_EQ(target.value(), 1u);
    EXPECT_EQ(runs, runs_before) << "a message naming a released ref is not delivered";

    const CounterRef again = ctx().counter_ref(target);
    EXPECT_NE(again, ref);
    ASSERT_TRUE(ok(ctx().am_send(me, 6, {}, data, sizeof data, {nullptr, again, &completion})));
    EXPECT_EQ(ctx().counter_wait(target, 2), Status::success);
    EXPECT_EQ(ctx().release_counter_ref(again), Status::success);
}

// A message for a handler nobody registered is not delivered: the origin's
// completion counter and the target counter count it lost, never done (a
// silent success would tell the origin its data arrived).  Eager and
// rendezvous sizes.
TEST(ActiveMessages, AMessageForAnUnregisteredHandlerIsCountedLost) {
    const Rank me = ctx().rank();
    constexpr std::uint32_t nobody = 11;
    for (std::size_t size : {std::size_t{8}, std::size_t{1} << 20}) {
        Counter target, completion;
        const CounterRef ref = ctx().counter_ref(target);
        ASSERT_NE(ref, 0u);
        const std::vector<std::byte> data(size);
        ASSERT_TRUE(ok(
            ctx().am_send(me, nobody, {}, data.data(), data.size(), {nullptr, ref, &completion})));
        EXPECT_EQ(ctx().counter_wait(completion, 1), Status::error) << size << " B: never done";
        EXPECT_EQ(completion.value(), 0u) << size << " B";
        EXPECT_EQ(completion.lost(), 1u) << size << " B";
        EXPECT_EQ(target.value(), 0u) << size << " B";
        EXPECT_EQ(target.lost(), 1u) << size << " B";
        EXPECT_EQ(ctx().release_counter_ref(ref), Status::success);
    }
}

}  // namespace

namespace {

using namespace transit;
using transit::test::ctx;

// With pml_base_progress_thread, a rank busy computing (no Transit call) still
// receives and completes active messages: rank 1 spins without calling
// Transit until the completion handler of a 1 MiB message has run, which only
// its progress thread can make happen.  Without the thread nothing moves: rank
// 1 gives up after a minute and fails, then rank 0's message completes.
TEST(ActiveMessages, ProgressThreadServesAComputingRank) {
    if (!std::getenv("TRANSIT_TEST_PROGRESS_THREAD") || ctx().size() < 2)
        GTEST_SKIP() << "not the progress-thread variant";
    static std::vector<std::byte> sink(1u << 20);
    static std::atomic<bool> delivered{false};
    static bool registered = false;
    if (!registered) {
        ASSERT_EQ(ctx().register_am_handler(
                      5,
                      [](Context&, const AmInfo&, void*) {
                          return AmDestination{sink.data(),
                                               [](Context&, Rank, void*, std::size_t, void*) {
                                                   delivered.store(true, std::memory_order_release);
                                               },
                                               nullptr};
                      },
                      nullptr, nullptr),
                  Status::success);
        registered = true;
    }
    delivered.store(false, std::memory_order_relaxed);
    ASSERT_EQ(ctx().barrier(), Status::success);
    if (ctx().rank() == 1) {
        // "Computing": no Transit call until the message is in.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!delivered.load(std::memory_order_acquire) &&
               std::chrono::steady_clock::now() < give_up)
            std::this_thread::yield();
        EXPECT_TRUE(delivered.load(std::memory_order_acquire))
            << "the progress thread did not serve the message while the rank computed";
    } else if (ctx().rank() == 0) {
        std::vector<std::byte> data(sink.size(), std::byte{1});
        Counter done;
        ASSERT_TRUE(ok(ctx().am_send(1, 5, {}, data.data(), data.size(), {nullptr, 0, &done})));
        EXPECT_EQ(ctx().counter_wait(done, 1), Status::success);
    }
}

}  // namespace
