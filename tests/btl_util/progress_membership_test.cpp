// keep_registered with a real engine: a callback runs from progress() exactly
// while it is wanted, joins once however often it is asked, and a low one runs
// only on the engine's low-priority passes.
#include <gtest/gtest.h>

#include "transit/btl/util/progress_membership.hpp"

namespace transit::test {
namespace {

using btl::util::keep_registered;

int count_call(void* context) noexcept {
    ++*static_cast<int*>(context);
    return 0;
}

TEST(KeepRegistered, RunsOnlyWhileWanted) {
    ProgressEngine engine;
    ProgressEngine::Handle handle;
    int calls = 0;
    EXPECT_TRUE(keep_registered(engine, handle, false, &count_call, &calls));
    EXPECT_FALSE(handle);
    engine.progress();
    EXPECT_EQ(calls, 0);

    EXPECT_TRUE(keep_registered(engine, handle, true, &count_call, &calls));
    EXPECT_TRUE(keep_registered(engine, handle, true, &count_call, &calls));  // no second entry
    EXPECT_TRUE(handle);
    EXPECT_EQ(engine.size(), 1u);
    engine.progress();
    EXPECT_EQ(calls, 1);

    EXPECT_TRUE(keep_registered(engine, handle, false, &count_call, &calls));
    EXPECT_FALSE(handle);
    engine.progress();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(engine.size(), 0u);

    // Wanted again after leaving: it joins again.
    EXPECT_TRUE(keep_registered(engine, handle, true, &count_call, &calls));
    engine.progress();
    EXPECT_EQ(calls, 2);
}

TEST(KeepRegistered, LowPriorityRunsOnTheLowPasses) {
    ProgressEngine engine;
    engine.set_low_priority_interval(4);
    ProgressEngine::Handle handle;
    int calls = 0;
    ASSERT_TRUE(keep_registered(engine, handle, true, &count_call, &calls, ProgressPriority::low));
    for (int i = 0; i < 8; ++i) engine.progress();
    EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace transit::test
