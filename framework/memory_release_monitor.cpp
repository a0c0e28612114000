#include "transit/btl/util/memory_release_monitor.hpp"

#include <cerrno>
#include <cstring>
#include <iterator>

#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__)
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TRANSIT_RELEASE_HOOKS 1

#include "transit/keep_loaded.hpp"
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TRANSIT_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TRANSIT_SANITIZER_ALLOCATOR 1
#endif
#endif

// The hooks and note_release run wherever libc releases memory, including a
// thread's last madvise of its own stack after a sanitizer has torn down its
// state for that thread: they must not be instrumented (TSan crashed there).
#define TRANSIT_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread", "undefined")))

namespace transit::btl::util {

namespace {

// The log.  Every field is an atomic with sequentially consistent order so a
// reader can tell a torn slot (being overwritten by a writer a full turn
// ahead) from a complete one: see read().
struct Slot {
    std::atomic<std::uint64_t> seq{0};  // index + 1 once written
    std::atomic<std::uintptr_t> base{0};
    std::atomic<std::size_t> length{0};
};
constinit Slot slots[MemoryReleaseMonitor::log_length];
constinit std::atomic<std::uint64_t> log_head{0};

static_assert((MemoryReleaseMonitor::log_length & (MemoryReleaseMonitor::log_length - 1)) == 0);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

constinit const char* why_not = "";
constinit const unsigned char* munmap_entry = nullptr;
constinit std::uint64_t munmap_bytes = 0;

#ifdef TRANSIT_RELEASE_HOOKS

// Transit's versions of the patched functions: record, then the system call
// itself (the original's first bytes are gone).  syscall() sets errno and
// returns -1 on failure as the originals do.  Recording comes first, so no
// moment exists where the pages are gone and a cache still finds them.

TRANSIT_UNINSTRUMENTED int hook_munmap(void* addr, std::size_t len) noexcept {
    MemoryReleaseMonitor::note_release(addr, len);
    return static_cast<int>(::syscall(SYS_munmap, addr, len));
}

// Called as the variadic mremap(old, old_len, new_len, flags, ...): on x86-64
// the fifth argument is in its register either way, read only when a flag
// says it was passed.
TRANSIT_UNINSTRUMENTED void* hook_mremap(void* old_addr, std::size_t old_len, std::size_t new_len,
                                         int flags, void* new_addr) noexcept {
    if ((flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) == 0) new_addr = nullptr;
    MemoryReleaseMonitor::note_release(old_addr, old_len);
    if ((flags & MREMAP_FIXED) != 0) MemoryReleaseMonitor::note_release(new_addr, new_len);
    return reinterpret_cast<void*>(
        ::syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr));
}

TRANSIT_UNINSTRUMENTED int hook_madvise(void* addr, std::size_t len, int advice) noexcept {
    // The advice that replaces pages under an address (a pinned page stays with
    // the device, the process faults in a new one).
    constexpr int dontneed_locked = 24;  // MADV_DONTNEED_LOCKED, Linux 5.18
    if (advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE ||
        advice == dontneed_locked)
        MemoryReleaseMonitor::note_release(addr, len);
    return static_cast<int>(::syscall(SYS_madvise, addr, len, advice));
}

TRANSIT_UNINSTRUMENTED void* hook_mmap(void* addr, std::size_t len, int prot, int flags, int fd,
                                       off_t offset) noexcept {
    if ((flags & MAP_FIXED) != 0) MemoryReleaseMonitor::note_release(addr, len);
    return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, len, prot, flags, fd, offset));
}

// glibc's brk keeps the break in __curbrk, which sbrk reads: ours must too.
void** libc_curbrk = nullptr;

