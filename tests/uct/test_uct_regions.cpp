// The uct component's registration table (components/uct/uct_regions.hpp):
// the region goes into the packed handle peers receive, and a key gives it
// back.  The table underneath is the SDK's (tests/btl_util/registration_table_test.cpp).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "components/uct/uct_regions.hpp"

namespace {

using transit::uct::PackedHandle;
using transit::uct::Region;
using transit::uct::Regions;
using transit::uct::Registration;

constexpr std::uint32_t any_access = 7;

transit::btl::util::RegistrationKey key_of(const Registration* r) {
    return r->key();
}

transit::btl::util::RegistrationKey with_id(transit::btl::util::RegistrationKey k,
                                            std::uint64_t id) {
    k.id = id;
    return k;
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
    EXPECT_FALSE(t.find(with_id(key_of(a), key_of(a).id + 2)).has_value())
        << "an index past the records";
    EXPECT_FALSE(t.find(with_id(key_of(a), key_of(a).id ^ (std::uint64_t{1} << 30))).has_value())
        << "another serial";
    EXPECT_FALSE(t.find({key_of(a).id, key_of(a).secret ^ 1}).has_value()) << "another secret";
    EXPECT_FALSE(t.find({}).has_value());
    // The packed handle peers receive carries the region given to add.
    PackedHandle h = a->header();
    EXPECT_EQ(h.base, 0x1000u);
    EXPECT_EQ(h.len, 64u);
    EXPECT_EQ(h.magic, transit::uct::handle_magic);
    // The handle given out points at `packed`; a removed region is gone.
    EXPECT_EQ(t.live(a->packed.data()), a);
    const auto key = key_of(a);
    t.remove(*a);
    EXPECT_FALSE(t.find(key).has_value());
    EXPECT_EQ(t.live(a->packed.data()), nullptr);
    EXPECT_EQ(t.live_count(), 1u);
}

}  // namespace
