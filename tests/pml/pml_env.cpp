#include "tests/pml/pml_env.hpp"

#include <memory>

namespace transit::test {

namespace {

std::unique_ptr<Context> the_context;

class ContextEnvironment : public testing::Environment {
    void SetUp() override { the_context = std::make_unique<Context>(init()); }
    void TearDown() override { the_context.reset(); }
};

[[maybe_unused]] testing::Environment* const env =
    testing::AddGlobalTestEnvironment(new ContextEnvironment);  // gtest takes ownership

}  // namespace

Context& ctx() {
    return *the_context;
}

}  // namespace transit::test
