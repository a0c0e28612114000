// btl/ofi's registration cache and memory the program gives back: a buffer
// registered, deregistered (its registration kept for reuse), released
// (munmap, free() of a large block, madvise(MADV_DONTNEED)) and mapped again
// at the same address gets a new registration, never the cached one, and a
// get through it reads the new buffer's bytes.  The module reaches its own
// process, so the target is this process.  The provider comes from the
// environment (btl_ofi_provider_include, set by each ctest entry).
//
// tcp and shm address the target's memory by its virtual address, so a stale
// registration would still read the new bytes there: the new memory key is
// what shows the cache missed.  On a provider that pins pages (verbs) the
// stale registration would read the old pages.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

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
#include "transit/btl/util/memory_release_monitor.hpp"

namespace {

using namespace transit;
using transit::test::note_outcome;
using transit::test::RdmaOutcome;

const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

void* map_at(void* at, std::size_t len, unsigned char fill) {
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (at != nullptr ? MAP_FIXED_NOREPLACE : 0);
    void* p = mmap(at, len, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    std::memset(p, fill, len);
    return p;
}

class OfiReleasedMemory : public transit::test::ofi_loopback::LoopbackTest {
  protected:
    void SetUp() override {
        LoopbackTest::SetUp();
        if (!ready()) return;
        local_.fill(0);
        local_handle_ = module_->rdma()->register_mem(nullptr, local_.data(), sizeof local_,
                                                      btl::reg_flags::access_any);
        ASSERT_NE(local_handle_, nullptr);
    }

    void TearDown() override {
        if (module_ == nullptr) return;
        if (local_handle_ != nullptr) {
            EXPECT_EQ(module_->rdma()->deregister_mem(local_handle_), Status::success);
        }
        LoopbackTest::TearDown();
    }

    // Registers [p, p + len) and returns its memory key; the handle stays in handle_.
    std::uint64_t register_key(void* p, std::size_t len) {
        handle_ = module_->rdma()->register_mem(nullptr, p, len, btl::reg_flags::access_any);
        if (handle_ == nullptr) return 0;
        ofi::PackedHandle packed{};
        std::memcpy(&packed, handle_, sizeof packed);
        return packed.key;
    }
    void deregister() {
        ASSERT_EQ(module_->rdma()->deregister_mem(handle_), Status::success);
        handle_ = nullptr;
    }

    // Reads local_.size() bytes at `remote` through handle_ into local_.
    Status get(const void* remote) {
        RdmaOutcome o;
        const btl::RdmaRequest req{.endpoint = self_ep_[0],
                                   .local = local_.data(),
                                   .remote = reinterpret_cast<std::uintptr_t>(remote),
                                   .local_handle = local_handle_,
                                   .remote_handle = handle_,
                                   .size = local_.size(),
                                   .cb = &note_outcome,
                                   .cbdata = &o};
        return transit::test::ofi_loopback::ended([&] { return module_->rdma()->get(req); }, o,
                                                  opened_->progress, std::chrono::seconds(10));
    }

    // Registers `p`, deregisters it (cached), runs `release`, maps the same
    // address again (filled with 0x77 unless `remap` does it), registers it
    // and reads it back: a new key, and the new bytes.
    template <typename Release, typename Remap>
    void expect_new_registration(void* p, std::size_t len, Release release, Remap remap,
                                 unsigned char new_fill) {
        const std::uint64_t old_key = register_key(p, len);
        ASSERT_NE(handle_, nullptr);
        deregister();
        release();
        void* again = remap();
        ASSERT_EQ(again, p) << "could not map the same address again";
        const std::uint64_t new_key = register_key(again, len);
        ASSERT_NE(handle_, nullptr);
        EXPECT_NE(new_key, old_key) << "the cached registration of released memory was reused";
        const Status s = get(static_cast<char*>(again) + 64);
        ASSERT_TRUE(ok(s)) << to_string(s);
        for (unsigned char b : local_) ASSERT_EQ(b, new_fill) << "not the new buffer's bytes";
        deregister();
    }

    std::array<unsigned char, 256> local_{};
    btl::RegistrationHandle* local_handle_ = nullptr;
    btl::RegistrationHandle* handle_ = nullptr;
};

TEST_F(OfiReleasedMemory, MunmapThenMmapAtTheSameAddress) {
    const std::size_t len = 4 * page;
    void* p = map_at(nullptr, len, 0x11);
    ASSERT_NE(p, nullptr);
    expect_new_registration(
        p, len, [&] { ASSERT_EQ(munmap(p, len), 0); }, [&] { return map_at(p, len, 0x77); }, 0x77);
    munmap(p, len);
}

TEST_F(OfiReleasedMemory, FreeOfALargeBlockThenMmapThere) {
    if (!btl::util::MemoryReleaseMonitor::reliable())
        GTEST_SKIP() << "malloc is not glibc's: " << btl::util::MemoryReleaseMonitor::reason();
    // glibc maps blocks above the threshold and free() unmaps them from inside
    // libc; the threshold is fixed so it does not rise after a free.
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    constexpr std::size_t big = 8u << 20;
    void* block = std::malloc(big);
    ASSERT_NE(block, nullptr);
    std::memset(block, 0x11, big);
    // The block's whole pages: what mmap can take once free() gave them back.
    auto* first = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(block) & ~(page - 1));
    const std::size_t len = big - page;
    void* mapped = nullptr;
    expect_new_registration(
        first, len, [&] { std::free(block); }, [&] { return mapped = map_at(first, len, 0x77); },
        0x77);
    if (mapped != nullptr) munmap(mapped, len);
}

TEST_F(OfiReleasedMemory, MadviseDontneedGivesNewZeroPages) {
    const std::size_t len = 4 * page;
    void* p = map_at(nullptr, len, 0x11);
    ASSERT_NE(p, nullptr);
    expect_new_registration(
        p, len, [&] { ASSERT_EQ(madvise(p, len, MADV_DONTNEED), 0); }, [&] { return p; }, 0);
    munmap(p, len);
}

}  // namespace
