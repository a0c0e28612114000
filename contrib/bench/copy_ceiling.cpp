// The machine's ceiling for a shared-memory rendezvous of heap buffers: what
// the copies themselves cost, with no messaging layer around them.  Two
// processes, each bound to its own CPU; per size it times (the median of the
// iterations):
//   memcpy   one core copies the message within its own memory;
//   get      the receiver reads the whole message from the sender with one
//            process_vm_readv (Cross Memory Attach, as a single-copy get);
//   split    both at once, as a stream of Transit's split rendezvous: the
//            receiver reads the first half of each message while the sender
//            writes the second with process_vm_writev, each side back to back
//            (as windowed messages go), timed over a block.
// The ratios to `memcpy` say what the kernel's copy allows on this machine:
// where a shared-memory bandwidth figure stands against the copies it is made
// of.  (Windowed messages overlap a little better than these blocks, so a
// rendezvous can read somewhat above `split`.)
//
//   copy_ceiling [size[k|M]...] [-n iterations]    (default 1M 4M, 200 iterations)
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>
#include <vector>

#include "contrib/bench/bind_to.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// The two processes' handshake, in a shared mapping: the receiver raises
// `go` to start an iteration, the sender raises `done` when its half is in.
struct Control {
    std::atomic<long> go{0};
    std::atomic<long> done{0};
    std::atomic<int> halves{0};  // second halves the sender writes for this `go`
    std::atomic<int> failed{0};
};

// A private anonymous mapping, touched so that no page fault is timed.
class Buffer {
  public:
    explicit Buffer(std::size_t size) : size_(size) {
        void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            std::perror("mmap");
            std::exit(1);
        }
        data_ = static_cast<char*>(p);
        std::memset(data_, 1, size);
    }
    ~Buffer() { munmap(data_, size_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    char* data() const noexcept { return data_; }

  private:
    char* data_ = nullptr;
    std::size_t size_ = 0;
};

bool parse_size(const char* text, std::size_t& size) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (end == text || v == 0) return false;
    std::size_t scale = 1;
    if (*end == 'k' || *end == 'K') scale = std::size_t{1} << 10, ++end;
    if (*end == 'm' || *end == 'M') scale = std::size_t{1} << 20, ++end;
    if (*end != '\0') return false;
    size = static_cast<std::size_t>(v) * scale;
    return size >= 128;
}

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

bool cma(pid_t pid, char* local, char* remote, std::size_t size, bool write) {
    iovec l{local, size};
    iovec r{remote, size};
    const ssize_t n =
        write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n == static_cast<ssize_t>(size)) return true;
    std::perror(write ? "process_vm_writev" : "process_vm_readv");
    return false;
}

// The sender: for each `go`, writes the second half of `src` into the
// receiver's `dst` `halves` times over.
[[noreturn]] void serve(Control& c, pid_t receiver, char* src, char* dst, std::size_t size) {
    for (long i = 1;; ++i) {
        long asked;
        while ((asked = c.go.load(std::memory_order_acquire)) < i)
            if (asked < 0) _exit(0);
        const std::size_t half = size / 2;
        const int n = c.halves.load(std::memory_order_relaxed);
        for (int k = 0; k < n; ++k)
            if (!cma(receiver, src + half, dst + half, size - half, true)) c.failed.store(1);
        c.done.store(i, std::memory_order_release);
    }
}

struct Row {
    double memcpy_gbs;
    double get_gbs;
    double split_gbs;
};

// Starts iteration i of the sender, with `halves` writes.
bool go(Control& c, long i, int halves) {
    c.halves.store(halves, std::memory_order_relaxed);
    c.go.store(i, std::memory_order_release);
    return true;
}

// Waits for the sender's end of iteration i: false when its writes failed.
bool finished(Control& c, long i) {
    while (c.done.load(std::memory_order_acquire) < i) {
    }
    return c.failed.load() == 0;
}

bool measure(std::size_t size, int iterations, Row& row) {
    void* shared =
        mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        std::perror("mmap");
        return false;
    }
    auto* c = new (shared) Control;
    Buffer src(size);  // the sender's message (its own copy after the fork)
    Buffer dst(size);  // the receiver's buffer, at the same address in both
    Buffer local(size);
    const pid_t receiver = getpid();
    const pid_t sender = fork();
    if (sender < 0) {
        std::perror("fork");
        return false;
    }
    if (sender == 0) {
        bind_to(1);
        std::memset(src.data(), 7, size);
        serve(*c, receiver, src.data(), dst.data(), size);
    }
    bind_to(0);
    std::vector<double> copy_t, get_t, split_t;
    Buffer copy_dst(size);
    bool ok = true;
    long i = 0;
    // Blocks of each kind in turn, so that a change of the machine's mode
    // hits all three; a block's first iteration (caches, ownership of the
    // lines the other kind wrote) is not timed.
    constexpr int block = 10;
    for (int round = 0; ok && round * block < iterations; ++round) {
        for (int k = 0; k <= block; ++k) {
            auto t0 = Clock::now();
            std::memcpy(copy_dst.data(), local.data(), size);
            std::atomic_signal_fence(std::memory_order_seq_cst);
            if (k > 0) copy_t.push_back(seconds_since(t0));
        }
        for (int k = 0; ok && k <= block; ++k) {
            auto t0 = Clock::now();
            ok = go(*c, ++i, 0) && cma(sender, dst.data(), src.data(), size, false) &&
                 finished(*c, i);
            if (k > 0) get_t.push_back(seconds_since(t0));
        }
        // A warm-up message, then a block of them streamed by both sides.
        for (const int n : {1, block}) {
            auto t0 = Clock::now();
            ok = ok && go(*c, ++i, n);
            for (int k = 0; ok && k < n; ++k)
                ok = cma(sender, dst.data(), src.data(), size / 2, false);
            ok = ok && finished(*c, i);
            if (n == block) split_t.push_back(seconds_since(t0) / block);
        }
    }
    c->go.store(-1, std::memory_order_release);
    waitpid(sender, nullptr, 0);
    munmap(shared, sizeof(Control));
    if (!ok) return false;
    const double bytes = static_cast<double>(size);
    row = {bytes / median(copy_t) / 1e9, bytes / median(get_t) / 1e9,
           bytes / median(split_t) / 1e9};
    return true;
}

int usage(const char* self) {
    std::fprintf(stderr, "usage: %s [size[k|M] >= 128 ...] [-n iterations > 0]\n", self);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::size_t> sizes;
    int iterations = 200;
    for (int i = 1; i < argc; ++i) {
        std::size_t size = 0;
        if (std::string(argv[i]) == "-n" && i + 1 < argc) {
            iterations = std::atoi(argv[++i]);
            if (iterations <= 0) return usage(argv[0]);
        } else if (parse_size(argv[i], size)) {
            sizes.push_back(size);
        } else {
            return usage(argv[0]);
        }
    }
    if (sizes.empty()) sizes = {std::size_t{1} << 20, std::size_t{4} << 20};
    std::printf("%10s %14s %20s %20s\n", "# bytes", "memcpy GB/s", "get GB/s (/memcpy)",
                "split GB/s (/memcpy)");
    for (std::size_t size : sizes) {
        Row r{};
        if (!measure(size, iterations, r)) return 1;
        std::printf("%10zu %14.1f %13.1f (%.2f) %13.1f (%.2f)\n", size, r.memcpy_gbs, r.get_gbs,
                    r.get_gbs / r.memcpy_gbs, r.split_gbs, r.split_gbs / r.memcpy_gbs);
    }
    return 0;
}
