// The btl base table (transit/btl/base_params.hpp): a component's table
// inherits the common parameters with its own defaults, binds them to the
// fields of BaseConfig, says which ones the user left at their default, and a
// negative or non-numeric exclusivity is refused naming the parameter and where
// it was set.
#include <gtest/gtest.h>

#include <string>

#include "tests/params/params_fixture.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/params_bind.hpp"

namespace transit::params::test {
namespace {

using BaseTable = ParamsTest;
using btl::BaseParam;

struct Config : btl::BaseConfig {
    std::uint32_t slots = 0;
};

constexpr Field<Config> table[] = {
    btl::inherit<Config>(BaseParam::eager_limit, {.default_value = "8k"}),
    btl::inherit<Config>(BaseParam::max_send_size,
                         {.default_value = "16k", .help = "Own help", .max = 1 << 20}),
    btl::inherit<Config>(BaseParam::exclusivity, {.default_value = "300"}),
    btl::inherit<Config>(BaseParam::free_list_max, {.default_value = "64"}),
    to<&Config::slots>(Decl{"slots", Type::unsigned_integer, "7", "Slots", 6}.range(1, 100)),
};

TEST_F(BaseTable, EntriesKeepTheBaseDeclarationWithTheComponentsDefault) {
    add_all(registry(), "btl", "fake", table);
    const Variable& eager = registry().get("btl_fake_eager_limit");
    EXPECT_EQ(eager.type(), Type::size);
    EXPECT_EQ(eager.level(), btl::base_decl(BaseParam::eager_limit).level);
    EXPECT_EQ(eager.default_value(), "8k");
    EXPECT_EQ(eager.help(), btl::base_decl(BaseParam::eager_limit).help);
    const Variable& max = registry().get("btl_fake_max_send_size");
    EXPECT_EQ(max.help(), "Own help");
    EXPECT_EQ(max.min(), btl::base_decl(BaseParam::max_send_size).min);
    EXPECT_EQ(max.max(), std::int64_t{1} << 20);
    const Variable& excl = registry().get("btl_fake_exclusivity");
    EXPECT_EQ(excl.type(), Type::unsigned_integer);
    EXPECT_EQ(excl.min(), 0);
    EXPECT_EQ(registry().find("btl_fake_latency"), nullptr) << "only the entries listed";
}

TEST_F(BaseTable, BindFillsTheBaseFieldsAndTellsWhichWereLeftAtTheirDefault) {
    add_all(registry(), "btl", "fake", table);
    registry().set("btl_fake_exclusivity", "4096", {Origin::api});
    Config c;
    bind(registry(), "btl", "fake", table, c);
    EXPECT_EQ(c.eager_limit, 8192u);
    EXPECT_EQ(c.max_send_size, 16384u);
    EXPECT_EQ(c.exclusivity, 4096u);
    EXPECT_EQ(c.free_list_max, 64u);
    EXPECT_EQ(c.slots, 7u);
    EXPECT_TRUE(c.left_default(BaseParam::eager_limit));
    EXPECT_FALSE(c.left_default(BaseParam::exclusivity));
    registry().set("btl_fake_eager_limit", "1k", {Origin::api});
    bind(registry(), "btl", "fake", table, c);
    EXPECT_EQ(c.eager_limit, 1024u);
    EXPECT_FALSE(c.left_default(BaseParam::eager_limit));
}

TEST_F(BaseTable, NegativeExclusivityIsRefusedNamingTheParameterAndItsSource) {
    set_env("btl_fake_exclusivity", "-1");
    reset_for_testing();
    const std::string err = error_text([&] { add_all(registry(), "btl", "fake", table); });
    expect_contains(err, {"btl_fake_exclusivity", "\"-1\"",
                          "environment TRANSIT_MCA_btl_fake_exclusivity", "negative"});
}

TEST_F(BaseTable, NonNumericExclusivityIsRefusedNamingTheParameterAndItsSource) {
    const std::string file = write_user_file("btl_fake_exclusivity = high\n");
    reset_for_testing();
    const std::string err = error_text([&] { add_all(registry(), "btl", "fake", table); });
    expect_contains(err, {"btl_fake_exclusivity", "\"high\"", "file " + file + ":1",
                          "not an unsigned integer"});
}

TEST_F(BaseTable, AnEagerLimitAboveTheLargestFragmentIsRefusedNamingBoth) {
    add_all(registry(), "btl", "fake", table);
    registry().set("btl_fake_eager_limit", "32k", {Origin::api});
    const std::string err = error_text([&] { btl::require_eager_fits(registry(), "fake"); });
    expect_contains(err, {"btl_fake_eager_limit", "btl_fake_max_send_size"});
    registry().set("btl_fake_eager_limit", "16k", {Origin::api});
    EXPECT_EQ(error_text([&] { btl::require_eager_fits(registry(), "fake"); }), "");
}

TEST_F(BaseTable, VariableOfFindsTheEntryBoundToAField) {
    add_all(registry(), "btl", "fake", table);
    EXPECT_EQ(&variable_of<&Config::slots>(registry(), "btl", "fake", table),
              &registry().get("btl_fake_slots"));
}

}  // namespace
}  // namespace transit::params::test
