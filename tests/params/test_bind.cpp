// Parameters bound to the fields of a config struct: every type lands in its
// field, an enumeration becomes its enum class by the order of the choices,
// a later value reaches the struct at the next bind, and a bad value is
// refused by the registry with the parameter's name and the allowed values;
// a duration field takes the number in its own unit.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/params/params_fixture.hpp"
#include "transit/params_bind.hpp"

namespace transit::params::test {
namespace {

using Bind = ParamsTest;

enum class Wait { poll, yield, sleep };

struct Config {
    bool on = false;
    int priority = 0;
    std::uint32_t slots = 0;
    std::size_t limit = 0;
    double seconds = 0;
    std::string name;
    std::vector<std::string> names;
    Wait wait = Wait::poll;
    std::chrono::milliseconds grace{0};
};

constexpr Field<Config> table[] = {
    to<&Config::on>({"on", Type::boolean, "true", "Switch", 5}),
    to<&Config::priority>(Decl{"priority", Type::integer, "-1", "Priority", 7}.range(-1, 100)),
    to<&Config::slots>(Decl{"slots", Type::unsigned_integer, "256", "Slots", 6}.range(1, 65536)),
    to<&Config::limit>(Decl{"limit", Type::size, "4k", "Largest message", 4}.at_least(1)),
    to<&Config::seconds>({"seconds", Type::real, "2.5", "Timeout", 3}),
    to<&Config::name>({"name", Type::string, "x", "Name", 5}),
    to<&Config::names>({"names", Type::list, "a,b", "Names", 5}),
    to<&Config::wait>({"wait", Type::enumeration, "yield", "How to wait", 5, "poll,yield,sleep"}),
    to<&Config::grace>({"grace", Type::unsigned_integer, "1500", "Milliseconds of grace", 5}),
};

TEST_F(Bind, DefaultsLandInTheirFields) {
    add_all(registry(), "t", "c", table);
    Config c;
    bind(registry(), "t", "c", table, c);
    EXPECT_TRUE(c.on);
    EXPECT_EQ(c.priority, -1);
    EXPECT_EQ(c.slots, 256u);
    EXPECT_EQ(c.limit, 4096u);
    EXPECT_DOUBLE_EQ(c.seconds, 2.5);
    EXPECT_EQ(c.name, "x");
    EXPECT_EQ(c.names, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(c.wait, Wait::yield);
    EXPECT_EQ(c.grace, std::chrono::milliseconds(1500));
}

TEST_F(Bind, SetValuesReachTheStructAtTheNextBind) {
    Registry& r = registry();
    add_all(r, "t", "c", table);
    r.set("t_c_on", "false", {Origin::api});
    r.set("t_c_priority", "42", {Origin::api});
    r.set("t_c_limit", "1M", {Origin::api});
    r.set("t_c_wait", "sleep", {Origin::api});
    r.set("t_c_names", "p,q,r", {Origin::api});
    Config c;
    bind(r, "t", "c", table, c);
    EXPECT_FALSE(c.on);
    EXPECT_EQ(c.priority, 42);
    EXPECT_EQ(c.limit, 1u << 20);
    EXPECT_EQ(c.wait, Wait::sleep);
    EXPECT_EQ(c.names.size(), 3u);
}

TEST_F(Bind, BadEnumValueNamesTheParameterAndTheChoices) {
    Registry& r = registry();
    add_all(r, "t", "c", table);
    const std::string text = error_text([&] { r.set("t_c_wait", "spin", {Origin::api}); });
    expect_contains(text, {"t_c_wait", "spin", "poll, yield, sleep"});
    Config c;
    bind(r, "t", "c", table, c);
    EXPECT_EQ(c.wait, Wait::yield) << "the refused value changed nothing";
}

TEST_F(Bind, OutOfRangeValueIsRefusedBeforeItReachesTheField) {
    Registry& r = registry();
    add_all(r, "t", "c", table);
    const std::string text = error_text([&] { r.set("t_c_slots", "0", {Origin::api}); });
    expect_contains(text, {"t_c_slots", "1..65536"});
    Config c;
    bind(r, "t", "c", table, c);
    EXPECT_EQ(c.slots, 256u);
}

}  // namespace
}  // namespace transit::params::test
