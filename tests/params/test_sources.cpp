// Where values come from: real files, real environment variables and a real
// argv, in every order of precedence.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "params/sources.hpp"
#include "tests/params/params_fixture.hpp"

namespace transit::params::test {
namespace {

using Sources = ParamsTest;

Variable& add_x() {
    return registry().add("t", "c", {"x", Type::string, "default", "h", 5});
}

// Each source in turn is the highest one present; the value and source follow it.
TEST_F(Sources, PrecedenceAcrossAllSources) {
    std::string sys = write_system_file("t_c_x = system\n");
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "system");
    EXPECT_EQ(add_x().source().describe(), "file " + sys + ":1");
    EXPECT_EQ(add_x().source().origin, Origin::system_file);

    std::string user = write_user_file("# mine\n\nt_c_x = user\n");
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "user");
    EXPECT_EQ(add_x().source().describe(), "file " + user + ":3");
    EXPECT_EQ(add_x().source().origin, Origin::user_file);

    std::string pf = write_file("p.conf", "t_c_x = paramfile\n");
    write_user_file("t_c_x = user\nmca_base_param_files = " + pf + "\n");
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "paramfile");
    EXPECT_EQ(add_x().source().origin, Origin::param_file);
    EXPECT_EQ(add_x().source().describe(), "file " + pf + ":1");

    set_env("t_c_x", "env");
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "env");
    EXPECT_EQ(add_x().source().describe(), "environment TRANSIT_MCA_t_c_x");

    command_line({"--mca", "t_c_x", "cmdline"});
    EXPECT_EQ(add_x().text(), "cmdline");
    EXPECT_EQ(add_x().source().origin, Origin::command_line);
    EXPECT_EQ(add_x().source().describe(), "command line --mca t_c_x");

    registry().set("t_c_x", "api", {Origin::api});
    EXPECT_EQ(add_x().text(), "api");
    EXPECT_EQ(add_x().source().origin, Origin::api);
}

TEST_F(Sources, NoSourceMeansDefault) {
    EXPECT_EQ(add_x().text(), "default");
    EXPECT_EQ(add_x().source().origin, Origin::default_value);
}

TEST_F(Sources, SettingsArriveBeforeRegistration) {
    set_env("t_c_x", "early");
    reset_for_testing();
    command_line({"--mca", "t_c_y", "12"});
    EXPECT_EQ(registry().find("t_c_x"), nullptr);
    EXPECT_EQ(add_x().text(), "early");
    EXPECT_EQ(registry().add("t", "c", {"y", Type::integer, "0", "h", 5}).as_int(), 12);
}

TEST_F(Sources, CommandLineRemovesMcaPairsAndKeepsTheRest) {
    std::vector<std::string> rest = command_line(
        {"-n", "2", "--mca", "t_c_x", "a b", "prog", "--mca", "t_c_y", "3", "--", "--mca", "q"});
    EXPECT_EQ(rest, (std::vector<std::string>{"-n", "2", "prog", "--", "--mca", "q"}));
    EXPECT_EQ(add_x().text(), "a b");
    EXPECT_EQ(registry().add("t", "c", {"y", Type::integer, "0", "h", 5}).as_int(), 3);
}

TEST_F(Sources, CommandLineLastPairWins) {
    command_line({"--mca", "t_c_x", "one", "--mca", "t_c_x", "two"});
    EXPECT_EQ(add_x().text(), "two");
}

TEST_F(Sources, CommandLineMissingValueIsAnError) {
    std::string e = error_text([&] { command_line({"prog", "--mca", "t_c_x"}); });
    expect_contains(e, {"--mca needs a parameter name and a value", "t_c_x"});
    e = error_text([&] { command_line({"--mca"}); });
    expect_contains(e, {"--mca needs"});
    e = error_text([&] { command_line({"--mca", "bad-name", "1"}); });
    expect_contains(e, {"bad-name", "not a parameter name"});
}

TEST_F(Sources, CommandLineAfterRegistrationReResolves) {
    Variable& v = registry().add("t", "c", {"n", Type::size, "1", "h", 5});
    command_line({"--mca", "t_c_n", "2M"});
    EXPECT_EQ(v.as_unsigned(), 2u << 20);
    std::string e = error_text([&] { command_line({"--mca", "t_c_n", "huge"}); });
    expect_contains(e, {"t_c_n", "\"huge\"", "command line --mca t_c_n", "is not a size"});
    EXPECT_EQ(v.as_unsigned(), 2u << 20) << "a rejected command line changes nothing";
}

