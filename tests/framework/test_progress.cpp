// The progress engine: registration, removal (also from inside a callback),
// low-priority callbacks every Nth pass, and an idle engine doing nothing.
#include <gtest/gtest.h>

#include "transit/progress.hpp"

namespace transit {
namespace {

struct Counter {
    int calls = 0;
    int events = 1;  // what each call reports
};

int count(void* ctx) noexcept {
    auto* c = static_cast<Counter*>(ctx);
    ++c->calls;
    return c->events;
}

TEST(Progress, IdleEngineRunsNothing) {
    ProgressEngine e;
    EXPECT_EQ(e.size(), 0u);
    EXPECT_EQ(e.progress(), 0);
}

TEST(Progress, RunsEveryCallbackAndSumsEvents) {
    ProgressEngine e;
    Counter a{0, 2}, b{0, 3};
    ProgressEngine::Handle ha = e.add(&count, &a);
    ProgressEngine::Handle hb = e.add(&count, &b);
    EXPECT_TRUE(ha);
    EXPECT_TRUE(hb);
    EXPECT_NE(ha.id, hb.id);
    EXPECT_EQ(e.size(), 2u);
    EXPECT_EQ(e.progress(), 5);
    EXPECT_EQ(a.calls, 1);
    EXPECT_EQ(b.calls, 1);
}

TEST(Progress, RemovedCallbackIsNotCalledAgain) {
    ProgressEngine e;
    Counter a, b;
    ProgressEngine::Handle ha = e.add(&count, &a);
    e.add(&count, &b);
    e.remove(ha);
    EXPECT_EQ(e.progress(), 1);
    EXPECT_EQ(a.calls, 0);
    EXPECT_EQ(b.calls, 1);
    EXPECT_EQ(e.size(), 1u);  // compacted by the pass
}

// Adding a second callback, or removing one of two, takes effect on the next
// pass.
TEST(Progress, OneCallbackThenTwoThenOneAgain) {
    ProgressEngine e;
    Counter a{0, 1}, b{0, 10};
    ProgressEngine::Handle ha = e.add(&count, &a);
    EXPECT_EQ(e.progress(), 1);
    ProgressEngine::Handle hb = e.add(&count, &b);
    EXPECT_EQ(e.progress(), 11);
    e.remove(ha);
    EXPECT_EQ(e.progress(), 10);
    EXPECT_EQ(e.progress(), 10);
    EXPECT_EQ(a.calls, 2);
    EXPECT_EQ(b.calls, 3);
    e.remove(hb);
    EXPECT_EQ(e.progress(), 0);
    EXPECT_EQ(b.calls, 3);
}

TEST(Progress, RemovingAnInvalidOrStaleHandleIsHarmless) {
    ProgressEngine e;
    Counter a;
    ProgressEngine::Handle h = e.add(&count, &a);
    e.remove({});
    e.remove(ProgressEngine::Handle{12345});
    e.remove(h);
    e.remove(h);
    e.progress();
    EXPECT_EQ(a.calls, 0);
    EXPECT_EQ(e.size(), 0u);
}

// Removes itself on its first call.
struct SelfRemover {
    ProgressEngine* engine;
    ProgressEngine::Handle handle;
    int calls = 0;
};

int remove_self(void* ctx) noexcept {
    auto* s = static_cast<SelfRemover*>(ctx);
    ++s->calls;
    s->engine->remove(s->handle);
    return 1;
}

TEST(Progress, CallbackMayRemoveItself) {
    ProgressEngine e;
    Counter before, after;
    e.add(&count, &before);
    SelfRemover s{&e, {}};
    s.handle = e.add(&remove_self, &s);
    e.add(&count, &after);
    EXPECT_EQ(e.progress(), 3);
    EXPECT_EQ(e.size(), 2u);
    EXPECT_EQ(e.progress(), 2);
    EXPECT_EQ(s.calls, 1);
    EXPECT_EQ(before.calls, 2);
    EXPECT_EQ(after.calls, 2);  // not skipped by the removal
}

TEST(Progress, TheOnlyCallbackRemovingItselfRunsOnce) {
    ProgressEngine e;
    SelfRemover r{&e, {}};
    r.handle = e.add(&remove_self, &r);
    EXPECT_EQ(e.progress(), 1);
    EXPECT_EQ(e.progress(), 0);
    EXPECT_EQ(r.calls, 1);
    EXPECT_EQ(e.size(), 0u);
}

// Removes another callback, one that comes later in the same pass.
struct OtherRemover {
    ProgressEngine* engine;
    ProgressEngine::Handle victim;
};

int remove_other(void* ctx) noexcept {
    auto* r = static_cast<OtherRemover*>(ctx);
    r->engine->remove(r->victim);
    return 0;
}

TEST(Progress, CallbackMayRemoveALaterOne) {
    ProgressEngine e;
    Counter victim;
    OtherRemover r{&e, {}};
    e.add(&remove_other, &r);
    r.victim = e.add(&count, &victim);
    e.progress();
    e.progress();
    EXPECT_EQ(victim.calls, 0);
    EXPECT_EQ(e.size(), 1u);
}

struct Adder {
    ProgressEngine* engine;
    Counter* added;
    bool done = false;
};

int add_other(void* ctx) noexcept {
    auto* a = static_cast<Adder*>(ctx);
    if (!a->done) {
        a->done = true;
        // Many adds force the vector to reallocate under the running pass.
        for (int i = 0; i < 64; ++i) a->engine->add(&count, a->added);
    }
    return 0;
}

TEST(Progress, CallbackMayAddCallbacks) {
    ProgressEngine e;
    Counter added;
    Adder a{&e, &added};
    e.add(&add_other, &a);
    e.progress();
    EXPECT_EQ(e.size(), 65u);
    added.calls = 0;
    e.progress();
    EXPECT_EQ(added.calls, 64);
}

TEST(Progress, LowPriorityRunsEveryNthPass) {
    ProgressEngine e;
    e.set_low_priority_interval(4);
    Counter normal, low;
    e.add(&count, &normal);
    e.add(&count, &low, ProgressPriority::low);
    for (int i = 0; i < 12; ++i) e.progress();
    EXPECT_EQ(normal.calls, 12);
    EXPECT_EQ(low.calls, 3);
}

TEST(Progress, LowPriorityIntervalZeroMeansEveryPass) {
    ProgressEngine e;
    e.set_low_priority_interval(0);
    Counter low;
    e.add(&count, &low, ProgressPriority::low);
    for (int i = 0; i < 5; ++i) e.progress();
    EXPECT_EQ(low.calls, 5);
}

TEST(Progress, LowPriorityCallbackCanBeRemoved) {
    ProgressEngine e;
    e.set_low_priority_interval(1);
    Counter low;
    ProgressEngine::Handle h = e.add(&count, &low, ProgressPriority::low);
    e.progress();
    e.remove(h);
    e.progress();
    EXPECT_EQ(low.calls, 1);
    EXPECT_EQ(e.size(), 0u);
}

TEST(Progress, ProcessEngineIsOneObject) {
    EXPECT_EQ(&progress_engine(), &progress_engine());
}

}  // namespace
}  // namespace transit
