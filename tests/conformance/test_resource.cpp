// Descriptors: alloc/free and prepare_src/free without a send, and running out
// of descriptors followed by a retry that succeeds.
#include <fmt/format.h>

#include "tests/conformance/btl_test.hpp"
#include "tests/conformance/suite_env.hpp"

namespace transit::conformance {
namespace {

class Resource : public BtlTest {};

TEST_P(Resource, AllocAndFree) {
    for (std::size_t size : {std::size_t{1}, attr().eager_limit, attr().max_send_size}) {
        btl::Descriptor* d = module().alloc(target(), btl::no_order, size, 0);
        ASSERT_NE(d, nullptr) << "alloc(" << size << ") on an idle module";
        ASSERT_GE(d->segment_count, 1u);
        ASSERT_LE(d->segments[0].len, attr().max_send_size);
        ASSERT_GT(d->segments[0].len, 0u) << "alloc(" << size << ") gave no room at all";
        // The whole segment must be writable (a sanitizer build checks it).
        std::memset(d->segments[0].addr, 0x3c, d->segments[0].len);
        EXPECT_EQ(module().free(d), Status::success);
    }
}

TEST_P(Resource, AllocLargerThanMaxSendSizeIsCapped) {
    btl::Descriptor* d = module().alloc(target(), btl::no_order, 4 * attr().max_send_size, 0);
    if (d == nullptr) return;  // refusing is allowed too
    EXPECT_LE(d->segments[0].len, attr().max_send_size);
    EXPECT_EQ(module().free(d), Status::success);
}

TEST_P(Resource, PrepareSrcAndFreeWithoutSend) {
    std::vector<std::byte> data(3 * attr().max_send_size, std::byte{7});
    btl::Convertor conv(data.data(), data.size());
    std::size_t size = data.size();
    btl::Descriptor* d = module().prepare_src(target(), conv, btl::no_order, 16, size, 0);
    ASSERT_NE(d, nullptr);
    EXPECT_LE(size, data.size());
    EXPECT_EQ(conv.position(), size);
    EXPECT_EQ(module().free(d), Status::success);
}

// Cases that need the pool small: the component's free_list_max (when it has
// one) is set to 4 before its module is created.
class SmallPool : public BtlTest {
  protected:
    Overrides overrides() const override { return {{"free_list_max", "4"}}; }
};

TEST_P(SmallPool, OutOfResourceThenRetry) {
    const std::size_t limit = override_applied("free_list_max") ? 10000 : 2048;
    const std::size_t size = attr().eager_limit;
    std::vector<btl::Descriptor*> held;
    while (held.size() < limit) {
        btl::Descriptor* d = module().alloc(target(), btl::no_order, size, 0);
        if (d == nullptr) break;
        held.push_back(d);
    }
    if (held.size() == limit) {
        for (btl::Descriptor* d : held) module().free(d);
        GTEST_SKIP() << component_ << " handed out " << limit << " descriptors of " << size
                     << " bytes without running out"
                     << (override_applied("free_list_max")
                             ? ""
                             : fmt::format(" (it offers no {} to make its pool small)",
                                           param_name("free_list_max")));
    }
    RecordProperty("descriptors_before_out_of_resource", static_cast<int>(held.size()));

    // Out of resource is not sticky: one free makes one alloc possible again.
    ASSERT_EQ(module().free(held.back()), Status::success);
    held.pop_back();
    btl::Descriptor* again = module().alloc(target(), btl::no_order, size, 0);
    ASSERT_NE(again, nullptr) << "alloc after a free still reports out of resource";
    held.push_back(again);

    // A message sent while the pool is empty waits (the suite queues it, as an
    // upper layer must), and goes once descriptors come back.
    std::vector<std::byte> payload(3 * size + 5);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = pattern(17, i);
    const std::uint64_t msg = new_msg();
    send_echo(SendMethod::alloc_send, msg, payload);
    for (btl::Descriptor* d : held) EXPECT_EQ(module().free(d), Status::success);
    held.clear();
    const std::vector<std::byte>* got = wait_reply(msg);
    ASSERT_NE(got, nullptr);
    EXPECT_TRUE(*got == payload) << "the message sent across the out-of-resource period";
}

TEST_P(SmallPool, DeepCallbackRecursionWithSmallPool) {
    if (!has_flags(btl::flags::send)) GTEST_SKIP() << component_ << " has no send";
    start_chain(201);
    EXPECT_TRUE(wait_for([&] { return chains_done() == 1; }, "a 201-hop chain"));
}

INSTANTIATE_TEST_SUITE_P(btl, Resource, ::testing::ValuesIn(components_under_test()),
                         component_param_name);
INSTANTIATE_TEST_SUITE_P(btl, SmallPool, ::testing::ValuesIn(components_under_test()),
                         component_param_name);

}  // namespace
}  // namespace transit::conformance
