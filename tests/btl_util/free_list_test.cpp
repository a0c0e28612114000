// The toolkit's free list: bounded by its max, grows in chunks, hands out
// distinct aligned buffers, refuses a double put, allocates nothing on get and
// put once grown, and stays consistent when threads share it.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "transit/btl/util/free_list.hpp"

namespace {
std::atomic<std::size_t> allocations{0};
}

// Counts every allocation of this program, to show the hot path makes none.
void* operator new(std::size_t n) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
// Not inlined: GCC, seeing free() inlined where its operator new allocated,
// takes the pair for a mismatch (-Wmismatched-new-delete at -O1).
[[gnu::noinline]] void operator delete(void* p) noexcept {
    std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}

namespace transit::btl::util::test {
namespace {

struct Item {
    std::byte* buffer = nullptr;
    int made = 0;  // set by init: its order of making
    Item* next_free = nullptr;
    bool in_use = false;
};

struct Counter {
    int made = 0;
};

void count_init(Item& item, std::byte* buffer, std::size_t size, void* context) {
    item.buffer = size != 0 ? buffer : nullptr;
    item.made = ++static_cast<Counter*>(context)->made;
}

template <Locking Policy>
std::vector<Item*> take_all(FreeList<Item, Policy>& list) {
    std::vector<Item*> out;
    while (Item* i = list.get()) out.push_back(i);
    return out;
}

TEST(FreeList, FixedListGivesEachItemOnceThenNothing) {
    FreeList<Item> list;
    list.setup({.initial = 4, .max = 4});
    auto items = take_all(list);
    ASSERT_EQ(items.size(), 4u);
    EXPECT_EQ(std::set<Item*>(items.begin(), items.end()).size(), 4u);
    EXPECT_EQ(list.available(), 0u);
    EXPECT_FALSE(list.can_get());
    for (Item* i : items) EXPECT_TRUE(i->in_use);
    ASSERT_TRUE(list.put(items[2]));
    EXPECT_EQ(list.get(), items[2]);
}

TEST(FreeList, GrowsInChunksUpToMax) {
    FreeList<Item> list;
    Counter counter;
    list.setup({.initial = 2, .max = 7, .grow_by = 3}, &count_init, &counter);
    EXPECT_EQ(list.size(), 2u);
    auto items = take_all(list);
    EXPECT_EQ(items.size(), 7u);  // 2, then 3, then the 2 left below max
    EXPECT_EQ(list.size(), 7u);
    EXPECT_EQ(list.chunk_count(), 3u);
    EXPECT_EQ(counter.made, 7);
    EXPECT_EQ(list.get(), nullptr);
    // Control messages may pass the bound.
    Item* extra = list.get_beyond_max();
    ASSERT_NE(extra, nullptr);
    EXPECT_EQ(list.size(), 10u);
}

TEST(FreeList, DoublePutIsRefusedAndChangesNothing) {
    FreeList<Item> list;
    list.setup({.initial = 2, .max = 2});
    Item* a = list.get();
    ASSERT_TRUE(list.put(a));
    EXPECT_FALSE(list.put(a));
    EXPECT_EQ(list.available(), 2u);
    Item* x = list.get();
    Item* y = list.get();
    EXPECT_NE(x, y);  // a double put would have handed `a` out twice
    EXPECT_FALSE(list.put(nullptr));
}

TEST(FreeList, BuffersAreDistinctAlignedAndLargeEnough) {
    FreeList<Item> list;
    Counter counter;
    list.setup({.initial = 5, .max = 9, .grow_by = 4, .buffer_size = 100}, &count_init, &counter);
    EXPECT_EQ(list.capacity(), 100u);
    auto items = take_all(list);
    ASSERT_EQ(items.size(), 9u);
    std::set<std::uintptr_t> starts;
    for (Item* i : items) {
        ASSERT_NE(i->buffer, nullptr);
        const auto at = reinterpret_cast<std::uintptr_t>(i->buffer);
        EXPECT_EQ(at % 64, 0u);
        starts.insert(at);
    }
    ASSERT_EQ(starts.size(), 9u);
    // Within a chunk the buffers do not overlap: the stride covers 100 bytes.
    auto span = list.chunk_buffers(0);
    EXPECT_GE(span.size(), 5u * 100u);
    for (Item* i : items) std::fill_n(i->buffer, 100, std::byte{0x5a});
}

TEST(FreeList, IndexAndAtAgreeAcrossChunks) {
    FreeList<Item> list;
    Counter counter;
    list.setup({.initial = 3, .max = 7, .grow_by = 2}, &count_init, &counter);
    auto items = take_all(list);
    ASSERT_EQ(list.size(), 7u);
    for (std::size_t k = 0; k < list.size(); ++k) {
        EXPECT_EQ(list.index(&list.at(k)), k);
        EXPECT_EQ(list.at(k).made, static_cast<int>(k) + 1);  // made in index order
    }
    Item foreign;
    foreign.in_use = true;
    EXPECT_FALSE(list.owns(&foreign));
    EXPECT_FALSE(list.put_checked(&foreign));
    EXPECT_TRUE(foreign.in_use);
    EXPECT_TRUE(list.put_checked(items.front()));
    EXPECT_EQ(list.index(&foreign), list.size());
    EXPECT_TRUE(list.owns(items.back()));
    // items() walks every one, free or not, in order.
    int expected = 1;
    for (const Item& i : list.items()) EXPECT_EQ(i.made, expected++);
    EXPECT_EQ(expected, 8);
}

TEST(FreeList, GetAndPutAllocateNothingOnceGrown) {
    FreeList<Item> list;
    list.setup({.initial = 8, .max = 16, .grow_by = 8, .buffer_size = 256});
    auto items = take_all(list);  // grows to 16
    for (Item* i : items) list.put(i);
    const std::size_t before = allocations.load();
    for (int round = 0; round < 1000; ++round) {
        Item* a = list.get();
        Item* b = list.get();
        list.put(a);
        list.put(b);
    }
    EXPECT_EQ(allocations.load(), before);
}

TEST(FreeList, LockingListStaysConsistentUnderThreads) {
    FreeList<Item, Locking::when_configured> list;
    list.setup({.initial = 8, .max = 8, .locking = true});
    std::atomic<int> double_handed{0};
    auto worker = [&] {
        for (int k = 0; k < 20000; ++k) {
            Item* i = list.get();
            if (i == nullptr) continue;
            // A list corrupted by a race would hand one item to two threads.
            if (i->buffer != nullptr) double_handed.fetch_add(1);
            i->buffer = reinterpret_cast<std::byte*>(i);
            i->buffer = nullptr;
            list.put(i);
        }
    };
    std::thread t1(worker), t2(worker);
    t1.join();
    t2.join();
    EXPECT_EQ(double_handed.load(), 0);
    EXPECT_EQ(list.available(), 8u);
    EXPECT_EQ(take_all(list).size(), 8u);
}

// A list built never to lock (no flag tested on get and put) must not accept
// a setup that expects it to: its users would race silently.
TEST(FreeList, ListThatNeverLocksRefusesALockingSetup) {
    FreeList<Item> list;
    EXPECT_THROW(list.setup({.initial = 2, .max = 2, .locking = true}), std::logic_error);
    FreeList<Item, Locking::when_configured> may_lock;
    EXPECT_NO_THROW(may_lock.setup({.initial = 2, .max = 2, .locking = true}));
}

TEST(FreeList, SetupAgainForgetsTheOldItems) {
    FreeList<Item> list;
    list.setup({.initial = 3, .max = 3});
    Item* old = list.get();
    list.setup({.initial = 2, .max = 2});
    EXPECT_EQ(list.size(), 2u);
    EXPECT_EQ(list.available(), 2u);
    EXPECT_NE(old, nullptr);
    EXPECT_EQ(take_all(list).size(), 2u);
}

}  // namespace
}  // namespace transit::btl::util::test
