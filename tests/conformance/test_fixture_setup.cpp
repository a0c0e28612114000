// transit_btl_fixture_setup_test: a case whose fixture cannot start (no such
// component) must fail in SetUp, and its body must not run on the half-built
// fixture (no module: the body would dereference nothing).  GoogleTest runs a
// body after non-fatal SetUp failures, so this checks the fixture makes them
// fatal.  The case is expected to fail; the program passes when it did, for
// that reason, and the body never ran.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/runtime.hpp"
#include "tests/conformance/btl_test.hpp"
#include "tests/conformance/suite_env.hpp"

namespace transit::conformance {
namespace {

bool body_ran = false;

class Fixture : public BtlTest {};

TEST_P(Fixture, BodyNeedsAModule) {
    body_ran = true;
    EXPECT_GT(attr().max_send_size, 0u);  // dereferences the module
}

INSTANTIATE_TEST_SUITE_P(btl, Fixture, ::testing::Values(std::string("nosuch")),
                         component_param_name);

}  // namespace
}  // namespace transit::conformance

int main(int argc, char** argv) {
    using namespace transit::conformance;
    suite_env().runtime = transit::rt::singleton_runtime();
    suite_env().component = "nosuch";
    ::testing::InitGoogleTest(&argc, argv);
    // The run's status is the expected failure; what matters is how the case failed.
    const int status = RUN_ALL_TESTS();
    const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
    const bool failed = status != 0 && u.failed_test_count() == 1;
    suite_env().runtime.reset();
    if (!failed || body_ran) {
        fmt::print(stderr, "FAIL: the case {}; its body {}\n", failed ? "failed" : "did not fail",
                   body_ran ? "ran" : "did not run");
        return 1;
    }
    fmt::print("PASS: the case failed in SetUp and its body did not run\n");
    return 0;
}
