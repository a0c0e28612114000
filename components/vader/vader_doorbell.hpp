// The doorbell of a receiver that sleeps in the kernel (btl::WaitObject).
//
// Each process owns a datagram socket in the abstract unix namespace, named in
// its segment header; a sender that finds the owner asleep sends it one byte,
// which makes the socket readable and the owner's epoll_wait return.  A socket
// rather than an eventfd because a sender can reach it by name: no descriptor
// has to travel between the processes.
//
// The handshake is a Dekker pair.  The receiver stores `sleeping`, then
// re-reads its FIFO and fast boxes before it sleeps; a sender publishes its
// message, then reads `sleeping`.  Both sides need a full barrier between
// their store and their load.  The sender's is free: the receiver issues
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), which runs a barrier on every
// CPU running a process registered for it, so a registered sender needs only
// a compiler barrier on its hot path.  A process that could not register
// fences on each send instead (sender_fences()).  A light sleep skips the
// membarrier and is bounded by a timer instead (VaderSleep::arm).
#pragma once

#include <linux/membarrier.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace transit::vader {

// Values of SegmentHeader::sleeping.
inline constexpr std::uint32_t awake = 0;
inline constexpr std::uint32_t asleep = 1;  // armed: the next sender rings
inline constexpr std::uint32_t rung = 2;    // a sender rang: the others need not

inline constexpr std::size_t bell_name_size = 48;

class Doorbell {
  public:
    static constexpr const char* prefix = "transit-vader-bell-";

    Doorbell() = default;
    Doorbell(const Doorbell&) = delete;
    Doorbell& operator=(const Doorbell&) = delete;
    ~Doorbell() {
        if (fd_ >= 0) ::close(fd_);
    }

    // Binds the socket under a name unique to this process (pid and random
    // bits).  False when the system refuses: the module then cannot block.
    bool open(std::uint32_t pid, std::uint64_t nonce) noexcept {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd_ < 0) return false;
        std::snprintf(name_, sizeof name_, "%s%u-%016llx", prefix, pid,
                      static_cast<unsigned long long>(nonce));
        sockaddr_un a{};
        const socklen_t len = address(name_, a);
        if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
            ::close(fd_);
            fd_ = -1;
            return false;
        }
        return true;
    }
    int fd() const noexcept { return fd_; }
    const char* name() const noexcept { return name_; }

    // Consumes one ring: a sleeper woken by its bell (one ring per sleep).  A
    // ring still on its way is left to the next sleep, which it ends at once.
    void take_ring() const noexcept {
        char buf[8];
        (void)::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    }
    // Consumes every ring (a sleeper that woke for another reason); true when
    // there was one.
    bool drain() const noexcept {
        char buf[64];
        bool rung = false;
        while (::recv(fd_, buf, sizeof buf, MSG_DONTWAIT) > 0) rung = true;
        return rung;
    }

    // Rings the bell named `name` (a peer's), from this process's socket.  A
    // full queue is a bell already ringing: nothing more to do.
    void ring(const char* name) const noexcept {
        sockaddr_un a{};
        const socklen_t len = address(name, a);
        const char one = 1;
        (void)::sendto(fd_, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                       reinterpret_cast<const sockaddr*>(&a), len);
    }

    // Registers this process for the receivers' barrier; true when senders
    // here must fence themselves instead.  Asked once per process.
    static bool sender_fences() noexcept {
        static const bool fences =
            ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) != 0;
        return fences;
    }
    // The receiver's barrier between storing `sleeping` and looking for work
    // again.  False when the system refuses it: the receiver must not sleep.
    static bool receiver_barrier() noexcept {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return ::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
    }

  private:
    static socklen_t address(const char* name, sockaddr_un& a) noexcept {
        a.sun_family = AF_UNIX;
        a.sun_path[0] = '\0';  // abstract: no file, gone with the socket
        const std::size_t n = ::strnlen(name, bell_name_size - 1);
        std::memcpy(a.sun_path + 1, name, n);
        return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
    }

    int fd_ = -1;
    char name_[bell_name_size] = {};
};

}  // namespace transit::vader
