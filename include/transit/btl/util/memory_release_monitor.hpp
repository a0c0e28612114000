// Sees memory leave the process (munmap, mremap, madvise that discards pages,
// mmap over a mapping, a heap shrunk by brk) so a registration cache can drop
// registrations of pages that are gone before an address is reused.
//
// How releases are caught: the entries of libc's munmap, mremap, madvise, mmap
// and brk are patched (x86-64 Linux with glibc) with a jump to Transit's own
// versions, which record the range and then make the system call themselves.
// Patching the code, not interposing the symbol, also catches libc's internal
// calls: free() of a large block and malloc's trimming of its heaps call these
// same functions without going through the PLT.  Sanitizers' interceptors end
// in libc's functions too, so they are seen as well.  userfaultfd was weighed
// and not used: its unmap events need every cached range registered with it,
// in a fault mode that stalls or refuses (kernel faults, non-root) access to
// pages not yet touched, and a reader thread.  Checking /proc or mincore on a
// cache hit would cost a system call on the hot path.
//
// Where patching is impossible (another architecture, libc not glibc, the
// kernel refusing writable code, another library having patched first) or
// incomplete (ASan and TSan allocators give memory back by raw system calls),
// state() says so and a registration cache then keeps no unused registration.
//
// Releases can happen on any thread, inside the cache's own code (a free()
// that trims the heap) or in a signal handler, so recording one neither
// allocates nor locks: it goes into a fixed process-wide log.  A subscriber
// (ReleaseCursor) reads the log at its own pace, before its next lookup; when
// it fell more than the log's length behind, it is told to drop everything.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace transit::btl::util {

// Help of a component's parameter that turns following releases off (ofi's
// and openib's rcache_monitor): the same words wherever it appears.
inline constexpr const char* release_monitor_param_help =
    "Follow memory the program releases (munmap, free, madvise, mremap, a shrunk heap) by "
    "hooks in libc, and drop cached registrations of it.  Off, or where the hooks cannot be "
    "installed (not x86-64 glibc, sanitizer builds), no registration is kept unused";

struct ReleasedRange {
    std::uintptr_t base = 0;
    std::size_t length = 0;
};

enum class ReleaseMonitorState {
    active,       // every release through libc is seen
    partial,      // hooks installed, but the allocator bypasses them (ASan, TSan)
    unsupported,  // not x86-64 Linux with glibc
    refused,      // the patch could not be made (see reason())
};

class MemoryReleaseMonitor {
  public:
    static constexpr std::size_t log_length = 1024;  // a power of two

    // Installs the hooks once per process (later calls return the first
    // answer); setup paths only.
    static ReleaseMonitorState start() noexcept;
    // Whether a cache may keep unused registrations: start() said active.
    static bool reliable() noexcept { return start() == ReleaseMonitorState::active; }
    // Why start() did not say active (empty when it did).
    static const char* reason() noexcept;

    // Records [addr, addr + len) as released.  The hooks call it; call it
    // yourself for memory you release by a raw system call.  Lock-free, no
    // allocation, safe in a signal handler.
    static void note_release(const void* addr, std::size_t len) noexcept;

    // The first 8 bytes of libc's patched munmap, and what they must hold, or
    // nullptr when nothing was patched.  A library loaded later (UCX's UCM)
    // may patch the entries again and blind the monitor: a cursor compares
    // them before every lookup and, when they changed, tells its cache to
    // drop everything and keep nothing unused from then on.
    static const unsigned char* patched_entry() noexcept;
    static std::uint64_t patched_bytes() noexcept;

    // The log: entries are numbered from 0; head() is the next number.
    static const std::atomic<std::uint64_t>& head() noexcept;
    enum class Read {
        entry,      // `out` holds entry `index`
        not_ready,  // being written: its release has not reached the kernel yet
        lost,       // overwritten: the reader fell more than log_length behind
    };
    static Read read(std::uint64_t index, ReleasedRange& out) noexcept;
};

// One subscriber's position in the release log.  Not thread safe: used by the
// cache's owner, under whatever serialises its lookups.
class ReleaseCursor {
  public:
    ReleaseCursor() noexcept = default;  // follows nothing: never pending
    // Follows releases from now on.
    static ReleaseCursor follow() noexcept {
        ReleaseCursor c;
        c.head_ = &MemoryReleaseMonitor::head();
        c.next_ = c.head_->load(std::memory_order_acquire);
        c.entry_ = MemoryReleaseMonitor::patched_entry();
        c.entry_bytes_ = MemoryReleaseMonitor::patched_bytes();
        return c;
    }

    bool following() const noexcept { return head_ != nullptr; }
    // Whether releases wait to be applied or the hooks were overwritten: the
    // two loads the hot path pays.
    bool pending() const noexcept {
        return head_ != nullptr &&
               (head_->load(std::memory_order_acquire) != next_ || !hooks_intact());
    }
    // False once another library patched libc's entries over the monitor's.
    bool hooks_intact() const noexcept {
        if (entry_ == nullptr) return true;
        std::uint64_t now;
        std::memcpy(&now, entry_, sizeof now);
        return now == entry_bytes_;
    }
    // Stops following: pending() is false from now on.
    void stop() noexcept { head_ = nullptr; }

    // Hands each release recorded since the last call to on_range(base, len);
    // calls on_lost() instead when some were overwritten unread (drop all).
    // An entry still being written is skipped now and handed again next time:
    // its range is still mapped, and later complete ones are handed at once.
    template <typename OnRange, typename OnLost>
    void drain(OnRange&& on_range, OnLost&& on_lost) {
        if (head_ == nullptr) return;
        const std::uint64_t head = head_->load(std::memory_order_seq_cst);
        std::uint64_t resume = head;
        for (std::uint64_t i = next_; i != head; ++i) {
            ReleasedRange r;
            switch (MemoryReleaseMonitor::read(i, r)) {
                case MemoryReleaseMonitor::Read::entry:
                    on_range(r.base, r.length);
                    break;
                case MemoryReleaseMonitor::Read::not_ready:
                    if (resume == head) resume = i;
                    break;
                case MemoryReleaseMonitor::Read::lost:
                    on_lost();
                    next_ = head;  // what came before `head` is covered by on_lost
                    return;
            }
        }
        next_ = resume;
    }

  private:
    const std::atomic<std::uint64_t>* head_ = nullptr;
    std::uint64_t next_ = 0;
    const unsigned char* entry_ = nullptr;
    std::uint64_t entry_bytes_ = 0;
};

}  // namespace transit::btl::util