TEST_F(Sources, FileFormat) {
    write_system_file(
        "# comment line\n"
        "   \n"
        "t_c_a = 1   # trailing comment\n"
        "t_c_b=no spaces\n"
        "  t_c_c   =   padded value  \n"
        "t_c_d = \"quoted # not a comment\"\n"
        "t_c_e =\n"
        "t_c_a = 2\n");
    reset_for_testing();
    Registry& r = registry();
    Variable& a = r.add("t", "c", {"a", Type::integer, "0", "h", 5});
    EXPECT_EQ(a.as_int(), 2) << "the last line wins within a file";
    EXPECT_EQ(a.source().line, 8);
    EXPECT_EQ(r.add("t", "c", {"b", Type::string, "", "h", 5}).as_string(), "no spaces");
    EXPECT_EQ(r.add("t", "c", {"c", Type::string, "", "h", 5}).as_string(), "padded value");
    EXPECT_EQ(r.add("t", "c", {"d", Type::string, "", "h", 5}).as_string(),
              "quoted # not a comment");
    Variable& e = r.add("t", "c", {"e", Type::string, "x", "h", 5});
    EXPECT_EQ(e.as_string(), "");
    EXPECT_EQ(e.source().origin, Origin::system_file);
}

TEST_F(Sources, MalformedLineNamesFileAndLine) {
    const char* bad_lines[] = {"just words", "= value", "bad name = 1", "x = \"open", "x = a\"b"};
    for (const char* bad : bad_lines) {
        std::string path = write_user_file(std::string("t_c_x = 1\n") + bad + "\n");
        reset_for_testing();
        std::string e = error_text([] { registry(); });
        EXPECT_NE(e.find("file " + path + ":2:"), std::string::npos) << bad << " -> " << e;
    }
}

// A file of megabytes with no newline (a log or a binary named by accident)
// is refused at the bound, naming the file and line, before it is all read.
TEST_F(Sources, AnOverlongLineNamesFileAndLine) {
    std::string path = write_file("long.conf", "t_c_x = 1\n" + std::string(4 << 20, 'x'));
    set_env("mca_base_param_files", path);
    reset_for_testing();
    std::string e = error_text([] { registry(); });
    EXPECT_NE(e.find("file " + path + ":2: line longer than 65536 bytes"), std::string::npos)
        << e.substr(0, 300);
    EXPECT_LT(e.size(), 1000u) << "the line itself is not in the message";
}

TEST_F(Sources, ALineAtTheBoundIsRead) {
    std::string value(max_line_bytes - 8, 'v');
    std::string path = write_user_file("t_c_x = " + value);
    reset_for_testing();
    EXPECT_EQ(add_x().text(), value);
    EXPECT_EQ(add_x().source().describe(), "file " + path + ":1");
}

// Larger than any parameter file: refused by its size, nothing read.
TEST_F(Sources, AnOversizedFileIsRefusedUnread) {
    std::string path = write_file("big.conf", "");
    std::filesystem::resize_file(path, max_file_bytes + 1);  // sparse: nothing written
    set_env("mca_base_param_files", path);
    reset_for_testing();
    std::string e = error_text([] { registry(); });
    EXPECT_NE(e.find("file " + path + ": " + std::to_string(max_file_bytes + 1) +
                     " bytes, larger than a parameter file may be"),
              std::string::npos)
        << e;
}

// The same bound on a stream, which has no size to look at first.
TEST_F(Sources, AnOversizedStreamIsRefused) {
    std::string comment = "#" + std::string(max_line_bytes - 2, 'c') + "\n";  // a full line
    std::string text;
    while (text.size() <= max_file_bytes) text += comment;
    std::istringstream in(text);
    Layer layer;
    std::string e = error_text([&] { read_lines(in, "s.conf", Origin::param_file, layer); });
    EXPECT_NE(e.find("file s.conf: larger than a parameter file may be"), std::string::npos) << e;
}

TEST_F(Sources, BadValueInAFileNamesFileAndLine) {
    std::string path = write_system_file("\nt_c_s = 12 apples\n");
    reset_for_testing();
    std::string e = error_text([] { registry().add("t", "c", {"s", Type::size, "1", "h", 5}); });
    EXPECT_EQ(e, "parameter t_c_s: value \"12 apples\" (from file " + path +
                     ":2) is not a size; expected a number with an optional k, M or g suffix, "
                     "e.g. 4k");
}

