// The active-message tag table: ranges, conflicts, dispatch.
#include <gtest/gtest.h>

#include "transit/btl/am_table.hpp"

namespace transit::btl {
namespace {

struct Seen {
    int calls = 0;
    Tag tag = 0;
    Module* module = nullptr;
};

void receive(Module* module, const ReceiveDescriptor& d, void* cbdata) {
    auto* s = static_cast<Seen*>(cbdata);
    ++s->calls;
    s->tag = d.tag;
    s->module = module;
}

void other_receive(Module*, const ReceiveDescriptor&, void*) {}

ReceiveDescriptor message(Tag tag) {
    return {nullptr, nullptr, 0, tag};
}

TEST(AmTable, RangesAreDisjointAndCoverTheUpperTags) {
    EXPECT_EQ(AmTable::first(TagRange::btl), 0x20);
    EXPECT_EQ(AmTable::first(TagRange::pml), 0x40);
    EXPECT_EQ(AmTable::first(TagRange::osc), 0x60);
    EXPECT_EQ(AmTable::first(TagRange::user), 0x80);
    EXPECT_EQ(AmTable::first(TagRange::user) + AmTable::size(TagRange::user), 0x100);
    for (TagRange r : {TagRange::btl, TagRange::pml, TagRange::osc})
        EXPECT_EQ(AmTable::first(r) + AmTable::size(r),
                  AmTable::first(static_cast<TagRange>(static_cast<int>(r) + 1)));
    EXPECT_EQ(AmTable::tag(TagRange::pml, 3), 0x43);
}

TEST(AmTable, RegisterAndDispatch) {
    AmTable t;
    Seen s;
    const Tag tag = AmTable::tag(TagRange::pml, 1);
    EXPECT_FALSE(t.registered(tag));
    EXPECT_EQ(t.register_callback(tag, &receive, &s), Status::success);
    EXPECT_TRUE(t.registered(tag));
    auto* module = reinterpret_cast<Module*>(0x1000);
    EXPECT_TRUE(t.dispatch(module, message(tag)));
    EXPECT_EQ(s.calls, 1);
    EXPECT_EQ(s.tag, tag);
    EXPECT_EQ(s.module, module);
}

TEST(AmTable, SecondRegistrationOfATagConflicts) {
    AmTable t;
    Seen first, second;
    const Tag tag = AmTable::tag(TagRange::user, 0);
    ASSERT_EQ(t.register_callback(tag, &receive, &first), Status::success);
    EXPECT_EQ(t.register_callback(tag, &other_receive, &second), Status::exists);
    t.dispatch(nullptr, message(tag));
    EXPECT_EQ(first.calls, 1);  // the first owner keeps the tag
    EXPECT_EQ(second.calls, 0);
}

TEST(AmTable, ReservedTagsAndNullCallbacksAreRefused) {
    AmTable t;
    Seen s;
    EXPECT_EQ(t.register_callback(0x00, &receive, &s), Status::bad_param);
    EXPECT_EQ(t.register_callback(0x1f, &receive, &s), Status::bad_param);
    EXPECT_EQ(t.register_callback(0x20, nullptr, &s), Status::bad_param);
    EXPECT_FALSE(t.registered(0x1f));
    EXPECT_EQ(t.register_callback(0x20, &receive, &s), Status::success);
    EXPECT_EQ(t.register_callback(0xff, &receive, &s), Status::success);
}

TEST(AmTable, UnregisteredTagIsNotDelivered) {
    AmTable t;
    Seen s;
    const Tag tag = AmTable::tag(TagRange::osc, 5);
    EXPECT_FALSE(t.dispatch(nullptr, message(tag)));
    ASSERT_EQ(t.register_callback(tag, &receive, &s), Status::success);
    t.unregister_callback(tag);
    EXPECT_FALSE(t.registered(tag));
    EXPECT_FALSE(t.dispatch(nullptr, message(tag)));
    EXPECT_EQ(s.calls, 0);
    EXPECT_EQ(t.register_callback(tag, &receive, &s), Status::success);  // free again
}

TEST(AmTable, ProcessTableIsOneObject) {
    EXPECT_EQ(&am_table(), &am_table());
}

}  // namespace
}  // namespace transit::btl
