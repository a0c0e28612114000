// Active-message sends: every way of sending (alloc, prepare_src contiguous and
// iovec, sendi) over sizes 0..4 MiB, completion semantics, ordering, and sends
// issued from inside a receive callback.
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "tests/conformance/btl_test.hpp"
#include "tests/conformance/suite_env.hpp"
#include "transit/btl/util/idle_pacer.hpp"

namespace transit::conformance {
namespace {

constexpr std::size_t header_bytes = sizeof(WireHeader);

std::vector<std::byte> make_payload(std::size_t size, std::uint64_t seed) {
    std::vector<std::byte> p(size);
    for (std::size_t i = 0; i < size; ++i) p[i] = pattern(seed, i);
    return p;
}

// "" when equal, else where and how they differ.
std::string difference(std::span<const std::byte> want, std::span<const std::byte> got) {
    if (want.size() != got.size())
        return fmt::format("length {} instead of {}", got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
        if (want[i] != got[i])
            return fmt::format("first difference at offset {} of {}: {:#04x} instead of {:#04x}", i,
                               want.size(), static_cast<int>(got[i]), static_cast<int>(want[i]));
    return "";
}

class Send : public BtlTest {
  protected:
    void SetUp() override {
        BtlTest::SetUp();
        if (IsSkipped() || HasFailure()) return;
        if (!has_flags(btl::flags::send))
            GTEST_SKIP() << component_ << " has no active-message send (flags::send)";
    }

    // Every size of the log range, sent with `method` and echoed back.
    void echo_sizes(SendMethod method) {
        for (std::size_t size : log_sizes(suite_env().max_size)) {
            const std::vector<std::byte> payload = make_payload(size, size);
            const std::uint64_t msg = new_msg();
            send_echo(method, msg, payload);
            const std::vector<std::byte>* got = wait_reply(msg);
            ASSERT_NE(got, nullptr) << to_string(method) << ", " << size << " bytes";
            ASSERT_EQ(difference(payload, *got), "")
                << to_string(method) << ", message of " << size << " bytes";
            forget_reply(msg);
        }
    }

    struct Completions {
        int calls = 0;
        Status last = Status::success;
    };
    static void count(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) {
        auto* c = static_cast<Completions*>(d->cbdata);
        ++c->calls;
        c->last = s;
    }

    // One eager message through alloc + send with the given descriptor flags;
    // checks what the contract promises about the callback and the descriptor.
    void send_with_flags(std::uint32_t des_flags, std::size_t size) {
        const std::vector<std::byte> payload = make_payload(size, des_flags + size);
        const std::uint64_t msg = new_msg();
        const WireHeader h{Kind::echo, 0, msg, 0, size, 0};
        const bool always = des_flags & btl::des_flags::send_always_callback;
        const bool owned = des_flags & btl::des_flags::btl_ownership;
        const std::string what =
            fmt::format("send of {} bytes with descriptor flags {:#x}", size, des_flags);
        Completions c;
        Status s = Status::out_of_resource;
        btl::Descriptor* d = nullptr;
        for (int tries = 0; s == Status::out_of_resource && tries < 100000; ++tries) {
            d = module().alloc(target(), btl::no_order, header_bytes + size, des_flags);
            if (d == nullptr) {
                progress();
                continue;
            }
            ASSERT_GE(d->segments[0].len, header_bytes + size) << what;
            std::memcpy(d->segments[0].addr, &h, header_bytes);
            if (size > 0)
                std::memcpy(static_cast<std::byte*>(d->segments[0].addr) + header_bytes,
                            payload.data(), size);
            d->segments[0].len = header_bytes + size;
            d->flags = des_flags;
            d->cbfunc = &Send::count;
            d->cbdata = &c;
            s = module().send(target(), d, tag_request);
            if (s == Status::out_of_resource) {
                module().free(d);
                progress();
            }
        }
        ASSERT_TRUE(s == Status::completed || s == Status::success)
            << what << " returned " << to_string(s);
        if (s == Status::completed && !always) {
            for (int i = 0; i < 100; ++i) progress();
            EXPECT_EQ(c.calls, 0) << what << " completed inline, yet its callback came";
        } else {
            ASSERT_TRUE(wait_for([&] { return c.calls > 0; }, what + ": its callback")) << what;
            for (int i = 0; i < 100; ++i) progress();
            EXPECT_EQ(c.calls, 1) << what << ": the callback came more than once";
            EXPECT_TRUE(ok(c.last)) << what << ": callback status " << to_string(c.last);
        }
        // Without btl_ownership the descriptor is still ours once completed.
        if (!owned) {
            EXPECT_EQ(module().free(d), Status::success) << what;
        }
        const std::vector<std::byte>* got = wait_reply(msg);
        ASSERT_NE(got, nullptr) << what;
        EXPECT_EQ(difference(payload, *got), "") << what;
        forget_reply(msg);
    }
};

TEST_P(Send, AttributesAreConsistent) {
    const btl::Attributes& a = attr();
    EXPECT_GT(a.eager_limit, 0u);
    EXPECT_LE(a.eager_limit, a.max_send_size);
    EXPECT_LE(a.registration_handle_size, btl::max_registration_handle_size);
    EXPECT_GT(a.max_send_size, header_bytes) << "the suite needs room for its header";
    if (has_flags(btl::flags::atomic_ops) || has_flags(btl::flags::atomic_fops)) {
        EXPECT_NE(a.atomic_flags, 0u) << "atomics offered, but no operation in atomic_flags";
    }
}

TEST_P(Send, AllocSizes) {
    echo_sizes(SendMethod::alloc_send);
}
TEST_P(Send, PrepareSrcContiguousSizes) {
    echo_sizes(SendMethod::prepare_contiguous);
}
TEST_P(Send, PrepareSrcIovecSizes) {
    echo_sizes(SendMethod::prepare_iovec);
}
TEST_P(Send, SendiSizes) {
    echo_sizes(SendMethod::sendi);
}
TEST_P(Send, SendiIovecSizes) {
    echo_sizes(SendMethod::sendi_iovec);
}

TEST_P(Send, CompletionDefaultFlags) {
    for (std::size_t size : {std::size_t{0}, std::size_t{8}, attr().eager_limit - header_bytes})
        send_with_flags(0, size);
}

TEST_P(Send, CompletionAlwaysCallback) {
    for (std::size_t size : {std::size_t{0}, std::size_t{8}, attr().eager_limit - header_bytes})
        send_with_flags(btl::des_flags::send_always_callback, size);
}

TEST_P(Send, CompletionBtlOwnership) {
    for (std::size_t size : {std::size_t{0}, std::size_t{8}, attr().eager_limit - header_bytes}) {
        send_with_flags(btl::des_flags::btl_ownership, size);
        send_with_flags(btl::des_flags::btl_ownership | btl::des_flags::send_always_callback, size);
    }
}

TEST_P(Send, ManySendsArriveInOrder) {
    constexpr std::uint32_t count = 2000;
    const std::size_t largest = 3 * attr().max_send_size;  // some span several fragments
    std::vector<std::vector<std::byte>> payloads;
    std::vector<std::uint64_t> msgs;
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::size_t size = i % 100 == 99 ? largest : (i * 37) % 1024;
        payloads.push_back(make_payload(size, i));
        msgs.push_back(new_msg());
        const SendMethod m = i % 2 ? SendMethod::alloc_send : SendMethod::prepare_contiguous;
        send_echo(m, msgs.back(), payloads.back(), i);
    }
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::vector<std::byte>* got = wait_reply(msgs[i]);
        ASSERT_NE(got, nullptr) << "message " << i;
        ASSERT_EQ(difference(payloads[i], *got), "") << "message " << i;
    }
    const std::vector<std::uint32_t>& order = echo_order();
    ASSERT_EQ(order.size(), count);
    for (std::uint32_t i = 0; i < count; ++i)
        ASSERT_EQ(order[i], i) << "message " << order[i] << " arrived in position " << i;
}

TEST_P(Send, ProgressInsideReceiveCallback) {
    // A callback that progresses again must not see its own message twice nor
    // lose or reorder the ones behind it, however the module handles nesting.
    progress_inside_replies(true);
    constexpr std::uint32_t count = 500;
    std::vector<std::uint64_t> msgs;
    for (std::uint32_t i = 0; i < count; ++i) {
        msgs.push_back(new_msg());
        send_echo(SendMethod::sendi, msgs.back(), make_payload(8 + i % 64, i), i);
    }
    for (std::uint32_t i = 0; i < count; ++i) {
        const std::vector<std::byte>* got = wait_reply(msgs[i]);
        ASSERT_NE(got, nullptr) << "message " << i;
        ASSERT_EQ(difference(make_payload(8 + i % 64, i), *got), "") << "message " << i;
    }
    for (int i = 0; i < 100; ++i) progress();  // a duplicate would come now
    const std::vector<std::uint32_t>& order = echo_order();
    ASSERT_EQ(order.size(), count) << "replies delivered more (or fewer) times than sent";
    for (std::uint32_t i = 0; i < count; ++i)
        ASSERT_EQ(order[i], i) << "message " << order[i] << " arrived in position " << i;
}

TEST_P(Send, SendFromReceiveCallback) {
    // Each hop is sent from inside the previous hop's receive callback; in
    // loopback that nests, deeper than a small fragment pool.
    start_chain(301);
    EXPECT_TRUE(wait_for([&] { return chains_done() == 1; }, "a 301-hop chain"));
    for (int i = 0; i < 8; ++i) start_chain(31);
    EXPECT_TRUE(wait_for([&] { return chains_done() == 9; }, "8 concurrent chains"));
}

// A transport that carried nothing for a while is polled less often
// (btl::util::IdlePacer); a send puts it back on every pass, because the
// answer is coming.  Sends that complete at once (an inline or injected
// send) leave nothing in flight to say so themselves.
TEST_P(Send, AnIdleTransportFindsTheAnswerAtTheFirstPollAfterItsSend) {
    start_chain(1);
    ASSERT_TRUE(wait_for([&] { return chains_done() == 1; }, "a first chain"));
    // Three times: a pacer that lets one poll in 16 through could let the
    // first one through by chance once.
    for (int attempt = 0; attempt < 3; ++attempt) {
        for (std::uint32_t i = 0; i < btl::util::IdlePacer::idle_polls + 100; ++i) progress();
        const int before = chains_done();
        start_chain(1);
        // Long enough for the other side to answer (with two processes),
        // without a poll of ours meanwhile.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        int polls = 0;
        while (chains_done() == before && polls < 10000) {
            progress();
            ++polls;
        }
        // In loopback the request, the answer and their receipt take a
        // pass or two of the same module.
        EXPECT_LE(polls, 4) << "attempt " << attempt << ": the answer took " << polls
                            << " polls after an idle spell";
    }
}

TEST_P(Send, DumpThenSend) {
    module().dump(target(), 100);
    const std::vector<std::byte> payload = make_payload(100, 7);
    const std::uint64_t msg = new_msg();
    send_echo(SendMethod::alloc_send, msg, payload);
    const std::vector<std::byte>* got = wait_reply(msg);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(difference(payload, *got), "");
}

INSTANTIATE_TEST_SUITE_P(btl, Send, ::testing::ValuesIn(components_under_test()),
                         component_param_name);

}  // namespace
}  // namespace transit::conformance
