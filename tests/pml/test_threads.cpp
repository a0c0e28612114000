// ThreadLevel::multiple: four threads per rank calling the API at once.  Each
// thread exchanges tagged messages (eager and rendezvous sizes) with its twin
// on every other rank under its own tag while a fifth thread receives on a
// shared tag with a wildcard source; requests are waited by threads that did
// not post them; active messages and fetch-adds on one counter go from every
// thread of every rank, the counter checked exactly at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "transit/transit.hpp"

namespace {

using namespace transit;

constexpr std::uint32_t threads = 4;
const std::size_t sizes[] = {0, 100, 3000, 30000, 300000, 2u << 20};

std::unique_ptr<Context> the_context;
Context& ctx() {
    return *the_context;
}

std::byte pattern(Rank src, std::uint32_t thread, std::size_t size, std::size_t i) {
    return static_cast<std::byte>((i * 131 + src * 17 + thread * 29 + size * 7) & 0xff);
}
std::vector<std::byte> make_data(Rank src, std::uint32_t thread, std::size_t size) {
    std::vector<std::byte> v(size);
    for (std::size_t i = 0; i < size; ++i) v[i] = pattern(src, thread, size, i);
    return v;
}
bool matches(const std::vector<std::byte>& v, Rank src, std::uint32_t thread) {
    for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] != pattern(src, thread, v.size(), i)) return false;
    return true;
}

// Runs f(t) on `n` threads and joins them.
template <typename F>
void on_threads(std::uint32_t n, F f) {
    std::vector<std::thread> ts;
    for (std::uint32_t t = 0; t < n; ++t) ts.emplace_back(f, t);
    for (std::thread& t : ts) t.join();
}

// Finishes a request by test + progress (another way than wait, from this thread).
Status poll(Request*& r, RequestStatus& st) {
    bool done = false;
    Status s = Status::success;
    while (!done) {
        s = ctx().test(r, done, &st);
        if (!done) ctx().progress();
    }
    return s;
}

TEST(Threads, GrantedLevelIsMultiple) {
    EXPECT_EQ(ctx().thread_level(), ThreadLevel::multiple);
}

constexpr std::uint32_t twin_tag = 100;      // + thread
constexpr std::uint32_t wildcard_tag = 200;  // every thread of every rank sends one

// Each thread: every size, to and from its twin on every other rank; half the
// threads wait, the others test and progress.  A fifth thread receives one
// message from every thread of every other rank with a wildcard source.
TEST(Threads, TwinsExchangeWhileAWildcardReceiverCollects) {
    const Rank me = ctx().rank();
    const std::uint32_t n = ctx().size();
    std::atomic<int> failures{0};
    std::thread wildcard([&] {
        const std::size_t expected = (n - 1) * threads;
        std::vector<std::uint32_t> got(expected, 0xffffffffu);
        std::vector<Request*> reqs(expected);
        std::vector<RequestStatus> st(expected);
        for (std::size_t i = 0; i < expected; ++i)
            if (!ok(ctx().irecv(any_rank, wildcard_tag, &got[i], sizeof got[i], reqs[i])))
                ++failures;
        if (!ok(ctx().wait_all(reqs, st))) ++failures;
        std::vector<int> seen(n * threads, 0);
        for (std::size_t i = 0; i < expected; ++i) {
            const Rank r = got[i] / threads;
            if (r >= n || r == me || st[i].source != r) {
                ++failures;
                continue;
            }
            ++seen[got[i]];
        }
        for (Rank r = 0; r < n; ++r)
            for (std::uint32_t t = 0; t < threads; ++t)
                if (r != me && seen[r * threads + t] != 1) ++failures;
    });
    on_threads(threads, [&](std::uint32_t t) {
        const std::uint32_t id = me * threads + t;
        for (Rank q = 0; q < n; ++q)
            if (q != me && !ok(ctx().send(q, wildcard_tag, &id, sizeof id))) ++failures;
        for (std::size_t size : sizes) {
            const auto data = make_data(me, t, size);
            std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(size));
            std::vector<Request*> reqs;
            for (Rank q = 0; q < n; ++q) {
                if (q == me) continue;
                Request* r;
                if (!ok(ctx().irecv(q, twin_tag + t, in[q].data(), size, r))) ++failures;
                reqs.push_back(r);
                if (!ok(ctx().isend(q, twin_tag + t, data.data(), size, r))) ++failures;
                reqs.push_back(r);
            }
            for (Request*& r : reqs) {
                RequestStatus st;
                const Status s = t % 2 ? poll(r, st) : ctx().wait(r, &st);
                if (!ok(s)) ++failures;
            }
            for (Rank q = 0; q < n; ++q)
                if (q != me && !matches(in[q], q, t)) {
                    ADD_FAILURE() << "thread " << t << ": " << size << " bytes from rank " << q;
                    ++failures;
                }
        }
    });
    wildcard.join();
    EXPECT_EQ(failures.load(), 0);
}

