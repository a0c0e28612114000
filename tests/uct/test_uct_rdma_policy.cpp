// The device-independent parts of btl/uct's native RDMA: the btl_uct_rdma
// parameters, the size threshold, the remote-key cache and the registration
// handle that carries a UCT remote key.  No UCX needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <functional>
#include <vector>

#include "components/uct/uct_rdma_policy.hpp"
#include "components/uct/uct_wire.hpp"
#include "tests/params/params_fixture.hpp"

namespace transit::uct {
namespace {

TEST(UctRdmaMode, ParsesTheThreeChoicesOnly) {
    EXPECT_EQ(parse_rdma_mode("auto"), RdmaMode::automatic);
    EXPECT_EQ(parse_rdma_mode("am"), RdmaMode::am);
    EXPECT_EQ(parse_rdma_mode("transport"), RdmaMode::transport);
    EXPECT_EQ(parse_rdma_mode(""), std::nullopt);
    EXPECT_EQ(parse_rdma_mode("AM"), std::nullopt);
    EXPECT_EQ(parse_rdma_mode("native"), std::nullopt);
}

// Native put/get/atomics only where the target's device checks the key: the
// paths on which the target cannot refuse a stale or forged key are declined,
// each with a reason that says why.
TEST(UctNativeRefusal, PathsWhereTheTargetCannotCheckTheKeyAreRefused) {
    for (const char* tl : {"posix", "sysv", "self", "cma", "knem", "xpmem", "tcp"}) {
        // Whatever their memory domain claims.
        const auto why = native_refusal(tl, true, 16);
        ASSERT_TRUE(why.has_value()) << tl;
        EXPECT_NE(why->find("cannot refuse a stale or forged key"), std::string_view::npos)
            << tl << ": " << *why;
    }
}

TEST(UctNativeRefusal, DeviceCheckedKeysAreAllowedOnlyWithARealKey) {
    EXPECT_EQ(native_refusal("rc_verbs", true, 16), std::nullopt);
    EXPECT_EQ(native_refusal("rc_mlx5", true, 16), std::nullopt);
    EXPECT_EQ(native_refusal("dc_mlx5", true, 16), std::nullopt);
    // A memory domain that registers nothing, or packs an empty key: nothing checks.
    EXPECT_NE(native_refusal("rc_verbs", false, 16), std::nullopt);
    EXPECT_NE(native_refusal("rc_verbs", true, 0), std::nullopt);
    // A transport not known to check keys in its device.
    const auto ud = native_refusal("ud_verbs", true, 16);
    ASSERT_TRUE(ud.has_value());
    EXPECT_NE(ud->find("not known to check remote keys"), std::string_view::npos) << *ud;
}

class UctRdmaParams : public params::test::ParamsTest {};

TEST_F(UctRdmaParams, DefaultsAndValidValues) {
    params::Registry& r = params::registry();
    r.add_all("btl", "uct", rdma_params);
    EXPECT_EQ(r.get("btl_uct_rdma").as_string(), "auto");
    EXPECT_EQ(r.get("btl_uct_rdma_min_size").as_unsigned(), 0u);
    r.set("btl_uct_rdma", "transport", {params::Origin::api});
    r.set("btl_uct_rdma_min_size", "256k", {params::Origin::api});
    EXPECT_EQ(parse_rdma_mode(r.get("btl_uct_rdma").as_string()), RdmaMode::transport);
    EXPECT_EQ(r.get("btl_uct_rdma_min_size").as_unsigned(), 256u * 1024);
}

TEST_F(UctRdmaParams, InvalidValuesAreRefusedWithTheChoices) {
    params::Registry& r = params::registry();
    r.add_all("btl", "uct", rdma_params);
    const std::string mode =
        params::test::error_text([&] { r.set("btl_uct_rdma", "rdma", {params::Origin::api}); });
    params::test::expect_contains(mode, {"btl_uct_rdma", "rdma", "auto", "am", "transport"});
    const std::string size = params::test::error_text(
        [&] { r.set("btl_uct_rdma_min_size", "lots", {params::Origin::api}); });
    params::test::expect_contains(size, {"btl_uct_rdma_min_size", "lots"});
    EXPECT_EQ(r.get("btl_uct_rdma").as_string(), "auto") << "a refused value must not stick";
}

// --- the remote-key cache ------------------------------------------------------------

struct Released {
    std::vector<int> values;
    void operator()(int& v) { values.push_back(v); }
};

TEST(UctRkeyCache, FindsWhatWasInserted) {
    RkeyCache<int, 4> cache;
    Released released;
    EXPECT_EQ(cache.find(7), nullptr);
    int* stored = cache.insert(7, 70, std::ref(released));
    ASSERT_NE(stored, nullptr);
    EXPECT_EQ(*stored, 70);
    ASSERT_NE(cache.find(7), nullptr);
    EXPECT_EQ(*cache.find(7), 70);
    EXPECT_EQ(cache.find(8), nullptr);
    EXPECT_EQ(cache.size(), 1u);
    EXPECT_TRUE(released.values.empty());
}

TEST(UctRkeyCache, EvictsTheLeastRecentlyUsedAndReleasesIt) {
    RkeyCache<int, 16> cache;
    Released released;
    for (int k = 0; k < 16; ++k)
        cache.insert(static_cast<std::uint64_t>(k), 100 + k, std::ref(released));
    EXPECT_EQ(cache.size(), 16u);
    EXPECT_TRUE(released.values.empty()) << "nothing is released while there is room";
    // Key 0 used again: key 1 is now the least recently used.
    ASSERT_NE(cache.find(0), nullptr);
    cache.insert(16, 116, std::ref(released));
    ASSERT_EQ(released.values, std::vector<int>{101});
    EXPECT_EQ(cache.find(1), nullptr);
    ASSERT_NE(cache.find(0), nullptr);
    EXPECT_EQ(*cache.find(16), 116);
    EXPECT_EQ(cache.size(), 16u);
    EXPECT_EQ(cache.evictions(), 1u);
}

TEST(UctRkeyCache, ClearReleasesEveryEntryOnce) {
    RkeyCache<int, 16> cache;
    Released released;
    for (int k = 0; k < 20; ++k) cache.insert(static_cast<std::uint64_t>(k), k, std::ref(released));
    ASSERT_EQ(released.values.size(), 4u);  // 0..3 evicted
    cache.clear(std::ref(released));
    EXPECT_EQ(released.values.size(), 20u) << "every value inserted is released exactly once";
    std::vector<int> sorted = released.values;
    std::sort(sorted.begin(), sorted.end());
    for (int k = 0; k < 20; ++k) EXPECT_EQ(sorted[static_cast<std::size_t>(k)], k);
    EXPECT_EQ(cache.size(), 0u);
    cache.clear(std::ref(released));
    EXPECT_EQ(released.values.size(), 20u) << "a second clear releases nothing";
}

// --- registration handles ------------------------------------------------------------

TEST(UctHandle, PlainHandleCarriesNoKey) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    const PackedHandle h{5, 0, 0x1000, 64, btl::reg_flags::access_any, 0};
    ASSERT_EQ(pack_handle(buf, h, md_tag("cma"), {}, false), sizeof(PackedHandle));
    PackedHandle back;
    std::memcpy(&back, buf.data(), sizeof back);
    EXPECT_EQ(back.magic, handle_magic);
    EXPECT_EQ(back.key, 5u);
    EXPECT_EQ(back.base, 0x1000u);
    EXPECT_EQ(back.len, 64u);
    EXPECT_EQ(handle_rkey(buf.data(), md_tag("cma"), 0), nullptr);
}

TEST(UctHandle, NativeHandleRoundTripsItsKey) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    std::vector<std::byte> rkey(40);
    for (std::size_t i = 0; i < rkey.size(); ++i) rkey[i] = static_cast<std::byte>(i * 7 + 1);
    const PackedHandle h{9, 0, 0x2000, 4096, btl::reg_flags::remote_read, 0};
    const std::size_t n = pack_handle(buf, h, md_tag("cma"), rkey, true);
    ASSERT_EQ(n, native_handle_header + rkey.size());
    PackedHandle back;
    std::memcpy(&back, buf.data(), sizeof back);
    EXPECT_EQ(back.magic, native_handle_magic);
    EXPECT_EQ(back.key, 9u);
    const std::byte* key = handle_rkey(buf.data(), md_tag("cma"), rkey.size());
    ASSERT_NE(key, nullptr);
    EXPECT_EQ(std::memcmp(key, rkey.data(), rkey.size()), 0);
    // A key packed by another memory domain, or of another length, is not used.
    EXPECT_EQ(handle_rkey(buf.data(), md_tag("rc_verbs"), rkey.size()), nullptr);
    EXPECT_EQ(handle_rkey(buf.data(), md_tag("cma"), rkey.size() + 1), nullptr);
}

