// Declared ranges: the registry refuses a number outside a parameter's
// min..max from every source, with the same kind of error as a value that does
// not parse; the bounds themselves are accepted.  Also the check across two
// parameters (require_at_most) that components share.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tests/params/params_fixture.hpp"

namespace transit::params::test {
namespace {

using Ranges = ParamsTest;

constexpr Decl ring = Decl{"ring", Type::unsigned_integer, "256", "Slots", 6}.range(1, 65536);
constexpr Decl prio = Decl{"prio", Type::integer, "-1", "Priority", 7}.range(-1, UINT32_MAX);
constexpr Decl limit = Decl{"limit", Type::size, "4k", "Largest message", 4}.at_least(1);

TEST_F(Ranges, DeclarationCarriesTheBounds) {
    static_assert(ring.min == 1 && ring.max == 65536);
    static_assert(limit.min == 1 && !limit.max);
    Variable& v = registry().add("t", "c", ring);
    EXPECT_EQ(v.min(), 1);
    EXPECT_EQ(v.max(), 65536);
    Variable& u = registry().add("t", "c", {"free", Type::unsigned_integer, "5", "h", 5});
    EXPECT_FALSE(u.min());
    EXPECT_FALSE(u.max());
}

TEST_F(Ranges, BoundsThemselvesAreAccepted) {
    Registry& r = registry();
    Variable& v = r.add("t", "c", ring);
    r.set("t_c_ring", "1", {Origin::api});
    EXPECT_EQ(v.as_unsigned(), 1u);
    r.set("t_c_ring", "65536", {Origin::api});
    EXPECT_EQ(v.as_unsigned(), 65536u);
}

TEST_F(Ranges, BelowMinimumFromTheEnvironment) {
    set_env("t_c_ring", "0");
    const std::string err = error_text([] { registry().add("t", "c", ring); });
    expect_contains(err, {"parameter t_c_ring", "\"0\"", "environment TRANSIT_MCA_t_c_ring",
                          "out of range", "1..65536"});
    EXPECT_EQ(registry().find("t_c_ring"), nullptr) << "not registered with a bad value";
}

TEST_F(Ranges, AboveMaximumFromAFile) {
    std::string file = write_user_file("# ring\nt_c_ring = 65537\n");
    const std::string err = error_text([] { registry().add("t", "c", ring); });
    expect_contains(err, {"parameter t_c_ring", "\"65537\"", "file " + file + ":2", "1..65536"});
}

TEST_F(Ranges, OutOfRangeFromTheCommandLineChangesNothing) {
    Variable& v = registry().add("t", "c", ring);
    const std::string err = error_text([&] {
        command_line({"--mca", "t_c_ring", "70000", "prog_arg"});
    });
    expect_contains(err, {"t_c_ring", "\"70000\"", "command line --mca t_c_ring", "1..65536"});
    EXPECT_EQ(v.as_unsigned(), 256u);
    EXPECT_EQ(v.source().origin, Origin::default_value);
}

TEST_F(Ranges, OutOfRangeFromTheApiIsRefusedEvenWhenHidden) {
    Registry& r = registry();
    Variable& v = r.add("t", "c", ring);
    r.set("t_c_ring", "7", {Origin::api});
    EXPECT_THROW(r.set("t_c_ring", "0", {Origin::api}), Error);
    EXPECT_EQ(v.as_unsigned(), 7u) << "the old value stays";
    // A lower source hidden by the API value is checked all the same.
    EXPECT_THROW(r.set("t_c_ring", "0", {Origin::command_line, "--mca t_c_ring"}), Error);
}

TEST_F(Ranges, SignedRangeWithMinusOne) {
    Registry& r = registry();
    Variable& v = r.add("t", "c", prio);
    r.set("t_c_prio", "-1", {Origin::api});
    EXPECT_EQ(v.as_int(), -1);
    r.set("t_c_prio", "4294967295", {Origin::api});
    EXPECT_EQ(v.as_int(), 4294967295LL);
    expect_contains(error_text([&] { r.set("t_c_prio", "-2", {Origin::api}); }),
                    {"\"-2\"", "-1..4294967295"});
    expect_contains(error_text([&] { r.set("t_c_prio", "4294967296", {Origin::api}); }),
                    {"\"4294967296\"", "-1..4294967295"});
}

TEST_F(Ranges, MinimumOnlyAppliesToSizesAfterTheSuffix) {
    Registry& r = registry();
    Variable& v = r.add("t", "c", limit);
    r.set("t_c_limit", "1", {Origin::api});
    EXPECT_EQ(v.as_unsigned(), 1u);
    r.set("t_c_limit", "1g", {Origin::api});
    EXPECT_EQ(v.as_unsigned(), 1u << 30);
    expect_contains(error_text([&] { r.set("t_c_limit", "0k", {Origin::api}); }),
                    {"\"0k\"", "at least 1"});
}

TEST_F(Ranges, ValueThatDoesNotParseStillSaysSo) {
    set_env("t_c_ring", "lots");
    const std::string err = error_text([] { registry().add("t", "c", ring); });
    expect_contains(err, {"t_c_ring", "is not an unsigned integer"});
}

TEST_F(Ranges, BadRangeDeclarationsAreProgrammingErrors) {
    Registry& r = registry();
    EXPECT_THROW(r.add("t", "c", Decl{"s", Type::string, "x", "h", 5}.range(0, 1)),
                 std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", Decl{"d", Type::real, "1", "h", 5}.at_least(0)),
                 std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", Decl{"e", Type::integer, "1", "h", 5}.range(2, 1)),
                 std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", Decl{"o", Type::unsigned_integer, "0", "h", 5}.range(1, 8)),
                 std::invalid_argument)
        << "the default is outside";
}

TEST_F(Ranges, RangeText) {
    EXPECT_EQ(range_text(1, 65536), "1..65536");
    EXPECT_EQ(range_text(-1, std::nullopt), "at least -1");
    EXPECT_EQ(range_text(std::nullopt, 64), "at most 64");
    EXPECT_EQ(range_text(std::nullopt, std::nullopt), "");
}

constexpr Decl timeout = Decl{"timeout", Type::real, "10", "Seconds", 3}.real_range(0.001, 1e6);

TEST_F(Ranges, RealRangeRefusesANegativeTimeoutWithItsSource) {
    set_env("t_c_timeout", "-5");
    const std::string err = error_text([] { registry().add("t", "c", timeout); });
    expect_contains(err, {"parameter t_c_timeout", "\"-5\"", "environment TRANSIT_MCA_t_c_timeout",
                          "out of range", "0.001..1000000"});
}

TEST_F(Ranges, RealRangeKeepsItsBoundsAndRefusesAboveTheTop) {
    Registry& r = registry();
    Variable& v = r.add("t", "c", timeout);
    EXPECT_EQ(v.real_min(), 0.001);
    EXPECT_EQ(v.real_max(), 1e6);
    EXPECT_FALSE(v.min());
    EXPECT_EQ(range_text(v), "0.001..1000000");
    r.set("t_c_timeout", "0.001", {Origin::api});
    EXPECT_EQ(v.as_real(), 0.001);
    expect_contains(error_text([&] { r.set("t_c_timeout", "1e7", {Origin::api}); }),
                    {"\"1e7\"", "out of range"});
    EXPECT_EQ(v.as_real(), 0.001) << "a refused value changes nothing";
}

TEST_F(Ranges, RealRangeDeclarationErrors) {
    Registry& r = registry();
    EXPECT_THROW(r.add("t", "c", Decl{"i", Type::integer, "1", "h", 5}.real_range(0, 1)),
                 std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", Decl{"d", Type::real, "1", "h", 5}.range(0, 1)),
                 std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", Decl{"o", Type::real, "0", "h", 5}.real_range(0.5, 1)),
                 std::invalid_argument)
        << "the default is outside";
    EXPECT_THROW(r.add("t", "c", Decl{"e", Type::real, "1", "h", 5}.real_range(2, 1)),
                 std::invalid_argument);
}

TEST_F(Ranges, RequireAtMostNamesBothParametersAndSources) {
    Registry& r = registry();
    Variable& eager = r.add("t", "c", {"eager", Type::size, "4k", "h", 4});
    Variable& max = r.add("t", "c", {"max", Type::size, "8k", "h", 4});
    EXPECT_NO_THROW(require_at_most(eager, max));
    r.set("t_c_eager", "16k", {Origin::command_line, "--mca t_c_eager"});
    expect_contains(error_text([&] { require_at_most(eager, max); }),
                    {"parameter t_c_eager", "\"16k\"", "command line --mca t_c_eager",
                     "at most t_c_max", "\"8k\"", "default"});
    r.set("t_c_max", "16k", {Origin::api});
    EXPECT_NO_THROW(require_at_most(eager, max)) << "equal is fine";
}

}  // namespace
}  // namespace transit::params::test