constexpr std::uint32_t handoff_tag = 300;  // + thread

// A thread posts a receive and a send; another thread waits for both.
TEST(Threads, WaitOnRequestsPostedByAnotherThread) {
    const Rank me = ctx().rank();
    const std::uint32_t n = ctx().size();
    const Rank next = (me + 1) % n, prev = (me + n - 1) % n;
    std::atomic<int> failures{0};
    on_threads(threads / 2, [&](std::uint32_t t) {
        for (std::size_t size : sizes) {
            const auto data = make_data(me, t, size);
            std::vector<std::byte> in(size);
            std::promise<std::pair<Request*, Request*>> posted;
            std::thread waiter([&, fut = posted.get_future()]() mutable {
                auto [recv, send] = fut.get();
                RequestStatus st;
                if (!ok(ctx().wait(recv, &st)) || st.source != prev || st.length != size)
                    ++failures;
                if (!ok(ctx().wait(send))) ++failures;
            });
            Request *recv = nullptr, *send = nullptr;
            if (!ok(ctx().irecv(prev, handoff_tag + t, in.data(), size, recv))) ++failures;
            if (!ok(ctx().isend(next, handoff_tag + t, data.data(), size, send))) ++failures;
            posted.set_value({recv, send});
            waiter.join();
            if (!matches(in, prev, t)) {
                ADD_FAILURE() << "thread " << t << ": " << size << " bytes from rank " << prev;
                ++failures;
            }
        }
    });
    EXPECT_EQ(failures.load(), 0);
}

constexpr std::uint32_t am_handler = 9;
constexpr std::uint32_t am_per_thread = 20;
std::atomic<std::uint64_t> am_completions{0};

AmDestination am_discard(Context&, const AmInfo&, void*) {
    return {};
}
void am_count(Context&, Rank, void*, std::size_t, void*) {
    am_completions.fetch_add(1);
}

// Every thread sends active messages (eager and rendezvous) to every other
// rank and waits for their completion counter; the handlers count them all.
TEST(Threads, ActiveMessagesFromEveryThread) {
    const Rank me = ctx().rank();
    const std::uint32_t n = ctx().size();
    ASSERT_EQ(ctx().register_am_handler(am_handler, am_discard, am_count, nullptr),
              Status::success);
    ASSERT_EQ(ctx().barrier(), Status::success);
    std::atomic<int> failures{0};
    on_threads(threads, [&](std::uint32_t t) {
        Counter done;
        const auto data = make_data(me, t, 100000);
        std::uint64_t sent = 0;
        for (std::uint32_t i = 0; i < am_per_thread; ++i)
            for (Rank q = 0; q < n; ++q) {
                if (q == me) continue;
                const std::size_t len = i % 2 ? data.size() : 64;
                if (!ok(ctx().am_send(q, am_handler, {}, data.data(), len, {nullptr, 0, &done})))
                    ++failures;
                ++sent;
            }
        if (ctx().counter_wait(done, sent) != Status::success) ++failures;
    });
    EXPECT_EQ(failures.load(), 0);
    ASSERT_EQ(ctx().barrier(), Status::success);
    EXPECT_EQ(am_completions.load(), std::uint64_t{threads} * am_per_thread * (n - 1));
}

constexpr std::uint32_t key_tag = 400;
constexpr std::uint32_t fetched_tag = 401;
constexpr std::uint32_t adds_per_thread = 200;