TEST(UctHandle, StaysWithinTheSdkLimit) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    const PackedHandle h{1, 0, 0, 8, 0, 0};
    std::vector<std::byte> rkey(max_rkey_len);
    EXPECT_EQ(pack_handle(buf, h, 1, rkey, true), btl::max_registration_handle_size);
    rkey.push_back(std::byte{0});
    EXPECT_EQ(pack_handle(buf, h, 1, rkey, true), 0u) << "a key too long for a handle";
    std::array<std::byte, 16> small{};
    EXPECT_EQ(pack_handle(small, h, 1, {}, false), 0u) << "a buffer too small for the header";
    // An empty key (cma packs none) still makes a native handle.
    EXPECT_EQ(pack_handle(buf, h, 1, {}, true), native_handle_header);
    EXPECT_NE(handle_rkey(buf.data(), 1, 0), nullptr);
}

std::vector<std::byte> key_bytes(std::size_t n, int seed) {
    std::vector<std::byte> k(n);
    for (std::size_t i = 0; i < n; ++i) k[i] = static_cast<std::byte>(i * 5 + seed);
    return k;
}

TEST(UctHandle, SecondKeyRidesBesideTheFirst) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    const PackedHandle h{3, 0, 0x4000, 8192, btl::reg_flags::access_any, 0};
    const auto cma = key_bytes(0, 1), posix = key_bytes(24, 2);
    ASSERT_EQ(pack_handle(buf, h, md_tag("cma"), cma, true), native_handle_header);
    ASSERT_TRUE(append_rkey(buf, md_tag("posix"), posix));
    EXPECT_NE(handle_rkey(buf.data(), md_tag("cma"), 0), nullptr) << "the first key stays";
    const std::byte* got = handle_rkey(buf.data(), md_tag("posix"), posix.size());
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::memcmp(got, posix.data(), posix.size()), 0);
    EXPECT_EQ(handle_rkey(buf.data(), md_tag("sysv"), posix.size()), nullptr);
    PackedHandle back;
    std::memcpy(&back, buf.data(), sizeof back);
    EXPECT_EQ(back.key, 3u) << "the plain part is untouched";
}

