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

using transit::btl::util::RegistrationKey;
using transit::btl::util::RegistrationTable;

struct Record {
    RegistrationKey stored_key{};
    std::uint64_t base = 0;
    Record* next_free = nullptr;
    bool in_use = false;
    RegistrationKey key() const noexcept { return stored_key; }
};

RegistrationKey with_id(RegistrationKey k, std::uint64_t id) {
    k.id = id;
    return k;
}
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
    EXPECT_EQ(t.find(with_id(a->key(), a->key().id + 2)), nullptr) << "an index past the records";
    EXPECT_EQ(t.find(with_id(a->key(), a->key().id ^ (std::uint64_t{1} << 30))), nullptr)
        << "another serial";
    EXPECT_EQ(t.find({}), nullptr);
}

TEST(RegistrationTable, AReusedRecordGetsANewKeyAndTheOldOneIsRefused) {
    Table t;
    Record* a = add(t, 0x1000);
    ASSERT_NE(a, nullptr);
    const RegistrationKey old_key = a->key();
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
    std::set<std::uint64_t> keys;  // ids
    for (std::uint64_t i = 0; i < 1000; ++i) {
        Record* r = add(t, 0x10000 + i * 64);
        ASSERT_NE(r, nullptr);
        keys.insert(r->key().id);
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
    for (Record* r : live) EXPECT_EQ(t.find(r->stored_key), nullptr);
}

// Two processes (two tables) start their keys at unrelated points: a peer
// cannot take its own keys as a guide to another's.
TEST(RegistrationTable, KeysStartAtARandomPoint) {
    std::set<std::uint64_t> first;
    for (int i = 0; i < 4; ++i) {
        Table t;
        Record* r = add(t, 0x1000);
        ASSERT_NE(r, nullptr);
        first.insert(r->key().id);
    }
    EXPECT_EQ(first.size(), 4u) << "two tables gave the same first key";
}

// A peer holding the id of a registration (or guessing one from its own)
// still needs its secret: 64 random bits, different for every registration.
TEST(RegistrationTable, AnIdWithAWrongSecretIsRefused) {
    Table t;
    Record* a = add(t, 0x1000);
    Record* b = add(t, 0x2000);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_NE(a->key().secret, b->key().secret);
    EXPECT_EQ(t.find({b->key().id, a->key().secret}), nullptr) << "b's id with a's secret";
    for (int bit = 0; bit < 64; ++bit)
        ASSERT_EQ(t.find({a->key().id, a->key().secret ^ (std::uint64_t{1} << bit)}), nullptr)
            << "a secret one bit off (" << bit << ") is taken";
    // The secrets of many registrations use all 64 bits.
    std::uint64_t ored = 0, anded = ~std::uint64_t{0};
    for (int i = 0; i < 64; ++i) {
        Record* r = add(t, 0x3000);
        ASSERT_NE(r, nullptr);
        ored |= r->key().secret;
        anded &= r->key().secret;
    }
    EXPECT_EQ(ored, ~std::uint64_t{0});
    EXPECT_EQ(anded, 0u);
}

}  // namespace
