#include "tests/pml/pml_env.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "pml/engine.hpp"
#include "tests/pml/expected_errors.hpp"

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

// Every test talks to every rank: with one unreachable (a transport that could
// not open, the log says why) they would fail one by one and then wait for
// good in a wildcard receive.  The rank ends at once instead, and the launcher
// ends the job.
void require_every_rank_reachable(Context& c) {
    for (Rank r = 0; r < c.size(); ++r) {
        if (c.engine().eager_paths(r) > 0) continue;
        std::fprintf(stderr,
                     "pml tests: rank %u cannot reach rank %u (see the error above); "
                     "no test can run\n",
                     c.rank(), r);
        std::fflush(stderr);
        std::_Exit(2);
    }
}

// The tests that forge keys, counters and one-sided frames, or send to a
// handler nobody registered, make the target refuse or drop them, logged as
// errors (and summed up at finalize): those lines are expected, any other
// error line reaches stderr.
class ContextEnvironment : public testing::Environment {
    void SetUp() override {
        refusals_ = std::make_unique<ExpectedErrors>(std::initializer_list<std::string_view>{
            "^pml: a message of kind [a-z_]+ from rank [0-9]+ was (refused|dropped): ",
            "^pml: [0-9]+ messages of kind [a-z_]+ were dropped or refused in all ",
            "^pml: active message from rank [0-9]+ for handler [0-9]+ which is not registered"});
        the_context = std::make_unique<Context>(init());
        require_every_rank_reachable(*the_context);
        testing::UnitTest::GetInstance()->listeners().Append(
            new PmlBarrierAfterEachTest);  // gtest takes ownership
    }
    void TearDown() override {
        the_context.reset();
        std::printf("pml tests: %llu refusal(s) of forged frames logged, as expected\n",
                    static_cast<unsigned long long>(refusals_->kept()));
        refusals_.reset();
    }
    std::unique_ptr<ExpectedErrors> refusals_;
};

[[maybe_unused]] testing::Environment* const env =
    testing::AddGlobalTestEnvironment(new ContextEnvironment);  // gtest takes ownership

}  // namespace

Context& ctx() {
    return *the_context;
}

}  // namespace transit::test
