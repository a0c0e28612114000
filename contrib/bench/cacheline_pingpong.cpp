// The machine's floor for a shared-memory ping-pong: two processes, each
// bound to its own CPU, bounce a counter through two cache lines of a shared
// mapping.  Nothing a messaging layer does can beat this half round trip, so
// it tells which mode a noisy virtual machine is in when a benchmark runs.
//
//   cacheline_pingpong [round trips] [cpu A] [cpu B]     (default 1000000 0 1)
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "contrib/bench/bind_to.hpp"

namespace {

struct alignas(64) Flag {
    std::atomic<std::uint64_t> value{0};
};

class SharedFlags {
  public:
    SharedFlags() {
        void* p = mmap(nullptr, sizeof(Flag) * 2, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            std::perror("mmap");
            std::exit(1);
        }
        flags_ = new (p) Flag[2];
    }
    ~SharedFlags() { munmap(flags_, sizeof(Flag) * 2); }
    SharedFlags(const SharedFlags&) = delete;
    SharedFlags& operator=(const SharedFlags&) = delete;
    Flag& ping() { return flags_[0]; }
    Flag& pong() { return flags_[1]; }

  private:
    Flag* flags_ = nullptr;
};

void wait_for(const Flag& f, std::uint64_t v) {
    while (f.value.load(std::memory_order_acquire) != v) {
    }
}

}  // namespace

int main(int argc, char** argv) {
    const long trips = argc > 1 ? std::atol(argv[1]) : 1000000;
    const int cpu_a = argc > 2 ? std::atoi(argv[2]) : 0;
    const int cpu_b = argc > 3 ? std::atoi(argv[3]) : 1;
    if (trips <= 0) {
        std::fprintf(stderr, "usage: %s [round trips > 0] [cpu A] [cpu B]\n", argv[0]);
        return 2;
    }
    SharedFlags flags;
    const pid_t child = fork();
    if (child < 0) {
        std::perror("fork");
        return 1;
    }
    if (child == 0) {
        bind_to(cpu_b);
        for (long i = 1; i <= trips; ++i) {
            wait_for(flags.ping(), static_cast<std::uint64_t>(i));
            flags.pong().value.store(static_cast<std::uint64_t>(i), std::memory_order_release);
        }
        _exit(0);
    }
    bind_to(cpu_a);
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 1; i <= trips; ++i) {
        flags.ping().value.store(static_cast<std::uint64_t>(i), std::memory_order_release);
        wait_for(flags.pong(), static_cast<std::uint64_t>(i));
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - t0;
    waitpid(child, nullptr, 0);
    std::printf("cache-line half round trip: %.3f us (cpu %d <-> cpu %d)\n",
                took.count() / static_cast<double>(trips) / 2, cpu_a, cpu_b);
    return 0;
}
