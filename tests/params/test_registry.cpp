// Registration, names, types, levels, synonyms, deprecated names and the API source.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tests/params/params_fixture.hpp"

namespace transit::params::test {
namespace {

using ParamRegistry = ParamsTest;

TEST_F(ParamRegistry, FullNames) {
    Registry& r = registry();
    EXPECT_EQ(r.add("btl", "tcp", {"eager_limit", Type::size, "64k", "h", 4}).full_name(),
              "btl_tcp_eager_limit");
    EXPECT_EQ(r.add("btl", "base", {"verbose", Type::integer, "0", "h", 5}).full_name(),
              "btl_base_verbose");
    Variable& fw = r.add("btl", "", {"", Type::string, "", "Transports to use", 1});
    EXPECT_EQ(fw.full_name(), "btl");
    EXPECT_EQ(fw.framework(), "btl");
    EXPECT_EQ(fw.component(), "");
    EXPECT_EQ(fw.name(), "");
    EXPECT_EQ(r.add("pml", "", {"priority", Type::integer, "1", "h", 5}).full_name(),
              "pml_priority");
    EXPECT_EQ(&r.get("btl"), &fw);
    EXPECT_THROW(r.add("", "x", {"y", Type::integer, "0", "h", 5}), std::invalid_argument);
    EXPECT_THROW(r.add("btl", "t cp", {"y", Type::integer, "0", "h", 5}), std::invalid_argument);
}

TEST_F(ParamRegistry, CoreParametersAlwaysExist) {
    Variable& files = registry().get("mca_base_param_files");
    EXPECT_EQ(files.type(), Type::string);
    EXPECT_EQ(files.level(), 4);
    Variable& path = registry().get("mca_base_component_path");
    EXPECT_EQ(path.type(), Type::string);
    EXPECT_EQ(path.level(), 4);
    EXPECT_EQ(path.framework(), "mca");
    EXPECT_EQ(path.component(), "base");
    EXPECT_EQ(path.name(), "component_path");
    EXPECT_NE(path.help().find("<libdir>/transit"), std::string::npos) << path.help();
    EXPECT_EQ(path.source().origin, Origin::default_value);
}

TEST_F(ParamRegistry, LevelsOneToNine) {
    Registry& r = registry();
    EXPECT_EQ(r.add("t", "c", {"l1", Type::integer, "0", "h", 1}).level(), 1);
    EXPECT_EQ(r.add("t", "c", {"l9", Type::integer, "0", "h", 9}).level(), 9);
    EXPECT_THROW(r.add("t", "c", {"l0", Type::integer, "0", "h", 0}), std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", {"l10", Type::integer, "0", "h", 10}), std::invalid_argument);
    EXPECT_EQ(r.find("t_c_l0"), nullptr);
}

TEST_F(ParamRegistry, AddIsIdempotentForSameType) {
    Registry& r = registry();
    Variable& a = r.add("t", "c", {"x", Type::integer, "1", "h", 5});
    Variable& b = r.add("t", "c", {"x", Type::integer, "1", "h", 5});
    EXPECT_EQ(&a, &b);
    EXPECT_THROW(r.add("t", "c", {"x", Type::size, "1", "h", 5}), std::invalid_argument);
    EXPECT_EQ(r.all().size(), 3u);  // the two core parameters and t_c_x
}

TEST_F(ParamRegistry, BadDeclarationsAreRejected) {
    Registry& r = registry();
    EXPECT_THROW(r.add("t", "c", {"bad_default", Type::size, "lots", "h", 5}),
                 std::invalid_argument);
    EXPECT_THROW(r.add("t", "c", {"no_choices", Type::enumeration, "a", "h", 5}),
                 std::invalid_argument);
    r.add("t", "c", {"first", Type::integer, "0", "h", 5, {}, "t_c_alias"});
    EXPECT_THROW(r.add("t", "c", {"alias", Type::integer, "0", "h", 5}), std::invalid_argument);
}

TEST_F(ParamRegistry, EveryTypeFromTheApi) {
    Registry& r = registry();
    const Decl decls[] = {
        {"b", Type::boolean, "false", "h", 5},
        {"i", Type::integer, "-3", "h", 5},
        {"u", Type::unsigned_integer, "7", "h", 5},
        {"s", Type::size, "4k", "h", 5},
        {"d", Type::real, "0.5", "h", 5},
        {"str", Type::string, "hello world", "h", 5},
        {"e", Type::enumeration, "poll", "h", 5, "poll,yield,sleep"},
        {"l", Type::list, "a,b", "h", 5},
    };
    r.add_all("t", "c", decls);
    EXPECT_FALSE(r.get("t_c_b").as_bool());
    EXPECT_EQ(r.get("t_c_i").as_int(), -3);
    EXPECT_EQ(r.get("t_c_u").as_unsigned(), 7u);
    EXPECT_EQ(r.get("t_c_s").as_unsigned(), 4096u);
    EXPECT_DOUBLE_EQ(r.get("t_c_d").as_real(), 0.5);
    EXPECT_EQ(r.get("t_c_str").as_string(), "hello world");
    EXPECT_EQ(r.get("t_c_e").as_string(), "poll");
    EXPECT_EQ(r.get("t_c_e").choices(), (std::vector<std::string>{"poll", "yield", "sleep"}));
    EXPECT_EQ(r.get("t_c_l").as_list(), (std::vector<std::string>{"a", "b"}));

    for (const char* yes : {"true", "yes", "1", "on", "TRUE", "Yes", "ON"}) {
        r.set("t_c_b", yes, {Origin::api});
        EXPECT_TRUE(r.get("t_c_b").as_bool()) << yes;
    }
    for (const char* no : {"false", "no", "0", "off", "False", "NO", "Off"}) {
        r.set("t_c_b", no, {Origin::api});
        EXPECT_FALSE(r.get("t_c_b").as_bool()) << no;
    }
    r.set("t_c_i", "-9223372036854775808", {Origin::api});
    EXPECT_EQ(r.get("t_c_i").as_int(), INT64_MIN);
    r.set("t_c_u", "18446744073709551615", {Origin::api});
    EXPECT_EQ(r.get("t_c_u").as_unsigned(), UINT64_MAX);
    r.set("t_c_s", "2g", {Origin::api});
    EXPECT_EQ(r.get("t_c_s").as_unsigned(), 2ull << 30);
    EXPECT_EQ(r.get("t_c_s").text(), "2g");
    r.set("t_c_d", "1e-3", {Origin::api});
    EXPECT_DOUBLE_EQ(r.get("t_c_d").as_real(), 1e-3);
    r.set("t_c_e", "sleep", {Origin::api});
    EXPECT_EQ(r.get("t_c_e").as_string(), "sleep");
    r.set("t_c_l", " x , y ,z", {Origin::api});
    EXPECT_EQ(r.get("t_c_l").as_list(), (std::vector<std::string>{"x", "y", "z"}));
    r.set("t_c_l", "", {Origin::api});
    EXPECT_TRUE(r.get("t_c_l").as_list().empty());
    EXPECT_EQ(r.get("t_c_l").source().origin, Origin::api);
}

TEST_F(ParamRegistry, WrongTypedViewThrows) {
    Registry& r = registry();
    Variable& s = r.add("t", "c", {"s", Type::size, "1", "h", 5});
    EXPECT_THROW(s.as_bool(), Error);
    EXPECT_THROW(s.as_int(), Error);
    EXPECT_THROW(s.as_string(), Error);
    EXPECT_THROW(s.as_list(), Error);
    EXPECT_THROW(s.as_real(), Error);
    EXPECT_EQ(s.as_unsigned(), 1u);
}

struct BadValue {
    Type type;
    const char* value;
    const char* expected;  // a fragment of the expected form
};

TEST_F(ParamRegistry, BadValuesNameParameterValueSourceAndForm) {
    const BadValue cases[] = {
        {Type::boolean, "maybe", "expected true/false"},
        {Type::integer, "12abc", "expected a whole number"},
        {Type::integer, "99999999999999999999", "out of range"},
        {Type::unsigned_integer, "-1", "negative"},
        {Type::size, "banana", "expected a number with an optional k, M or g suffix, e.g. 4k"},
        {Type::size, "-4k", "is not a size"},
        {Type::real, "fast", "expected a decimal number"},
        {Type::real, "inf", "is not a number"},
        {Type::enumeration, "spin", "expected one of: poll, yield"},
        {Type::list, "a,,b", "expected comma-separated items"},
    };
    Registry& r = registry();
    int n = 0;
    for (const BadValue& c : cases) {
        std::string name = "v" + std::to_string(n++);
        const char* def = c.type == Type::enumeration ? "poll" : c.type == Type::list ? "" : "1";
        Decl d{name, c.type, def, "h", 5, c.type == Type::enumeration ? "poll,yield" : ""};
        r.add("t", "c", d);
        std::string e = error_text([&] { r.set("t_c_" + name, c.value, {Origin::api}); });
        expect_contains(e, {"parameter t_c_" + name, std::string("\"") + c.value + "\"",
                            "(from api)", c.expected});
        EXPECT_EQ(r.get("t_c_" + name).text(), def) << "a bad value must not stick";
    }
}

TEST_F(ParamRegistry, ExampleErrorMessageFromTheEnvironment) {
    set_env("btl_self_eager_limit", "banana");
    reset_for_testing();
    std::string e = error_text([] {
        registry().add("btl", "self", {"eager_limit", Type::size, "4k", "h", 4});
    });
    EXPECT_EQ(e,
              "parameter btl_self_eager_limit: value \"banana\" (from environment "
              "TRANSIT_MCA_btl_self_eager_limit) is not a size; expected a number with an "
              "optional k, M or g suffix, e.g. 4k");
    EXPECT_EQ(registry().find("btl_self_eager_limit"), nullptr) << "a failed add registers nothing";
}

TEST_F(ParamRegistry, SetBeforeRegistrationAppliesOnRegistration) {
    Registry& r = registry();
    r.set("t_c_late", "16k", {Origin::api});
    EXPECT_EQ(r.find("t_c_late"), nullptr);
    Variable& v = r.add("t", "c", {"late", Type::size, "1", "h", 5});
    EXPECT_EQ(v.as_unsigned(), 16384u);
    EXPECT_EQ(v.source().origin, Origin::api);
}

TEST_F(ParamRegistry, BadValueSetBeforeRegistrationFailsTheRegistration) {
    Registry& r = registry();
    r.set("t_c_late", "lots", {Origin::api});
    std::string e = error_text([&] { r.add("t", "c", {"late", Type::size, "1", "h", 5}); });
    expect_contains(e, {"t_c_late", "\"lots\"", "(from api)", "is not a size"});
}

TEST_F(ParamRegistry, SynonymsWorkSilently) {
    Registry& r = registry();
    r.set("btl_tcp_eager", "8k", {Origin::api});
    testing::internal::CaptureStderr();
    Variable& v = r.add("btl", "tcp",
                        {"eager_limit", Type::size, "64k", "h", 4, {}, "btl_tcp_eager, tcp_eager"});
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(v.as_unsigned(), 8192u);
    EXPECT_EQ(err, "");
    EXPECT_EQ(r.find("tcp_eager"), &v);
    EXPECT_EQ(v.synonyms(), (std::vector<std::string>{"btl_tcp_eager", "tcp_eager"}));
    r.set("tcp_eager", "1M", {Origin::api});
    EXPECT_EQ(v.as_unsigned(), 1u << 20);
}

TEST_F(ParamRegistry, FullNameBeatsSynonymAndDeprecatedNameInTheSameSource) {
    Registry& r = registry();
    r.set("t_c_old", "1", {Origin::api});
    r.set("t_c_syn", "2", {Origin::api});
    r.set("t_c_new", "3", {Origin::api});
    Variable& v = r.add("t", "c", {"new", Type::integer, "0", "h", 5, {}, "t_c_syn", "t_c_old"});
    EXPECT_EQ(v.as_int(), 3);
}

TEST_F(ParamRegistry, DeprecatedNameWorksAndWarnsOnceNamingTheSource) {
    set_env("btl_tcp_old_limit", "2k");
    reset_for_testing();
    Registry& r = registry();
    testing::internal::CaptureStderr();
    Variable& v = r.add("btl", "tcp",
                        {"eager_limit", Type::size, "64k", "h", 4, {}, {}, "btl_tcp_old_limit"});
    r.set("t_other", "1", {Origin::api});  // re-resolves every parameter
    r.set("btl_tcp_old_limit", "4k", {Origin::command_line, "--mca btl_tcp_old_limit"});
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(v.as_unsigned(), 4096u);
    EXPECT_EQ(v.deprecated_names(), (std::vector<std::string>{"btl_tcp_old_limit"}));
    EXPECT_EQ(r.find("btl_tcp_old_limit"), &v);
    expect_contains(err, {"btl_tcp_old_limit", "btl_tcp_eager_limit",
                          "environment TRANSIT_MCA_btl_tcp_old_limit", "deprecated"});
    std::size_t first = err.find("deprecated");
    EXPECT_EQ(err.find("deprecated", first + 1), std::string::npos) << "warned twice: " << err;
}

TEST_F(ParamRegistry, ApiBeatsEverySource) {
    set_env("t_c_x", "5");
    reset_for_testing();
    Registry& r = registry();
    Variable& v = r.add("t", "c", {"x", Type::integer, "0", "h", 5});
    EXPECT_EQ(v.as_int(), 5);
    r.set("t_c_x", "6", {Origin::api});
    EXPECT_EQ(v.as_int(), 6);
    EXPECT_EQ(v.source().origin, Origin::api);
    // A lower source set later does not override the API.
    r.set("t_c_x", "7", {Origin::command_line});
    EXPECT_EQ(v.as_int(), 6);
}

TEST_F(ParamRegistry, GetUnknownNamesIt) {
    std::string e = error_text([] { registry().get("btl_nothing_here"); });
    EXPECT_NE(e.find("btl_nothing_here"), std::string::npos) << e;
    EXPECT_EQ(registry().find("btl_nothing_here"), nullptr);
}

TEST_F(ParamRegistry, ToStrings) {
    EXPECT_EQ(to_string(Type::size), "size");
    EXPECT_EQ(to_string(Type::enumeration), "enum");
    EXPECT_EQ(to_string(Origin::environment), "environment");
    EXPECT_EQ(to_string(Origin::command_line), "command line");
    EXPECT_EQ((Source{Origin::param_file, "/x.conf", 12}).describe(), "file /x.conf:12");
    EXPECT_EQ((Source{Origin::environment, "TRANSIT_MCA_btl", 0}).describe(),
              "environment TRANSIT_MCA_btl");
    EXPECT_EQ(Source{}.describe(), "default");
}

}  // namespace
}  // namespace transit::params::test
