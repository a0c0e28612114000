// One-sided operations: registration, put and get over sizes 0..4 MiB (checked
// through the service, not through the module), flush, and refusal of every
// access outside a live registration.
#include <fmt/format.h>

#include <array>
#include <vector>

#include "tests/conformance/btl_test.hpp"
#include "tests/conformance/suite_env.hpp"

namespace transit::conformance {
namespace {

constexpr std::uint64_t region_offset = 64;

std::size_t round_up(std::size_t n, std::size_t alignment) {
    return alignment > 1 ? (n + alignment - 1) / alignment * alignment : n;
}

std::string difference(std::span<const std::byte> want, std::span<const std::byte> got) {
    if (want.size() != got.size())
        return fmt::format("length {} instead of {}", got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
        if (want[i] != got[i]) return fmt::format("first difference at offset {}", i);
    return "";
}

class Rdma : public BtlTest {
  protected:
    // "" when the module has the flags, else the reason to skip.
    std::string missing(std::uint32_t flag, const char* what) const {
        return has_flags(flag) ? "" : component_ + " does not offer " + what;
    }

    // Moves size bytes between local and region_offset, in pieces no larger
    // than the module's limit.
    Status transfer(bool is_put, std::byte* local, btl::RegistrationHandle* local_handle,
                    std::uint64_t offset, std::size_t size) {
        const std::size_t limit = is_put ? attr().put_limit : attr().get_limit;
        std::size_t done = 0;
        do {
            const std::size_t n = std::min(size - done, limit);
            const std::uint64_t remote = remote_address(offset + done);
            const Status s = run_rdma(is_put,
                                      {.local = local + done,
                                       .remote = remote,
                                       .local_handle = local_handle,
                                       .remote_handle = remote_handle(),
                                       .size = n},
                                      fmt::format("{} of {} bytes", is_put ? "put" : "get", n));
            if (!ok(s)) return s;
            done += n;
        } while (done < size);
        return Status::success;
    }

    std::vector<std::size_t> sizes(std::size_t alignment) const {
        std::vector<std::size_t> out;
        for (std::size_t s : log_sizes(suite_env().max_size)) {
            s = round_up(s, alignment);
            if (s + region_offset <= remote_size() && (out.empty() || s != out.back()))
                out.push_back(s);
        }
        return out;
    }
};

TEST_P(Rdma, RegisterAndDeregister) {
    if (attr().registration_handle_size == 0)
        GTEST_SKIP() << component_ << " needs no registration (registration_handle_size 0)";
    std::vector<std::uint64_t> memory(1 << 17);
    auto* base = reinterpret_cast<std::byte*>(memory.data());
    for (std::size_t size : {std::size_t{1}, std::size_t{4096}, memory.size() * 8}) {
        btl::RegistrationHandle* a =
            rdma().register_mem(target(), base, size, btl::reg_flags::access_any);
        btl::RegistrationHandle* b =
            rdma().register_mem(nullptr, base, size, btl::reg_flags::remote_read);
        ASSERT_NE(a, nullptr) << "register_mem of " << size << " bytes";
        ASSERT_NE(b, nullptr) << "a second registration of the same " << size << " bytes";
        EXPECT_EQ(rdma().deregister_mem(a), Status::success);
        EXPECT_EQ(rdma().deregister_mem(b), Status::success);
    }
}

// A handle deregistered already, or one the module never gave out, is
// refused without being followed (the pml never does either; a user of the
// btl may).
TEST_P(Rdma, DeregisteringTwiceOrAForeignHandleIsRefused) {
    if (attr().registration_handle_size == 0)
        GTEST_SKIP() << component_ << " needs no registration (registration_handle_size 0)";
    std::vector<std::byte> memory(4096);
    btl::RegistrationHandle* h =
        rdma().register_mem(target(), memory.data(), memory.size(), btl::reg_flags::access_any);
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(rdma().deregister_mem(h), Status::success);
    EXPECT_EQ(rdma().deregister_mem(h), Status::not_found) << "deregistered twice";
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> made_up{};
    EXPECT_EQ(rdma().deregister_mem(reinterpret_cast<btl::RegistrationHandle*>(made_up.data())),
              Status::not_found)
        << "a handle the module never gave out";
}

TEST_P(Rdma, PutSizes) {
    if (auto why = missing(btl::flags::put, "put (flags::put)"); !why.empty()) GTEST_SKIP() << why;
    std::vector<std::byte> local(round_up(suite_env().max_size, attr().put_alignment) + 64);
    btl::RegistrationHandle* lh = register_local(local.data(), local.size());
    for (std::size_t size : sizes(attr().put_alignment)) {
        for (std::size_t i = 0; i < size; ++i) local[i] = pattern(size + 11, i);
        const Status s = transfer(true, local.data(), lh, region_offset, size);
        ASSERT_TRUE(ok(s)) << "put of " << size << " bytes: " << to_string(s);
        const std::vector<std::byte> seen = remote_read(region_offset, size);
        ASSERT_EQ(difference(std::span(local).first(size), seen), "")
            << "the target after a put of " << size << " bytes";
    }
}

TEST_P(Rdma, GetSizes) {
    if (auto why = missing(btl::flags::get, "get (flags::get)"); !why.empty()) GTEST_SKIP() << why;
    std::vector<std::byte> local(round_up(suite_env().max_size, attr().get_alignment) + 64);
    std::vector<std::byte> want(local.size());
    btl::RegistrationHandle* lh = register_local(local.data(), local.size());
    for (std::size_t size : sizes(attr().get_alignment)) {
        ASSERT_TRUE(remote_fill(region_offset, size, static_cast<std::uint32_t>(size + 5)));
        std::fill(local.begin(), local.end(), std::byte{0});
        const Status s = transfer(false, local.data(), lh, region_offset, size);
        ASSERT_TRUE(ok(s)) << "get of " << size << " bytes: " << to_string(s);
        for (std::size_t i = 0; i < size; ++i) want[i] = pattern(size + 5, i);
        ASSERT_EQ(difference(std::span(want).first(size), std::span(local).first(size)), "")
            << "get of " << size << " bytes";
        EXPECT_EQ(local[size], std::byte{0}) << "get of " << size << " bytes wrote past its end";
    }
}

struct FlushCounts {
    int called = 0;
    int failed = 0;
};

void count_rdma(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*, void* cbdata,
                Status s) {
    auto* c = static_cast<FlushCounts*>(cbdata);
    ++c->called;
    if (!ok(s)) ++c->failed;
}

TEST_P(Rdma, FlushCompletesOutstandingPuts) {
    if (auto why = missing(btl::flags::put, "put (flags::put)"); !why.empty()) GTEST_SKIP() << why;
    constexpr std::size_t count = 64;
    constexpr std::size_t piece = 4096;
    std::vector<std::byte> local(count * piece);
    for (std::size_t i = 0; i < local.size(); ++i) local[i] = pattern(99, i);
    btl::RegistrationHandle* lh = register_local(local.data(), local.size());
    FlushCounts counts;
    int queued = 0;
    for (std::size_t k = 0; k < count; ++k) {
        Status s;
        int tries = 0;
        while ((s = rdma().put({.endpoint = target(),
                                .local = local.data() + k * piece,
                                .remote = remote_address(region_offset + k * piece),
                                .local_handle = lh,
                                .remote_handle = remote_handle(),
                                .size = piece,
                                .cb = &count_rdma,
                                .cbcontext = this,
                                .cbdata = &counts})) == Status::out_of_resource &&
               ++tries < 1000000)
            progress();
        ASSERT_TRUE(ok(s)) << "put " << k << ": " << to_string(s);
        if (s == Status::success) ++queued;
    }
    ASSERT_TRUE(ok(rdma().flush(target())));
    EXPECT_EQ(counts.called, queued) << "flush returned before every put completed";
    EXPECT_EQ(counts.failed, 0);
    EXPECT_TRUE(ok(rdma().flush(nullptr)));
    const std::vector<std::byte> seen = remote_read(region_offset, local.size());
    EXPECT_EQ(difference(local, seen), "") << "the target after flush";
}

TEST_P(Rdma, AccessOutsideRegistrationFails) {
    if (auto why = missing(btl::flags::put | btl::flags::get, "put and get"); !why.empty())
        GTEST_SKIP() << why;
    if (attr().registration_handle_size == 0)
        GTEST_SKIP() << component_ << " uses no registration handle, so has no bounds to check";
    std::vector<std::byte> local(64, std::byte{0x5a});
    btl::RegistrationHandle* lh = register_local(local.data(), local.size());
    const std::uint64_t end = remote_size();
    for (bool is_put : {true, false}) {
        const char* op = is_put ? "put" : "get";
        const Status s = run_rdma(is_put,
                                  {.local = local.data(),
                                   .remote = remote_address(end - 8),
                                   .local_handle = lh,
                                   .remote_handle = remote_handle(),
                                   .size = 16},
                                  fmt::format("{} across the end of the registration", op));
        EXPECT_FALSE(ok(s)) << op << " of 16 bytes at 8 bytes before the end of the region "
                            << "succeeded";
    }
}

// A registration bounds what a peer can do, as an RDMA NIC's memory key does:
// outside every live registration of the target each put, get and atomic is
// an error at the origin, the get's buffer and the atomic's result are left as
// they were, and the target's memory is unchanged (the guards around the
// region are checked at the end of the case).  Then a valid put still works.
class RdmaRefusal : public Rdma {
  protected:
    static constexpr std::size_t len = 16;
    static constexpr std::byte sentinel{0xa5};
    static constexpr std::uint64_t sentinel_word = 0xa5a5a5a5a5a5a5a5ull;

    // "" when the module offers one-sided operations, else why to skip; a
    // module offering them without handles fails: nothing would bound a peer.
    std::string skip_reason() {
        constexpr std::uint32_t one_sided =
            btl::flags::put | btl::flags::get | btl::flags::atomic_ops | btl::flags::atomic_fops;
        if ((attr().flags & one_sided) == 0) return component_ + " offers no one-sided operation";
        EXPECT_GT(attr().registration_handle_size, 0u)
            << component_ << " offers one-sided operations without registration handles: "
            << "nothing bounds what a peer can do";
        return attr().registration_handle_size == 0 ? "no handles" : "";
    }

    // Every one-sided operation the module offers, at addr through rh: each
    // must fail and leave the local buffers as they were.
    void expect_refused(const std::string& what, std::uint64_t addr,
                        const btl::RegistrationHandle* rh) {
        std::vector<std::byte> local(64, sentinel);
        btl::RegistrationHandle* lh = register_local(local.data(), local.size());
        auto expect_failed = [&](const std::string& op, Status s) {
            EXPECT_FALSE(ok(s)) << "a " << op << " " << what << " succeeded";
        };
        const btl::RdmaRequest transfer{.local = local.data(),
                                        .remote = addr,
                                        .local_handle = lh,
                                        .remote_handle = rh,
                                        .size = len};
        if (has_flags(btl::flags::put))
            expect_failed("put", run_rdma(true, transfer, "put " + what));
        if (has_flags(btl::flags::get)) {
            expect_failed("get", run_rdma(false, transfer, "get " + what));
            for (std::size_t i = 0; i < local.size(); ++i)
                ASSERT_EQ(local[i], sentinel) << "a refused get " << what << " wrote byte " << i;
        }
        // A fetching atomic the module offers (`support`): refused, its
        // result untouched.
        auto expect_fetch_refused = [&](const std::string& op, std::uint32_t support,
                                        AtomicKind kind, btl::AtomicRequest req) {
            if (!has_flags(btl::flags::atomic_fops) || !has_atomics(support)) return;
            alignas(8) std::uint64_t fetched = sentinel_word;
            req.local = &fetched;
            req.remote = addr;
            req.local_handle = lh;
            req.remote_handle = rh;
            expect_failed(op, run_atomic(kind, req, op + " " + what));
            EXPECT_EQ(fetched, sentinel_word)
                << "a refused " << op << " " << what << " wrote its result";
        };
        using namespace btl::atomic_support;
        expect_fetch_refused("fetch-add", add, AtomicKind::fop,
                             {.op = btl::AtomicOp::add, .operand = 1});
        expect_fetch_refused(
            "32-bit fetch-add", add | bits32, AtomicKind::fop,
            {.op = btl::AtomicOp::add, .operand = 1, .flags = btl::atomic_flags::bits32});
        expect_fetch_refused("compare-and-swap", cswap, AtomicKind::cswap,
                             {.operand = 1, .compare = 0});
        if (has_flags(btl::flags::atomic_ops) && has_atomics(or_))
            expect_failed("atomic or", run_atomic(AtomicKind::op,
                                                  {.remote = addr,
                                                   .remote_handle = rh,
                                                   .op = btl::AtomicOp::or_,
                                                   .operand = ~0ull},
                                                  "atomic or " + what));
    }

    // The region is untouched, and a put through the live handle works.
    void expect_region_intact_and_usable() {
        EXPECT_EQ(difference(std::vector<std::byte>(64), remote_read(0, 64)), "")
            << "the region after the refused operations";
        if (!has_flags(btl::flags::put)) return;
        std::vector<std::byte> local(len);
        for (std::size_t i = 0; i < len; ++i) local[i] = pattern(7, i);
        btl::RegistrationHandle* lh = register_local(local.data(), local.size());
        const Status s = run_rdma(true,
                                  {.local = local.data(),
                                   .remote = remote_address(0),
                                   .local_handle = lh,
                                   .remote_handle = remote_handle(),
                                   .size = len},
                                  "put through the live registration");
        ASSERT_TRUE(ok(s)) << "a valid put after the refusals: " << to_string(s);
        EXPECT_EQ(difference(local, remote_read(0, len)), "");
    }
};

TEST_P(RdmaRefusal, OutsideRegistrationBounds) {
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    const std::size_t hs = attr().registration_handle_size;
    const auto* real = reinterpret_cast<const std::byte*>(remote_handle());
    expect_refused("64 bytes below the region", remote_address(0) - 64, remote_handle());
    expect_refused("just above the region", remote_address(remote_size()), remote_handle());
    alignas(16) std::array<std::byte, btl::max_registration_handle_size> forged{};
    for (std::size_t i = 0; i < hs; ++i) forged[i] = real[i] ^ std::byte{0x5a};
    expect_refused("through a forged handle", remote_address(0),
                   reinterpret_cast<const btl::RegistrationHandle*>(forged.data()));
    expect_region_intact_and_usable();
}

TEST_P(RdmaRefusal, ThroughStaleHandle) {
    if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
    alignas(16) std::array<std::byte, btl::max_registration_handle_size> stale{};
    std::copy_n(reinterpret_cast<const std::byte*>(remote_handle()),
                attr().registration_handle_size, stale.begin());
    ASSERT_TRUE(remote_reregister());
    expect_refused("through the handle of a deregistered region", remote_address(0),
                   reinterpret_cast<const btl::RegistrationHandle*>(stale.data()));
    expect_region_intact_and_usable();
}

INSTANTIATE_TEST_SUITE_P(btl, RdmaRefusal, ::testing::ValuesIn(components_under_test()),
                         component_param_name);

INSTANTIATE_TEST_SUITE_P(btl, Rdma, ::testing::ValuesIn(components_under_test()),
                         component_param_name);

}  // namespace
}  // namespace transit::conformance