TEST_F(Sources, SeveralParamFilesFirstListedWins) {
    std::string a = write_file("a.conf", "t_c_x = from_a\n");
    std::string b = write_file("b.conf", "t_c_x = from_b\nt_c_y = 2\n");
    std::string c = write_file("c.conf", "t_c_y = 3\nt_c_z = 4\n");
    set_env("mca_base_param_files", a + ":" + b + "::" + c);
    reset_for_testing();
    Registry& r = registry();
    EXPECT_EQ(add_x().text(), "from_a");
    EXPECT_EQ(add_x().source().describe(), "file " + a + ":1");
    Variable& y = r.add("t", "c", {"y", Type::integer, "0", "h", 5});
    EXPECT_EQ(y.as_int(), 2);
    EXPECT_EQ(y.source().where, b);
    EXPECT_EQ(r.add("t", "c", {"z", Type::integer, "0", "h", 5}).as_int(), 4);
}

TEST_F(Sources, ParamFilesFromSystemFileAndCommandLine) {
    std::string a = write_file("a.conf", "t_c_x = from_a\n");
    std::string b = write_file("b.conf", "t_c_x = from_b\n");
    write_system_file("mca_base_param_files = " + a + "\n");
    reset_for_testing();
    Variable& x = add_x();
    EXPECT_EQ(x.text(), "from_a");
    // A later source naming other files replaces the set of files read.
    command_line({"--mca", "mca_base_param_files", b});
    EXPECT_EQ(x.text(), "from_b");
    EXPECT_EQ(registry().get("mca_base_param_files").source().origin, Origin::command_line);
    // The API still beats the files.
    registry().set("t_c_x", "api", {Origin::api});
    EXPECT_EQ(x.text(), "api");
}

TEST_F(Sources, ParamFilesTildeIsHome) {
    write_file("conf/a.conf", "t_c_x = from_home\n");
    registry().set("mca_base_param_files", "~/conf/a.conf", {Origin::api});
    EXPECT_EQ(add_x().text(), "from_home");
    EXPECT_EQ(add_x().source().where, (dir_ / "conf" / "a.conf").string());
}

TEST_F(Sources, ParamFilesBelowEnvironment) {
    std::string a = write_file("a.conf", "t_c_x = from_a\n");
    set_env("mca_base_param_files", a);
    set_env("t_c_x", "env");
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "env");
}

TEST_F(Sources, MissingParamFileIsAnError) {
    std::string missing = (dir_ / "nope.conf").string();
    set_env("mca_base_param_files", missing);
    reset_for_testing();
    std::string e = error_text([] { registry(); });
    expect_contains(e, {missing, "no such file", "mca_base_param_files",
                        "environment TRANSIT_MCA_mca_base_param_files"});
}

TEST_F(Sources, ParamFileCannotNameParamFiles) {
    std::string a = write_file("a.conf", "mca_base_param_files = /x\n");
    set_env("mca_base_param_files", a);
    reset_for_testing();
    std::string e = error_text([] { registry(); });
    expect_contains(e, {a + ":1", "mca_base_param_files"});
}

TEST_F(Sources, MissingSystemAndUserFilesAreFine) {
    EXPECT_FALSE(std::filesystem::exists(system_file_));
    EXPECT_EQ(system_file_path(), system_file_);
    EXPECT_EQ(user_file_path(), (dir_ / ".transit" / "mca-params.conf").string());
    EXPECT_EQ(add_x().text(), "default");
}

TEST_F(Sources, DefaultSystemFileSitsBesideTheLibrary) {
    set_system_file_for_testing("");
    std::string path = system_file_path();
    EXPECT_TRUE(path.ends_with("/etc/transit-mca-params.conf")) << path;
    EXPECT_TRUE(std::filesystem::path(path).is_absolute()) << path;
}

TEST_F(Sources, DeprecatedNameInAFileWarnsWithFileAndLine) {
    std::string path = write_user_file("\n\nt_c_old = 5\n");
    reset_for_testing();
    testing::internal::CaptureStderr();
    Variable& v = registry().add("t", "c", {"new", Type::integer, "0", "h", 5, {}, {}, "t_c_old"});
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(v.as_int(), 5);
    expect_contains(err, {"t_c_old", "t_c_new", "file " + path + ":3", "deprecated"});
}