TRANSIT_UNINSTRUMENTED int hook_brk(void* addr) noexcept {
    void* current = *libc_curbrk;
    if (current != nullptr && addr != nullptr && addr < current)
        MemoryReleaseMonitor::note_release(
            addr, static_cast<std::size_t>(static_cast<char*>(current) - static_cast<char*>(addr)));
    void* now = reinterpret_cast<void*>(::syscall(SYS_brk, addr));
    *libc_curbrk = now;
    if (now < addr) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

// movabs r11, imm64; jmp r11.  r11 is scratch at a call boundary.
constexpr std::size_t patch_size = 13;

bool looks_patched(const unsigned char* code) noexcept {
    // A jump at the entry: another patcher (UCX, Open MPI) owns the function;
    // overwriting it would blind that one.
    return code[0] == 0xe9 || code[0] == 0xeb || (code[0] == 0xff && code[1] == 0x25) ||
           ((code[0] == 0x48 || code[0] == 0x49) && (code[1] & 0xf8) == 0xb8);
}

// Writes the jump over the entry of `target`.  Made at setup, while no other
// thread should be inside these functions (a thread executing the first bytes
// as they change would run a torn instruction: the window every entry patcher
// has, kept to one memcpy).
bool patch(unsigned char* target, const void* hook) noexcept {
    unsigned char code[patch_size] = {0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x41, 0xff, 0xe3};
    const auto address = reinterpret_cast<std::uintptr_t>(hook);
    std::memcpy(code + 2, &address, sizeof address);

    const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(target) & ~(page - 1);
    const std::uintptr_t end =
        (reinterpret_cast<std::uintptr_t>(target) + patch_size + page - 1) & ~(page - 1);
    void* pages = reinterpret_cast<void*>(first);
    if (::mprotect(pages, end - first, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
        why_not = "the kernel refused to make libc's code writable";
        return false;
    }
    std::memcpy(target, code, patch_size);
    ::mprotect(pages, end - first, PROT_READ | PROT_EXEC);
    __builtin___clear_cache(reinterpret_cast<char*>(target),
                            reinterpret_cast<char*>(target) + patch_size);
    return true;
}

ReleaseMonitorState install() noexcept {
    // libc's own definitions, not whatever the symbol resolves to first (a
    // sanitizer's interceptor, which ends in libc's function anyway).
    void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (libc == nullptr) {
        why_not = "libc.so.6 not found";
        return ReleaseMonitorState::unsupported;
    }
    libc_curbrk = static_cast<void**>(::dlsym(libc, "__curbrk"));
    if (libc_curbrk == nullptr) {
        why_not = "libc has no __curbrk";
        ::dlclose(libc);
        return ReleaseMonitorState::unsupported;
    }
    // Checked all before patching any, so a refusal leaves libc untouched
    // unless mprotect itself refuses midway (then the patched ones still work).
    struct Hook {
        const char* name;
        const void* hook;
    };
    const Hook hooks[] = {
        {"munmap", reinterpret_cast<const void*>(&hook_munmap)},
        {"mremap", reinterpret_cast<const void*>(&hook_mremap)},
        {"madvise", reinterpret_cast<const void*>(&hook_madvise)},
        {"mmap", reinterpret_cast<const void*>(&hook_mmap)},
        {"brk", reinterpret_cast<const void*>(&hook_brk)},
    };
    unsigned char* targets[std::size(hooks)] = {};
    for (std::size_t i = 0; i < std::size(hooks); ++i) {
        targets[i] = static_cast<unsigned char*>(::dlsym(libc, hooks[i].name));
        if (targets[i] == nullptr || looks_patched(targets[i])) {
            why_not = targets[i] == nullptr
                          ? "libc lacks one of munmap, mremap, madvise, mmap, brk"
                          : "another library has patched libc's memory functions (UCX, Open MPI)";
            ::dlclose(libc);
            return ReleaseMonitorState::refused;
        }
    }
    // libc jumps into this library from now on: it must never be unloaded
    // (a program that dlopens Transit, as Open MPI does a component, may close
    // it).  Linked into the program itself, it cannot be.
    Dl_info self{};
    link_map* self_map = nullptr;
    link_map* program_map = nullptr;
    void* program = ::dlopen(nullptr, RTLD_NOW);
    if (program != nullptr) {
        ::dlinfo(program, RTLD_DI_LINKMAP, &program_map);
        ::dlclose(program);
    }
    if (::dladdr1(reinterpret_cast<const void*>(&hook_munmap), &self,
                  reinterpret_cast<void**>(&self_map), RTLD_DL_LINKMAP) == 0 ||
        self_map == nullptr) {
        why_not = "Transit's library could not be found to pin it in memory";
        ::dlclose(libc);
        return ReleaseMonitorState::refused;
    }
    const char* self_path[] = {self_map->l_name};
    if (self_map != program_map && mca::keep_loaded(self_path) != 1) {
        why_not = "Transit's library could not be pinned in memory";
        ::dlclose(libc);
        return ReleaseMonitorState::refused;
    }
    for (std::size_t i = 0; i < std::size(hooks); ++i) {
        if (!patch(targets[i], hooks[i].hook)) {
            ::dlclose(libc);
            return ReleaseMonitorState::refused;
        }
    }
    munmap_entry = targets[0];
    std::memcpy(&munmap_bytes, munmap_entry, sizeof munmap_bytes);
    ::dlclose(libc);  // RTLD_NOLOAD took a reference; libc stays loaded
#ifdef TRANSIT_SANITIZER_ALLOCATOR
    why_not = "the sanitizer's allocator gives memory back by raw system calls, unseen";
    return ReleaseMonitorState::partial;
#else
    return ReleaseMonitorState::active;
#endif
}

#endif  // TRANSIT_RELEASE_HOOKS

}  // namespace

ReleaseMonitorState MemoryReleaseMonitor::start() noexcept {
#ifdef TRANSIT_RELEASE_HOOKS
    // A function-local static: installed once even when two threads ask.
    static const ReleaseMonitorState state = install();
    return state;
#else
    why_not = "memory hooks exist for x86-64 Linux with glibc only";
    return ReleaseMonitorState::unsupported;
#endif
}

const char* MemoryReleaseMonitor::reason() noexcept {
    return why_not;
}

TRANSIT_UNINSTRUMENTED void MemoryReleaseMonitor::note_release(const void* addr,
                                                               std::size_t len) noexcept {
    if (len == 0) return;
    const std::uint64_t i = log_head.fetch_add(1, std::memory_order_seq_cst);
    Slot& s = slots[i & (log_length - 1)];
    s.base.store(reinterpret_cast<std::uintptr_t>(addr), std::memory_order_seq_cst);
    s.length.store(len, std::memory_order_seq_cst);
    s.seq.store(i + 1, std::memory_order_seq_cst);
}

const unsigned char* MemoryReleaseMonitor::patched_entry() noexcept {
    return munmap_entry;
}

std::uint64_t MemoryReleaseMonitor::patched_bytes() noexcept {
    return munmap_bytes;
}

const std::atomic<std::uint64_t>& MemoryReleaseMonitor::head() noexcept {
    return log_head;
}

MemoryReleaseMonitor::Read MemoryReleaseMonitor::read(std::uint64_t index,
                                                      ReleasedRange& out) noexcept {
    const Slot& s = slots[index & (log_length - 1)];
    const std::uint64_t seq = s.seq.load(std::memory_order_seq_cst);
    out.base = s.base.load(std::memory_order_seq_cst);
    out.length = s.length.load(std::memory_order_seq_cst);
    // A writer that could have overwritten this slot took its number (index +
    // log_length or later) before it stored anything: if the fields read came
    // from it, head is past index + log_length by now.
    if (log_head.load(std::memory_order_seq_cst) - index > log_length) return Read::lost;
    return seq == index + 1 ? Read::entry : Read::not_ready;
}

}  // namespace transit::btl::util
