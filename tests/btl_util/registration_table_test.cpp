// btl::util::RegistrationTable: records are reused, so a key must name its own
// registration only, a handle must be one the table gave out and still holds,
// and keys must not be guessable from another process's.
#include "transit/btl/util/registration_table.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace {

using transit::btl::util::RegistrationTable;

struct Record {
    std::uint64_t stored_key = 0;
    std::uint64_t base = 0;
    Record* next_free = nullptr;
    bool in_use = false;
    std::uint64_t key() const noexcept { return stored_key; }
};
using Table = RegistrationTable<Record>;

Record* add(Table& t, std::uint64_t base) {
    const auto [r, key] = t.add();
    if (r != nullptr) *r = {key, base, r->next_free, r->in_use};
    return r;
}

TEST(RegistrationTable, AKeyFindsItsRecordAndNoOther) {
    Table t;
    Record* a = add(t, 0x1000);
    Record* b = add(t, 0x2000);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(t.find(a->key()), a);
    EXPECT_EQ(t.find(b->key()), b);
    EXPECT_EQ(t.find(a->key() + 2), nullptr) << "an index past the records";
    EXPECT_EQ(t.find(a->key() ^ (std::uint64_t{1} << 30)), nullptr) << "another serial";
    EXPECT_EQ(t.find(0), nullptr);
}

TEST(RegistrationTable, AReusedRecordGetsANewKeyAndTheOldOneIsRefused) {
    Table t;
    Record* a = add(t, 0x1000);
    ASSERT_NE(a, nullptr);
    const std::uint64_t old_key = a->key();
    t.remove(*a);
    EXPECT_EQ(t.find(old_key), nullptr) << "a removed record is still found";
    Record* b = add(t, 0x9000);
    ASSERT_EQ(b, a) << "the free list did not hand the record out again";
    EXPECT_NE(b->key(), old_key);
    EXPECT_EQ(t.find(old_key), nullptr) << "the old key names the record's new registration";
    EXPECT_EQ(t.find(b->key()), b);
}

TEST(RegistrationTable, OnlyTheStartOfALiveRecordIsAHandle) {
    Table t;
    Record* a = add(t, 0x1000);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(t.live(a), a);
    EXPECT_EQ(t.live(reinterpret_cast<const std::byte*>(a) + 8), nullptr) << "inside a record";
    Record copy = *a;
    EXPECT_EQ(t.live(&copy), nullptr) << "a record the table does not hold";
    EXPECT_EQ(t.live(nullptr), nullptr);
    t.remove(*a);
    EXPECT_EQ(t.live(a), nullptr) << "a removed record";
    EXPECT_EQ(t.live_count(), 0u);
}

// Enough records for many chunks: a key finds its record in any of them.
TEST(RegistrationTable, ManyRecordsGrowTheTableAndKeepTheirKeys) {
    Table t;
    std::vector<Record*> live;
    std::set<std::uint64_t> keys;
    for (std::uint64_t i = 0; i < 1000; ++i) {
        Record* r = add(t, 0x10000 + i * 64);
        ASSERT_NE(r, nullptr);
        keys.insert(r->key());
        live.push_back(r);
    }
    EXPECT_EQ(keys.size(), 1000u) << "two registrations share a key";
    EXPECT_EQ(t.live_count(), 1000u);
    std::size_t visited = 0;
    t.for_each_live([&](Record&) { ++visited; });
    EXPECT_EQ(visited, 1000u);
    for (std::size_t i = 0; i < live.size(); ++i) {
        ASSERT_EQ(t.live(live[i]), live[i]);
        ASSERT_EQ(t.find(live[i]->key()), live[i]);
        ASSERT_EQ(t.find(live[i]->key())->base, 0x10000 + i * 64);
    }
    for (Record* r : live) t.remove(*r);
    EXPECT_EQ(t.live_count(), 0u);
    for (std::uint64_t k : keys) EXPECT_EQ(t.find(k), nullptr);
}

// Two processes (two tables) start their keys at unrelated points: a peer
// cannot take its own keys as a guide to another's.
TEST(RegistrationTable, KeysStartAtARandomPoint) {
    std::set<std::uint64_t> first;
    for (int i = 0; i < 4; ++i) {
        Table t;
        Record* r = add(t, 0x1000);
        ASSERT_NE(r, nullptr);
        first.insert(r->key());
    }
    EXPECT_EQ(first.size(), 4u) << "two tables gave the same first key";
}

}  // namespace