TEST(UctHandle, KeyAppendedToAPlainHandleMakesItNative) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    const PackedHandle h{4, 0, 0x8000, 64, btl::reg_flags::remote_atomic, 0};
    ASSERT_EQ(pack_handle(buf, h, md_tag("cma"), {}, false), sizeof(PackedHandle));
    const auto posix = key_bytes(24, 3);
    ASSERT_TRUE(append_rkey(buf, md_tag("posix"), posix));
    PackedHandle back;
    std::memcpy(&back, buf.data(), sizeof back);
    EXPECT_EQ(back.magic, native_handle_magic);
    EXPECT_NE(handle_rkey(buf.data(), md_tag("posix"), posix.size()), nullptr);
    EXPECT_EQ(handle_rkey(buf.data(), md_tag("cma"), 0), nullptr) << "no RDMA key was packed";
}

TEST(UctHandle, AKeyThatDoesNotFitLeavesTheHandleAlone) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    const PackedHandle h{1, 0, 0, 8, 0, 0};
    const auto first = key_bytes(max_rkey_len - 16, 4);
    ASSERT_NE(pack_handle(buf, h, md_tag("cma"), first, true), 0u);
    const auto before = buf;
    EXPECT_FALSE(append_rkey(buf, md_tag("posix"), key_bytes(24, 5)));
    EXPECT_EQ(buf, before);
    EXPECT_TRUE(append_rkey(buf, md_tag("posix"), key_bytes(8, 6))) << "exactly the room left";
}

TEST(UctHandle, AKeyLengthPastTheEndIsNotFollowed) {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> buf{};
    const PackedHandle h{1, 0, 0, 8, 0, 0};
    ASSERT_NE(pack_handle(buf, h, md_tag("cma"), key_bytes(8, 7), true), 0u);
    // A peer's garbage: the first key says "more" and a length beyond the handle.
    RemoteKeyHeader k{};
    std::memcpy(&k, buf.data() + sizeof(PackedHandle), sizeof k);
    k.more = 1;
    k.rkey_len = 0xffff;
    std::memcpy(buf.data() + sizeof(PackedHandle), &k, sizeof k);
    EXPECT_EQ(handle_rkey(buf.data(), md_tag("posix"), 24), nullptr);
    EXPECT_FALSE(append_rkey(buf, md_tag("posix"), key_bytes(8, 8)));
}

TEST(UctHandle, MdTagsDiffer) {
    EXPECT_NE(md_tag("cma"), md_tag("posix"));
    EXPECT_NE(md_tag("cma"), md_tag(""));
    EXPECT_EQ(md_tag("cma"), md_tag("cma"));
}

}  // namespace
}  // namespace transit::uct

// copy_small (the stack gather of a short message with a header): every
// length up to 64 from every alignment arrives whole, and nothing past it is
// written.
TEST(UctWire, CopySmallCopiesEveryLengthAndNothingMore) {
    std::array<std::byte, 96> src{};
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 1);
    for (std::size_t n = 0; n <= 64; ++n)
        for (std::size_t from = 0; from < 8; ++from) {
            std::array<std::byte, 80> dst;
            dst.fill(std::byte{0xee});
            transit::uct::copy_small(dst.data() + 1, src.data() + from, n);
            EXPECT_EQ(dst[0], std::byte{0xee}) << n;
            EXPECT_EQ(std::memcmp(dst.data() + 1, src.data() + from, n), 0)
                << n << " from " << from;
            for (std::size_t k = n + 1; k < dst.size(); ++k)
                ASSERT_EQ(dst[k], std::byte{0xee}) << "length " << n << " wrote byte " << k - 1;
        }
}