TEST_F(Sources, WarnUnknownSuggestsTheNearestName) {
    set_env("btl_tcp_eagr_limit", "4k");
    set_env("btl_tcp_eager_limit", "8k");
    set_env("zzzzzz_qqqq", "1");
    reset_for_testing();
    command_line({"--mca", "btl_tcp_eager_limt", "1", "--mca", "btl_tcp_old", "2"});
    registry().add("btl", "tcp", {"eager_limit", Type::size, "64k", "h", 4, {}, {}, "btl_tcp_old"});
    testing::internal::CaptureStderr();
    std::vector<std::string> w = registry().warn_unknown();
    std::vector<std::string> again = registry().warn_unknown();
    std::string err = testing::internal::GetCapturedStderr();
    ASSERT_EQ(w.size(), 3u) << err;
    EXPECT_EQ(w[0],
              "TRANSIT_MCA_btl_tcp_eagr_limit names no known parameter (did you mean "
              "btl_tcp_eager_limit?)");
    EXPECT_EQ(w[1], "TRANSIT_MCA_zzzzzz_qqqq names no known parameter");
    EXPECT_EQ(w[2],
              "--mca btl_tcp_eager_limt names no known parameter (did you mean "
              "btl_tcp_eager_limit?)");
    EXPECT_TRUE(again.empty()) << "each name warns once";
    EXPECT_NE(err.find("warning: TRANSIT_MCA_btl_tcp_eagr_limit names no known parameter"),
              std::string::npos)
        << err;
}

TEST_F(Sources, WarnUnknownSuggestsTheCurrentNameForAMisspeltDeprecatedOne) {
    set_env("t_c_olde", "1");
    reset_for_testing();
    registry().add("t", "c", {"new_name", Type::integer, "0", "h", 5, {}, {}, "t_c_old"});
    testing::internal::CaptureStderr();
    std::vector<std::string> w = registry().warn_unknown();
    testing::internal::GetCapturedStderr();
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0], "TRANSIT_MCA_t_c_olde names no known parameter (did you mean t_c_new_name?)");
}

TEST_F(Sources, WarnUnknownNamesTheFileAndLineOfAMisspeltName) {
    const std::string sys = write_system_file("btl_tcp_links = 1\nzzzzzz_qqqq = 1\n");
    const std::string user = write_user_file("# mine\nbtl_tcp_linkz = 2\n");
    const std::string extra = write_file("extra.conf", "\n\nbtl_tcp_lnks = 3\n");
    set_env("mca_base_param_files", extra);
    reset_for_testing();
    registry().add("btl", "tcp", {"links", Type::unsigned_integer, "1", "h", 4});
    testing::internal::CaptureStderr();
    std::vector<std::string> w = registry().warn_unknown();
    std::vector<std::string> again = registry().warn_unknown();
    std::string err = testing::internal::GetCapturedStderr();
    ASSERT_EQ(w.size(), 3u) << err;
    EXPECT_EQ(w[0], "file " + sys + ":2: zzzzzz_qqqq names no known parameter");
    EXPECT_EQ(w[1], "file " + user +
                        ":2: btl_tcp_linkz names no known parameter (did you mean btl_tcp_links?)");
    EXPECT_EQ(w[2], "file " + extra +
                        ":3: btl_tcp_lnks names no known parameter (did you mean btl_tcp_links?)");
    EXPECT_TRUE(again.empty()) << "each file setting warns once";
    EXPECT_NE(err.find("warning: file " + user + ":2: btl_tcp_linkz"), std::string::npos) << err;
}

TEST_F(Sources, ANulInAFileValueDoesNotCutTheMessageShort) {
    const std::string path = write_user_file(std::string("t_c_n = 1\0x\n", 12));
    reset_for_testing();
    const std::string e = error_text([] {
        registry().add("t", "c", {"n", Type::integer, "0", "h", 5});
    });
    expect_contains(e, {"value \"1\\x00x\"", "(from file " + path + ":1)", "is not an integer"});
}

TEST_F(Sources, ControlCharactersInAValueAreShownAsEscapes) {
    set_env("t_c_n", "\x1b[2J7\t\"\n");
    reset_for_testing();
    const std::string e = error_text([] {
        registry().add("t", "c", {"n", Type::integer, "0", "h", 5});
    });
    expect_contains(e, {"value \"\\x1b[2J7\\t\\\"\\n\"", "(from environment TRANSIT_MCA_t_c_n)"});
    EXPECT_EQ(e.find('\x1b'), std::string::npos) << "no raw escape reaches a terminal";
}

TEST_F(Sources, ANulInAnApiValueStillNamesTheSource) {
    registry().add("t", "c", {"n", Type::integer, "0", "h", 5});
    const std::string e = error_text([] {
        registry().set("t_c_n", std::string_view("5\0", 2), {Origin::api, "tool", 0});
    });
    expect_contains(e, {"value \"5\\x00\"", "(from api (tool))"});
}

TEST_F(Sources, ResetReReadsTheEnvironment) {
    set_env("t_c_x", "first");
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "first");
    set_env("t_c_x", "second");
    EXPECT_EQ(add_x().text(), "first") << "the environment is read once";
    reset_for_testing();
    EXPECT_EQ(add_x().text(), "second");
}

}  // namespace
}  // namespace transit::params::test
