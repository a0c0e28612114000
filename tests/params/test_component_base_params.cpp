// The installed btl components inherit the base table: each has the common
// parameters with the base type, level and its own default, and refuses a
// negative or non-numeric exclusivity naming the parameter and its source.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "framework/repository.hpp"
#include "tests/params/params_fixture.hpp"
#include "transit/btl/base_params.hpp"

namespace transit::params::test {
namespace {

using btl::BaseParam;

struct Defaults {
    std::string eager_limit, max_send_size, exclusivity;
};

// Each component's own defaults, as its users know them.
const std::map<std::string, Defaults> expected = {
    {"self", {"4k", "64k", "65536"}}, {"vader", {"32k", "32k", "65535"}},
    {"tcp", {"65600", "128k", "0"}},  {"uct", {"4k", "0", "32768"}},
    {"ofi", {"8k", "64k", "32768"}},  {"openib", {"12k", "16k", "1024"}},
};

class ComponentBaseParams : public ParamsTest {
  protected:
    void register_components() {
        loaded_ = mca::load_components("btl");
        for (mca::LoadedComponent& c : loaded_.components)
            c.component().register_params(registry());
    }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const mca::LoadedComponent& c : loaded_.components) out.push_back(c.record().name);
        return out;
    }
    // Each btl, given `value` as its exclusivity in the environment, refuses it
    // naming the parameter, the value and the variable.
    void expect_every_btl_refuses_exclusivity(const std::string& value) {
        register_components();
        for (const std::string& name : names()) {
            SCOPED_TRACE(name);
            const std::string param = "btl_" + name + "_exclusivity";
            set_env(param, value);
            reset_for_testing();
            const std::string err = error_text([&] { register_components(); });
            expect_contains(err, {param, "\"" + value + "\"", "environment TRANSIT_MCA_" + param});
            ::unsetenv(("TRANSIT_MCA_" + param).c_str());
            reset_for_testing();
        }
    }
    mca::LoadResult loaded_;
};

TEST_F(ComponentBaseParams, EveryBtlHasTheCommonParametersWithItsDefaults) {
    register_components();
    ASSERT_FALSE(loaded_.components.empty());
    for (const std::string& name : names()) {
        SCOPED_TRACE(name);
        ASSERT_TRUE(expected.count(name)) << "add the defaults of " << name << " to this test";
        const Defaults& d = expected.at(name);
        const std::pair<BaseParam, std::string> common[] = {
            {BaseParam::eager_limit, d.eager_limit},
            {BaseParam::max_send_size, d.max_send_size},
            {BaseParam::exclusivity, d.exclusivity},
        };
        for (const auto& [param, default_value] : common) {
            const Variable& v = btl::base_variable(registry(), name, param);
            EXPECT_EQ(v.default_value(), default_value) << v.full_name();
            EXPECT_EQ(v.type(), btl::base_decl(param).type) << v.full_name();
            EXPECT_EQ(v.level(), btl::base_decl(param).level) << v.full_name();
        }
        // The others, where a component has them, are declared as in the base table.
        for (BaseParam p : {BaseParam::latency, BaseParam::bandwidth, BaseParam::free_list_max}) {
            const Variable* v =
                registry().find("btl_" + name + "_" + std::string(btl::base_decl(p).name));
            if (v == nullptr) continue;
            EXPECT_EQ(v->type(), btl::base_decl(p).type) << v->full_name();
            EXPECT_EQ(v->level(), btl::base_decl(p).level) << v->full_name();
        }
    }
}

TEST_F(ComponentBaseParams, ANegativeExclusivityIsRefusedByEveryBtl) {
    expect_every_btl_refuses_exclusivity("-1");
}

TEST_F(ComponentBaseParams, ANonNumericExclusivityIsRefusedByEveryBtl) {
    expect_every_btl_refuses_exclusivity("high");
}

}  // namespace
}  // namespace transit::params::test