// Every thread of every rank fetch-adds 1 to one counter at rank 0, flushing
// every 50: the counter ends at the exact total, and the values fetched are
// each of 0 .. total-1 once.
TEST(Threads, ConcurrentFetchAddOnOneCounter) {
    const Rank me = ctx().rank();
    const std::uint32_t n = ctx().size();
    const std::uint64_t total = std::uint64_t{n} * threads * adds_per_thread;
    auto* counter = static_cast<std::uint64_t*>(ctx().mem_alloc(64));
    ASSERT_NE(counter, nullptr);
    *counter = 0;
    MemoryRegion* region = nullptr;
    std::vector<std::byte> key_bytes(256);
    std::uint64_t key_len = 0;
    if (me == 0) {
        ASSERT_EQ(ctx().register_memory(counter, 64, region), Status::success);
        const auto packed = ctx().pack_key(region);
        ASSERT_LE(packed.size(), key_bytes.size());
        std::copy(packed.begin(), packed.end(), key_bytes.begin());
        key_len = packed.size();
        for (Rank q = 1; q < n; ++q) {
            ASSERT_EQ(ctx().send(q, key_tag, &key_len, sizeof key_len), Status::success);
            ASSERT_EQ(ctx().send(q, key_tag, key_bytes.data(), key_len), Status::success);
        }
    } else {
        ASSERT_EQ(ctx().recv(0, key_tag, &key_len, sizeof key_len), Status::success);
        ASSERT_EQ(ctx().recv(0, key_tag, key_bytes.data(), key_len), Status::success);
    }
    RemoteKey* key = nullptr;
    ASSERT_EQ(ctx().unpack_key({key_bytes.data(), key_len}, key), Status::success);
    ASSERT_EQ(ctx().barrier(), Status::success);

    std::vector<std::uint64_t> fetched(threads * adds_per_thread, ~std::uint64_t{0});
    std::atomic<int> failures{0};
    on_threads(threads, [&](std::uint32_t t) {
        std::uint64_t* mine = fetched.data() + t * adds_per_thread;
        for (std::uint32_t i = 0; i < adds_per_thread; ++i) {
            if (!ok(ctx().atomic(0, AtomicOp::add, AtomicWidth::bits64, key, 0, 1, &mine[i])))
                ++failures;
            if (i % 50 == 49 && !ok(ctx().flush(0))) ++failures;
        }
    });
    EXPECT_EQ(failures.load(), 0);
    ASSERT_EQ(ctx().fence(), Status::success);

    if (me == 0) {
        EXPECT_EQ(std::atomic_ref<std::uint64_t>(*counter).load(), total);
        std::vector<std::uint64_t> all(fetched);
        for (Rank q = 1; q < n; ++q) {
            std::vector<std::uint64_t> theirs(fetched.size());
            ASSERT_EQ(ctx().recv(q, fetched_tag, theirs.data(), theirs.size() * sizeof theirs[0]),
                      Status::success);
            all.insert(all.end(), theirs.begin(), theirs.end());
        }
        std::sort(all.begin(), all.end());
        for (std::uint64_t i = 0; i < total; ++i)
            if (all[i] != i) {
                ADD_FAILURE() << "fetched values: " << i << " is missing or repeated";
                break;
            }
    } else {
        ASSERT_EQ(ctx().send(0, fetched_tag, fetched.data(), fetched.size() * sizeof fetched[0]),
                  Status::success);
    }
    ASSERT_EQ(ctx().barrier(), Status::success);
    ctx().release_key(key);
    if (region) {
        EXPECT_EQ(ctx().deregister_memory(region), Status::success);
    }
    ctx().mem_free(counter);
}

// A pml barrier after each test, so no rank's next test meets the last one's
// traffic still on its way.
class BarrierAfterEachTest : public testing::EmptyTestEventListener {
    void OnTestEnd(const testing::TestInfo&) override {
        if (the_context) the_context->barrier();
    }
};

class ContextEnvironment : public testing::Environment {
    void SetUp() override {
        the_context = std::make_unique<Context>(init(ThreadLevel::multiple));
        testing::UnitTest::GetInstance()->listeners().Append(new BarrierAfterEachTest);
    }
    void TearDown() override { the_context.reset(); }
};

[[maybe_unused]] testing::Environment* const env =
    testing::AddGlobalTestEnvironment(new ContextEnvironment);  // gtest takes ownership

}  // namespace
