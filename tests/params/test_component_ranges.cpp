// The installed btl components' parameter declarations: every number declares
// the range its component can hold, so a value that would be truncated, or
// refused later without naming its source, is refused where it is set.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework/repository.hpp"
#include "tests/params/params_fixture.hpp"

namespace transit::params::test {
namespace {

class ComponentRanges : public ParamsTest {
  protected:
    // Loads the components next to libtransit and registers their parameters.
    void register_components() {
        loaded_ = mca::load_components("btl");
        for (mca::LoadedComponent& c : loaded_.components)
            c.component().register_params(registry());
    }
    bool have(const std::string& name) const {
        for (const mca::LoadedComponent& c : loaded_.components)
            if (c.record().name == name) return true;
        return false;
    }
    mca::LoadResult loaded_;
};

TEST_F(ComponentRanges, APortRangeBeyondWhatTcpHoldsIsRefusedWithItsFile) {
    const std::string file = write_user_file("btl_tcp_port_range = 4294967297\n");
    reset_for_testing();
    const std::string err = error_text([&] { register_components(); });
    if (!have("tcp") && err.empty()) GTEST_SKIP() << "no tcp component in this build";
    expect_contains(err, {"parameter btl_tcp_port_range", "\"4294967297\"", "file " + file + ":1",
                          "out of range", "0..65536"});
}

TEST_F(ComponentRanges, ANegativeConnectTimeoutIsRefusedWithItsSource) {
    set_env("btl_tcp_connect_timeout", "-5");
    reset_for_testing();
    const std::string err = error_text([&] { register_components(); });
    if (!have("tcp") && err.empty()) GTEST_SKIP() << "no tcp component in this build";
    expect_contains(err, {"parameter btl_tcp_connect_timeout", "\"-5\"",
                          "environment TRANSIT_MCA_btl_tcp_connect_timeout", "out of range"});
}

TEST_F(ComponentRanges, EveryNumericParameterOfAComponentDeclaresARange) {
    register_components();
    ASSERT_FALSE(loaded_.components.empty());
    std::vector<std::string> unbounded;
    for (const Variable* v : registry().all()) {
        if (v->framework() != "btl" || v->component().empty() || v->component() == "base") continue;
        const bool integer = v->type() == Type::integer || v->type() == Type::unsigned_integer ||
                             v->type() == Type::size;
        if ((integer && !v->min() && !v->max()) ||
            (v->type() == Type::real && !v->real_min() && !v->real_max()))
            unbounded.push_back(v->full_name());
    }
    EXPECT_TRUE(unbounded.empty()) << "no range: " << testing::PrintToString(unbounded);
}

}  // namespace
}  // namespace transit::params::test
