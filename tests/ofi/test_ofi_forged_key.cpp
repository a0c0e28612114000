// btl/ofi's one-sided operations through a handle whose memory key was forged
// (bounds, access and provider left as the owner's, so the initiator's own
// checks pass and only the target's provider can refuse): each put, get and
// atomic ends with an error within a few seconds, the get's buffer and the
// atomic's result untouched, the target's memory unchanged; a put through
// the real handle then still works.  The module reaches its own process, so
// the target is this process.  The provider comes from the environment
// (btl_ofi_provider_include, set by each ctest entry).
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "components/ofi/ofi_wire.hpp"
#include "tests/fixtures/rdma_outcome.hpp"
#include "tests/fixtures/two_rank_runtime.hpp"
#include "tests/ofi/ofi_loopback.hpp"

namespace {

using namespace transit;
using transit::test::note_outcome;
using transit::test::RdmaOutcome;

using transit::test::ofi_loopback::module_name;

constexpr std::uint64_t fill = 0x5151515151515151ull;
constexpr std::uint64_t sentinel = 0xa5a5a5a5a5a5a5a5ull;

class OfiForgedKey : public transit::test::ofi_loopback::LoopbackTest {
  protected:
    void SetUp() override {
        LoopbackTest::SetUp();
        if (!ready()) return;
        if ((module_->attributes().flags & (btl::flags::put | btl::flags::get)) == 0)
            GTEST_SKIP() << module_name() << " offers no one-sided operation";
        memory_.fill(fill);
        handle_ = module_->rdma()->register_mem(nullptr, region(), region_size,
                                                btl::reg_flags::access_any);
        ASSERT_NE(handle_, nullptr);
        const std::size_t n = module_->attributes().registration_handle_size;
        ASSERT_LE(n, forged_.size());
        std::memcpy(forged_.data(), handle_, n);
        ofi::PackedHandle p{};
        std::memcpy(&p, forged_.data(), sizeof p);
        p.key ^= 0x5a5a5a5a5a5a5a5aull;
        std::memcpy(forged_.data(), &p, sizeof p);
        local_.fill(sentinel);
        local_handle_ = module_->rdma()->register_mem(nullptr, local_.data(), sizeof local_,
                                                      btl::reg_flags::access_any);
    }

    void TearDown() override {
        if (module_ == nullptr) return;
        for (btl::RegistrationHandle* h : {local_handle_, handle_})
            EXPECT_TRUE(h == nullptr || module_->rdma()->deregister_mem(h) == Status::success);
        LoopbackTest::TearDown();
    }

    static constexpr std::size_t region_size = 256;
    std::uint64_t* region() { return memory_.data() + 8; }
    std::uint64_t region_address() { return reinterpret_cast<std::uintptr_t>(region()); }
    const btl::RegistrationHandle* forged() const {
        return reinterpret_cast<const btl::RegistrationHandle*>(forged_.data());
    }

    // How an operation ended (timeout: no callback within 5 s).
    template <typename Start>
    Status ended(Start start, RdmaOutcome& o) {
        return transit::test::ofi_loopback::ended(start, o, opened_->progress);
    }

    Status transfer(bool put, const btl::RegistrationHandle* remote) {
        RdmaOutcome o;
        const btl::RdmaRequest req{.endpoint = self_ep_[0],
                                   .local = local_.data(),
                                   .remote = region_address(),
                                   .local_handle = local_handle_,
                                   .remote_handle = remote,
                                   .size = 16,
                                   .cb = &note_outcome,
                                   .cbdata = &o};
        return ended([&] { return put ? module_->rdma()->put(req) : module_->rdma()->get(req); },
                     o);
    }

    Status fetch_add(const btl::RegistrationHandle* remote) {
        RdmaOutcome o;
        return ended(
            [&] {
                return module_->atomics()->atomic_fop({.endpoint = self_ep_[0],
                                                       .local = local_.data(),
                                                       .remote = region_address(),
                                                       .local_handle = local_handle_,
                                                       .remote_handle = remote,
                                                       .op = btl::AtomicOp::add,
                                                       .operand = 1,
                                                       .cb = &note_outcome,
                                                       .cbdata = &o});
            },
            o);
    }

    bool memory_untouched() const {
        for (std::uint64_t w : memory_)
            if (w != fill) return false;
        return true;
    }
    bool local_untouched() const {
        for (std::uint64_t w : local_)
            if (w != sentinel) return false;
        return true;
    }

    std::array<std::uint64_t, 16 + region_size / 8> memory_{};
    std::array<std::uint64_t, 4> local_{};
    btl::RegistrationHandle* handle_ = nullptr;
    btl::RegistrationHandle* local_handle_ = nullptr;
    std::array<std::byte, btl::max_registration_handle_size> forged_{};
};

TEST_F(OfiForgedKey, APutIsRefused) {
    const Status s = transfer(true, forged());
    EXPECT_NE(s, Status::timeout) << "a put through a forged key never ended";
    EXPECT_FALSE(ok(s)) << "a put through a forged key succeeded";
    EXPECT_TRUE(memory_untouched()) << "a put through a forged key wrote the region";
    const Status after = transfer(true, handle_);
    ASSERT_TRUE(ok(after)) << "a put through the real handle after the refusal: "
                           << to_string(after);
    EXPECT_EQ(region()[0], sentinel);
}

TEST_F(OfiForgedKey, AGetIsRefusedAndLeavesItsBuffer) {
    const Status s = transfer(false, forged());
    EXPECT_NE(s, Status::timeout) << "a get through a forged key never ended";
    EXPECT_FALSE(ok(s)) << "a get through a forged key succeeded";
    EXPECT_TRUE(local_untouched()) << "a refused get wrote its buffer";
}

TEST_F(OfiForgedKey, AFetchingAtomicIsRefusedAndLeavesItsResult) {
    if ((module_->attributes().flags & btl::flags::atomic_fops) == 0)
        GTEST_SKIP() << module_name() << " offers no fetching atomics";
    const Status s = fetch_add(forged());
    EXPECT_NE(s, Status::timeout) << "a fetch-add through a forged key never ended";
    EXPECT_FALSE(ok(s)) << "a fetch-add through a forged key succeeded";
    EXPECT_TRUE(local_untouched()) << "a refused fetch-add wrote its result";
    EXPECT_TRUE(memory_untouched()) << "a refused fetch-add changed the region";
    const Status after = fetch_add(handle_);
    ASSERT_TRUE(ok(after)) << "a fetch-add through the real handle after the refusal: "
                           << to_string(after);
    EXPECT_EQ(local_[0], fill);
    EXPECT_EQ(region()[0], fill + 1);
}

}  // namespace

namespace {

// The harness itself: through the real handle each operation works.
TEST_F(OfiForgedKey, ThroughTheRealHandleEachOperationWorks) {
    ASSERT_TRUE(ok(transfer(true, handle_)));
    EXPECT_EQ(region()[0], sentinel);
    ASSERT_TRUE(ok(transfer(false, handle_)));
    if ((module_->attributes().flags & btl::flags::atomic_fops) == 0) return;
    const Status s = fetch_add(handle_);
    ASSERT_TRUE(ok(s)) << "a fetch-add: " << to_string(s);
    EXPECT_EQ(local_[0], sentinel);
    EXPECT_EQ(region()[0], sentinel + 1);
}

}  // namespace
