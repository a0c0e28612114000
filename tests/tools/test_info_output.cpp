// transit_info's parameter listing: a declared range is shown in the table, as
// :min: and :max: lines in --parsable and as min/max (null when unbounded) in
// --json; a parameter without one shows none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/params/params_fixture.hpp"
#include "tools/transit_info/info_output.hpp"

namespace transit::info::test {
namespace {

using params::Decl;
using params::Type;

class InfoOutput : public params::test::ParamsTest {
  protected:
    void SetUp() override {
        ParamsTest::SetUp();
        params::Registry& r = params::registry();
        report_.params.push_back(
            &r.add("btl", "demo",
                   Decl{"ring", Type::unsigned_integer, "256", "Slots", 6}.range(1, 65536)));
        report_.params.push_back(
            &r.add("btl", "demo", Decl{"limit", Type::size, "4k", "Eager", 4}.at_least(1)));
        report_.params.push_back(&r.add("btl", "demo", {"name", Type::string, "x", "Name", 4}));
    }
    Report report_;
};

TEST_F(InfoOutput, TableShowsTheRange) {
    const std::string out = format_table(report_);
    EXPECT_NE(out.find("btl_demo_ring = \"256\""), std::string::npos) << out;
    EXPECT_NE(out.find("      range: 1..65536\n"), std::string::npos) << out;
    EXPECT_NE(out.find("      range: at least 1\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("range: \n"), std::string::npos) << "no empty range line:\n" << out;
}

TEST_F(InfoOutput, ParsableHasMinAndMaxLines) {
    const std::string out = format_parsable(report_);
    const std::string ring = "mca:btl:demo:param:btl_demo_ring:";
    EXPECT_NE(out.find(ring + "min:1\n"), std::string::npos) << out;
    EXPECT_NE(out.find(ring + "max:65536\n"), std::string::npos) << out;
    const std::string limit = "mca:btl:demo:param:btl_demo_limit:";
    EXPECT_NE(out.find(limit + "min:1\n"), std::string::npos) << out;
    EXPECT_EQ(out.find(limit + "max:"), std::string::npos) << out;
    EXPECT_EQ(out.find("btl_demo_name:min:"), std::string::npos) << out;
}

TEST_F(InfoOutput, JsonHasMinAndMax) {
    const nlohmann::json doc = nlohmann::json::parse(format_json(report_));
    const auto& ps = doc.at("parameters");
    ASSERT_EQ(ps.size(), 3u);
    EXPECT_EQ(ps[0].at("min"), 1);
    EXPECT_EQ(ps[0].at("max"), 65536);
    EXPECT_EQ(ps[1].at("min"), 1);
    EXPECT_TRUE(ps[1].at("max").is_null());
    EXPECT_TRUE(ps[2].at("min").is_null());
}

}  // namespace
}  // namespace transit::info::test
