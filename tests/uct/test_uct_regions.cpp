// The uct component's registration table (components/uct/uct_regions.hpp):
// records are reused, so a key must name its own registration only, a handle
// must be one the table gave out and still holds, and keys must not be
// guessable from another process's.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "components/uct/uct_regions.hpp"

namespace {

using transit::uct::PackedHandle;
using transit::uct::Region;
using transit::uct::Regions;
using transit::uct::Registration;

constexpr std::uint32_t any_access = 7;

std::uint64_t key_of(const Registration* r) {
    return r->header().key;
}

TEST(UctRegions, AKeyFindsItsRegionAndNoOther) {
    Regions t;
    Registration* a = t.add({0x1000, 64, any_access});
    Registration* b = t.add({0x2000, 128, 1});
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    ASSERT_TRUE(t.find(key_of(a)).has_value());
    EXPECT_EQ(t.find(key_of(a))->base, 0x1000u);
    EXPECT_EQ(t.find(key_of(b))->len, 128u);
    EXPECT_EQ(t.find(key_of(b))->access, 1u);
    EXPECT_FALSE(t.find(key_of(a) + 2).has_value()) << "an index past the records";
    EXPECT_FALSE(t.find(key_of(a) ^ (std::uint64_t{1} << 30)).has_value()) << "another serial";
    EXPECT_FALSE(t.find(0).has_value());
    // The packed handle peers receive carries the region given to add.
    PackedHandle h = a->header();
    EXPECT_EQ(h.base, 0x1000u);
    EXPECT_EQ(h.len, 64u);
    EXPECT_EQ(h.magic, transit::uct::handle_magic);
}

TEST(UctRegions, AReusedRecordGetsANewKeyAndTheOldOneIsRefused) {
    Regions t;
    Registration* a = t.add({0x1000, 64, any_access});
    ASSERT_NE(a, nullptr);
    const std::uint64_t old_key = key_of(a);
    t.remove(*a);
    EXPECT_FALSE(t.find(old_key).has_value()) << "a removed region is still found";
    Registration* b = t.add({0x9000, 64, any_access});
    ASSERT_EQ(b, a) << "the free list did not hand the record out again";
    EXPECT_NE(key_of(b), old_key);
    EXPECT_FALSE(t.find(old_key).has_value()) << "the old key names the record's new region";
    ASSERT_TRUE(t.find(key_of(b)).has_value());
    EXPECT_EQ(t.find(key_of(b))->base, 0x9000u);
}

TEST(UctRegions, OnlyTheStartOfALiveRecordIsAHandle) {
    Regions t;
    Registration* a = t.add({0x1000, 64, any_access});
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(t.live(a), a);
    EXPECT_EQ(t.live(a->packed.data()), a) << "the handle given out points at `packed`";
    EXPECT_EQ(t.live(reinterpret_cast<const std::byte*>(a) + 8), nullptr) << "inside a record";
    Registration copy;
    EXPECT_EQ(t.live(&copy), nullptr) << "a record the table does not hold";
    EXPECT_EQ(t.live(nullptr), nullptr);
    t.remove(*a);
    EXPECT_EQ(t.live(a), nullptr) << "a removed record";
    EXPECT_EQ(t.live_count(), 0u);
}

TEST(UctRegions, ManyRegistrationsGrowTheTableAndKeepTheirKeys) {
    Regions t;
    std::vector<Registration*> live;
    std::set<std::uint64_t> keys;
    for (std::uint64_t i = 0; i < 1000; ++i) {
        Registration* r = t.add({0x10000 + i * 64, 64, any_access});
        ASSERT_NE(r, nullptr);
        keys.insert(key_of(r));
        live.push_back(r);
    }
    EXPECT_EQ(keys.size(), 1000u) << "two registrations share a key";
    EXPECT_EQ(t.live_count(), 1000u);
    for (std::size_t i = 0; i < live.size(); ++i) {
        ASSERT_EQ(t.live(live[i]), live[i]);
        ASSERT_TRUE(t.find(key_of(live[i])).has_value());
        ASSERT_EQ(t.find(key_of(live[i]))->base, 0x10000 + i * 64);
    }
    for (Registration* r : live) t.remove(*r);
    EXPECT_EQ(t.live_count(), 0u);
    for (std::uint64_t k : keys) EXPECT_FALSE(t.find(k).has_value());
}

// Two processes (two tables) start their keys at unrelated points: a peer
// cannot take its own keys as a guide to another's.
TEST(UctRegions, KeysStartAtARandomPoint) {
    std::set<std::uint64_t> first;
    for (int i = 0; i < 4; ++i) {
        Regions t;
        Registration* r = t.add({0x1000, 64, any_access});
        ASSERT_NE(r, nullptr);
        first.insert(key_of(r));
    }
    EXPECT_EQ(first.size(), 4u) << "two tables gave the same first key";
}

}  // namespace
