// The pml's streaming path: a rendezvous moved in fragments, over a transport
// with no put or get and a small bounded queue, as a vendor's would be.  The
// ctest entries (CMakeLists.txt) run it with two ranks over btl/unix (the
// example third-party btl, contrib/example-btl) with its fragment size and
// send buffer set, alone and beside busy processes (streaming.sh); the stress
// entry draws those from a seed it prints.
//
//   EverySize      0 B to 16 MiB: every power of two one way and odd sizes the
//                  other way, at once
//   Window         many large messages in flight both ways
//   RandomTraffic  seeded (TRANSIT_TEST_SEED, printed): rounds of random sizes,
//                  counts and tags both ways
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tests/pml/pml_env.hpp"

namespace {

using namespace transit;
using transit::test::ctx;
using transit::test::first_bad;
using transit::test::pattern;

constexpr std::size_t max_size = 16u << 20;

Rank other() {
    return ctx().rank() == 0 ? 1 : 0;
}

void fill(std::vector<std::byte>& buf, Rank src, std::size_t size, std::uint32_t salt) {
    for (std::size_t i = 0; i < size; ++i) buf[i] = pattern(src, size, i, salt);
}

// One message each way at once: `mine` bytes from us, `theirs` from the other rank.
void exchange(std::size_t mine, std::size_t theirs, std::uint32_t tag, std::vector<std::byte>& out,
              std::vector<std::byte>& in) {
    fill(out, ctx().rank(), mine, tag);
    std::fill_n(in.begin(), std::min(in.size(), theirs + 1), std::byte{0xee});
    Request* r = nullptr;
    Request* s = nullptr;
    ASSERT_TRUE(ok(ctx().irecv(other(), tag, in.data(), theirs, r)));
    ASSERT_TRUE(ok(ctx().isend(other(), tag, out.data(), mine, s)));
    RequestStatus st;
    ASSERT_EQ(ctx().wait(s), Status::success) << "sending " << mine << " bytes";
    ASSERT_EQ(ctx().wait(r, &st), Status::success) << "receiving " << theirs << " bytes";
    EXPECT_EQ(st.length, theirs);
    EXPECT_EQ(first_bad(in.data(), other(), theirs, tag), theirs) << "size " << theirs;
    if (theirs < in.size()) {
        EXPECT_EQ(in[theirs], std::byte{0xee}) << "wrote past " << theirs << " bytes";
    }
}

TEST(Streaming, EverySize) {
    ASSERT_EQ(ctx().size(), 2u) << "run with two ranks";
    // Rank 0 sends the powers of two, rank 1 odd sizes between them.
    std::vector<std::size_t> powers{0};
    std::vector<std::size_t> odd{0};
    for (std::size_t p = 1; p <= max_size; p <<= 1) {
        powers.push_back(p);
        odd.push_back(std::min(p + p / 2 + 1, max_size - 1) | 1);
    }
    std::vector<std::byte> out(max_size + 1);
    std::vector<std::byte> in(max_size + 1);
    for (std::size_t i = 0; i < powers.size(); ++i) {
        const bool zero = ctx().rank() == 0;
        exchange(zero ? powers[i] : odd[i], zero ? odd[i] : powers[i],
                 static_cast<std::uint32_t>(i), out, in);
        if (HasFatalFailure()) return;
    }
}

TEST(Streaming, Window) {
    constexpr std::size_t count = 16;
    constexpr std::size_t size = (1u << 20) + 3;
    std::vector<std::vector<std::byte>> out(count, std::vector<std::byte>(size));
    std::vector<std::vector<std::byte>> in(count, std::vector<std::byte>(size));
    std::vector<Request*> reqs(2 * count);
    for (std::size_t i = 0; i < count; ++i) {
        const auto tag = static_cast<std::uint32_t>(100 + i);
        fill(out[i], ctx().rank(), size, tag);
        ASSERT_TRUE(ok(ctx().irecv(other(), tag, in[i].data(), size, reqs[2 * i])));
        ASSERT_TRUE(ok(ctx().isend(other(), tag, out[i].data(), size, reqs[2 * i + 1])));
    }
    ASSERT_EQ(ctx().wait_all(reqs), Status::success);
    for (std::size_t i = 0; i < count; ++i)
        EXPECT_EQ(first_bad(in[i].data(), other(), size, static_cast<std::uint32_t>(100 + i)), size)
            << "message " << i;
}

// Both ranks draw the same plan from the seed: each round, each rank sends a
// few messages of random sizes (spread over every scale up to 4 MiB) under
// random tags, and receives the other's.
TEST(Streaming, RandomTraffic) {
    std::uint32_t seed = 0;
    if (ctx().rank() == 0) {
        const char* env = std::getenv("TRANSIT_TEST_SEED");
        seed = env ? static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10))
                   : std::random_device{}();
        std::printf("RandomTraffic: seed %u (rerun with TRANSIT_TEST_SEED=%u)\n", seed, seed);
        std::fflush(stdout);
        ASSERT_EQ(ctx().send(1, 1000, &seed, sizeof seed), Status::success);
    } else {
        ASSERT_EQ(ctx().recv(0, 1000, &seed, sizeof seed), Status::success);
    }
    std::mt19937 plan(seed);
    auto random_size = [&plan] {
        const std::uint32_t scale = plan() % 23;  // up to 4 MiB
        return static_cast<std::size_t>(plan() % ((std::size_t{1} << scale) + 1));
    };
    constexpr int rounds = 12;
    constexpr std::size_t most = 8;
    for (int round = 0; round < rounds; ++round) {
        // What each rank sends this round: sizes[rank][k] under tags[rank][k].
        std::vector<std::size_t> sizes[2];
        std::vector<std::uint32_t> tags[2];
        for (int r = 0; r < 2; ++r) {
            const std::size_t n = 1 + plan() % most;
            for (std::size_t k = 0; k < n; ++k) {
                sizes[r].push_back(random_size());
                tags[r].push_back(2000 + static_cast<std::uint32_t>(round * 16 + k));
            }
        }
        const Rank me = ctx().rank();
        const auto& send_sizes = sizes[me];
        const auto& recv_sizes = sizes[other()];
        std::vector<std::vector<std::byte>> out(send_sizes.size());
        std::vector<std::vector<std::byte>> in(recv_sizes.size());
        std::vector<Request*> reqs;
        for (std::size_t k = 0; k < recv_sizes.size(); ++k) {
            in[k].resize(recv_sizes[k]);
            reqs.push_back(nullptr);
            ASSERT_TRUE(ok(
                ctx().irecv(other(), tags[other()][k], in[k].data(), recv_sizes[k], reqs.back())));
        }
        for (std::size_t k = 0; k < send_sizes.size(); ++k) {
            out[k].resize(send_sizes[k]);
            fill(out[k], me, send_sizes[k], tags[me][k]);
            reqs.push_back(nullptr);
            ASSERT_TRUE(
                ok(ctx().isend(other(), tags[me][k], out[k].data(), send_sizes[k], reqs.back())));
        }
        ASSERT_EQ(ctx().wait_all(reqs), Status::success) << "round " << round << ", seed " << seed;
        for (std::size_t k = 0; k < recv_sizes.size(); ++k)
            ASSERT_EQ(first_bad(in[k].data(), other(), recv_sizes[k], tags[other()][k]),
                      recv_sizes[k])
                << "round " << round << " message " << k << " of " << recv_sizes[k]
                << " bytes, seed " << seed;
    }
}

}  // namespace
