// What is particular to btl/self, beyond the conformance suite: zero-copy paths
// (in-place prepare_src, sendi handing the user's buffers to the callback), its
// parameters, and its refusals of bad input.  Runs the real plugin through the
// framework, in one process.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "framework/btl_framework.hpp"
#include "runtime/runtime.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/params.hpp"
#include "transit/progress.hpp"

namespace transit::btl {
namespace {

constexpr Tag tag = AmTable::tag(TagRange::user, 5);

struct Seen {
    int calls = 0;
    std::vector<Segment> segments;
    std::vector<std::byte> bytes;
};

void record(Module*, const ReceiveDescriptor& d, void* cbdata) {
    auto* s = static_cast<Seen*>(cbdata);
    ++s->calls;
    s->segments.assign(d.segments, d.segments + d.segment_count);
    s->bytes.clear();
    for (const Segment& seg : s->segments) {
        const auto* p = static_cast<const std::byte*>(seg.addr);
        s->bytes.insert(s->bytes.end(), p, p + seg.len);
    }
}

class SelfTest : public ::testing::Test {
  protected:
    // Opens the framework with only self, applying `settings` before init;
    // `threads`: told that several threads will call the module.
    void start(std::vector<std::pair<std::string, std::string>> settings = {},
               bool threads = false) {
        runtime_ = rt::singleton_runtime();
        fw_ = std::make_unique<Framework>(*runtime_, progress_, am_);
        fw_->open();
        for (const auto& [name, value] : settings) set(name, value);
        fw_->multi_threaded(threads);
        fw_->init();
        for (Module* m : fw_->modules())
            if (m->component().name() == "self") module_ = m;
        if (module_ == nullptr) return;
        const Rank me = runtime_->rank();
        Reachability reach(1);
        ASSERT_EQ(module_->add_procs(std::span(&me, 1), std::span(&ep_, 1), reach),
                  Status::success);
        ASSERT_TRUE(reach.test(0));
        ASSERT_EQ(am_.register_callback(tag, &record, &seen_), Status::success);
    }

    void set(const std::string& name, const std::string& value) {
        params::Registry& r = params::registry();
        saved_.emplace_back(name, r.get(name).text());
        r.set(name, value, params::Source{params::Origin::api, "self test", 0});
    }

    void TearDown() override {
        if (module_ != nullptr) {
            const Rank me = runtime_->rank();
            module_->del_procs(std::span(&me, 1), std::span(&ep_, 1));
        }
        module_ = nullptr;
        fw_.reset();
        for (const auto& [name, text] : saved_)
            params::registry().set(name, text, params::Source{params::Origin::api, "restore", 0});
    }

