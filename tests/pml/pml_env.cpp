#include "tests/pml/pml_env.hpp"

#include <memory>

namespace transit::test {

namespace {

std::unique_ptr<Context> the_context;

// A pml barrier after each test: a rank whose last message still sits in a
// transport's queue (a tcp connection being set up) keeps progressing until
// every rank has finished the test, before the harness's fence, which does
// not drive the pml.
class PmlBarrierAfterEachTest : public testing::EmptyTestEventListener {
    void OnTestEnd(const testing::TestInfo&) override {
        if (the_context) the_context->barrier();
    }
};

class ContextEnvironment : public testing::Environment {
    void SetUp() override {
        the_context = std::make_unique<Context>(init());
        testing::UnitTest::GetInstance()->listeners().Append(
            new PmlBarrierAfterEachTest);  // gtest takes ownership
    }
    void TearDown() override { the_context.reset(); }
};

[[maybe_unused]] testing::Environment* const env =
    testing::AddGlobalTestEnvironment(new ContextEnvironment);  // gtest takes ownership

}  // namespace

Context& ctx() {
    return *the_context;
}

}  // namespace transit::test
