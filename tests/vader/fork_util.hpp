// Helpers for tests that share a real mapping between fork()ed processes.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <exception>

namespace transit::vader::test {

// An anonymous shared mapping inherited by children.
class SharedArea {
  public:
    explicit SharedArea(std::size_t size)
        : size_(size),
          base_(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) {
        if (base_ == MAP_FAILED) std::abort();
    }
    ~SharedArea() { ::munmap(base_, size_); }
    SharedArea(const SharedArea&) = delete;
    SharedArea& operator=(const SharedArea&) = delete;
    void* get() const noexcept { return base_; }

  private:
    std::size_t size_;
    void* base_;
};

// Runs fn() in a child; the child exits 0 when fn returns true.  Returns the pid.
template <typename Fn>
pid_t spawn(Fn&& fn) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        int rc = 1;
        try {
            rc = fn() ? 0 : 1;
        } catch (...) {
            rc = 2;
        }
        ::_exit(rc);
    }
    return pid;
}

// The child's exit code, or 128+signal.
inline int join(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

}  // namespace transit::vader::test