    std::unique_ptr<rt::Runtime> runtime_;
    ProgressEngine progress_;
    AmTable am_;
    std::unique_ptr<Framework> fw_;
    Module* module_ = nullptr;
    Endpoint* ep_ = nullptr;
    Seen seen_;
    std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(SelfTest, AnnouncesHighestExclusivityAndEverything) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_NE(module_, nullptr);
    const Attributes& a = module_->attributes();
    EXPECT_EQ(a.exclusivity, exclusivity_high);
    EXPECT_EQ(
        a.flags & (flags::send | flags::rdma | flags::send_inplace | flags::atomic_ops |
                   flags::atomic_fops),
        flags::send | flags::rdma | flags::send_inplace | flags::atomic_ops | flags::atomic_fops);
    EXPECT_TRUE(a.atomic_flags & atomic_support::cswap);
    EXPECT_TRUE(a.atomic_flags & atomic_support::bits32);
    EXPECT_GT(a.registration_handle_size, 0u);
}

// Safe for concurrent calls only when told several threads call: for one
// thread its pools take no lock.
TEST_F(SelfTest, ThreadSafeWhenTheFrameworkIsMultiThreaded) {
    ASSERT_NO_FATAL_FAILURE(start({}, true));
    ASSERT_NE(module_, nullptr);
    EXPECT_TRUE(module_->attributes().flags & flags::thread_safe);
}

TEST_F(SelfTest, NotThreadSafeForOneThread) {
    ASSERT_NO_FATAL_FAILURE(start());
    ASSERT_NE(module_, nullptr);
    EXPECT_FALSE(module_->attributes().flags & flags::thread_safe);
}

TEST_F(SelfTest, ReachesOnlyItsOwnRank) {
    ASSERT_NO_FATAL_FAILURE(start());
    const Rank peers[] = {runtime_->rank() + 1, runtime_->rank(), runtime_->rank() + 2};
    Endpoint* eps[3] = {};
    Reachability reach(3);
    ASSERT_EQ(module_->add_procs(peers, eps, reach), Status::success);
    EXPECT_FALSE(reach.test(0));
    EXPECT_TRUE(reach.test(1));
    EXPECT_FALSE(reach.test(2));
    EXPECT_EQ(eps[0], nullptr);
    EXPECT_NE(eps[1], nullptr);
}

TEST_F(SelfTest, PrepareSrcAboveEagerLimitPointsAtUserData) {
    ASSERT_NO_FATAL_FAILURE(start());
    std::vector<std::byte> data(module_->attributes().eager_limit * 3, std::byte{0x42});
    Convertor conv(data.data(), data.size());
    std::size_t size = data.size();
    Descriptor* d = module_->prepare_src(ep_, conv, no_order, 16, size, 0);
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(d->segment_count, 2u);
    EXPECT_EQ(d->segments[0].len, 16u);
    EXPECT_EQ(d->segments[1].addr, data.data()) << "copied instead of passed in place";
    EXPECT_EQ(d->segments[1].len, data.size());
    EXPECT_EQ(module_->send(ep_, d, tag), Status::completed);
    EXPECT_EQ(seen_.segments.at(1).addr, data.data()) << "the receiver got a copy";
    EXPECT_EQ(module_->free(d), Status::success);
}

TEST_F(SelfTest, PrepareSrcBelowEagerLimitCopies) {
    ASSERT_NO_FATAL_FAILURE(start());
    std::vector<std::byte> data(100, std::byte{0x17});
    Convertor conv(data.data(), data.size());
    std::size_t size = data.size();
    Descriptor* d = module_->prepare_src(ep_, conv, no_order, 8, size, 0);
    ASSERT_NE(d, nullptr);
    ASSERT_EQ(d->segment_count, 1u);
    EXPECT_EQ(d->segments[0].len, 108u);
    data[0] = std::byte{0};  // the descriptor holds its own copy
    EXPECT_EQ(static_cast<const std::byte*>(d->segments[0].addr)[8], std::byte{0x17});
    EXPECT_EQ(module_->free(d), Status::success);
}

TEST_F(SelfTest, SendiPassesHeaderThenPayloadWithoutCopy) {
    ASSERT_NO_FATAL_FAILURE(start());
    const std::uint64_t header = 0x1122334455667788ull;
    std::vector<std::byte> payload(300, std::byte{9});
    Convertor conv(payload.data(), payload.size());
    Descriptor* d = nullptr;
    ASSERT_EQ(
        module_->sendi(ep_, &conv, &header, sizeof header, payload.size(), no_order, 0, tag, &d),
        Status::completed);
    EXPECT_EQ(d, nullptr);
    ASSERT_EQ(seen_.segments.size(), 2u);
    EXPECT_EQ(seen_.segments[0].addr, &header);
    EXPECT_EQ(seen_.segments[0].len, sizeof header);
    EXPECT_EQ(seen_.segments[1].addr, payload.data());
    EXPECT_EQ(conv.position(), payload.size());
}

TEST_F(SelfTest, SendiGathersAnIovecPayload) {
    ASSERT_NO_FATAL_FAILURE(start());
    const std::uint32_t header = 7;
    std::byte a[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    std::byte b[2] = {std::byte{4}, std::byte{5}};
    const iovec pieces[] = {{a, 3}, {b, 2}};
    Convertor conv{std::span<const iovec>(pieces)};
    ASSERT_EQ(module_->sendi(ep_, &conv, &header, sizeof header, 5, no_order, 0, tag, nullptr),
              Status::completed);
    ASSERT_EQ(seen_.bytes.size(), sizeof header + 5);
    EXPECT_EQ(seen_.bytes[4], std::byte{1});
    EXPECT_EQ(seen_.bytes[8], std::byte{5});
}

TEST_F(SelfTest, RefusesAForeignEndpoint) {
    ASSERT_NO_FATAL_FAILURE(start());
    Endpoint stranger(runtime_->rank());
    EXPECT_EQ(module_->alloc(&stranger, no_order, 8, 0), nullptr);
    Descriptor* d = module_->alloc(ep_, no_order, 8, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(module_->send(&stranger, d, tag), Status::bad_param);
    EXPECT_EQ(module_->free(d), Status::success);
}

TEST_F(SelfTest, SendToAnUnregisteredTagLeavesTheDescriptorToTheCaller) {
    ASSERT_NO_FATAL_FAILURE(start());
    Descriptor* d = module_->alloc(ep_, no_order, 8, des_flags::btl_ownership);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(module_->send(ep_, d, AmTable::tag(TagRange::user, 99)), Status::protocol_error);
    EXPECT_EQ(module_->free(d), Status::success) << "the failed send freed it already";
}

TEST_F(SelfTest, DoubleFreeIsRefused) {
    ASSERT_NO_FATAL_FAILURE(start());
    Descriptor* d = module_->alloc(ep_, no_order, 8, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(module_->free(d), Status::success);
    EXPECT_EQ(module_->free(d), Status::bad_param);
}

TEST_F(SelfTest, FreeListMaxBoundsEachPool) {
    ASSERT_NO_FATAL_FAILURE(start({{"btl_self_free_list_max", "3"}}));
    std::vector<Descriptor*> held;
    while (Descriptor* d = module_->alloc(ep_, no_order, 8, 0)) held.push_back(d);
    EXPECT_EQ(held.size(), 3u);
    // The large pool is separate: a big descriptor is still available.
    Descriptor* big = module_->alloc(ep_, no_order, module_->attributes().max_send_size, 0);
    EXPECT_NE(big, nullptr);
    if (big) module_->free(big);
    for (Descriptor* d : held) module_->free(d);
}

TEST_F(SelfTest, EagerLimitAboveMaxSendSizeFailsInitWithTheReason) {
    ASSERT_NO_FATAL_FAILURE(
        start({{"btl_self_eager_limit", "128k"}, {"btl_self_max_send_size", "64k"}}));
    EXPECT_EQ(module_, nullptr);
    bool found = false;
    for (const mca::ComponentRecord& r : fw_->records()) {
        if (r.name != "self") continue;
        found = true;
        EXPECT_EQ(r.state, mca::ComponentState::failed);
        EXPECT_NE(r.reason.find("btl_self_eager_limit"), std::string::npos) << r.reason;
    }
    EXPECT_TRUE(found);
}

TEST_F(SelfTest, PutNeedsRemoteWriteAccess) {
    ASSERT_NO_FATAL_FAILURE(start());
    std::uint64_t target = 0, source = 5;
    RegistrationHandle* ro =
        module_->rdma()->register_mem(nullptr, &target, sizeof target, reg_flags::remote_read);
    ASSERT_NE(ro, nullptr);
    EXPECT_EQ(module_->rdma()->put({.endpoint = ep_,
                                    .local = &source,
                                    .remote = reinterpret_cast<std::uintptr_t>(&target),
                                    .remote_handle = ro,
                                    .size = sizeof source}),
              Status::access_denied);
    EXPECT_EQ(target, 0u);
    EXPECT_EQ(module_->rdma()->put({.endpoint = ep_,
                                    .local = &source,
                                    .remote = reinterpret_cast<std::uintptr_t>(&target),
                                    .size = sizeof source}),
              Status::bad_param)
        << "a put without a remote handle";
    EXPECT_EQ(module_->rdma()->deregister_mem(ro), Status::success);
    EXPECT_EQ(module_->rdma()->deregister_mem(ro), Status::not_found);
}

}  // namespace
}  // namespace transit::btl
