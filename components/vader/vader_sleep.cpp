#include "components/vader/vader_sleep.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "components/vader/vader_module.hpp"

namespace transit::vader {

void VaderSleep::open() noexcept {
    if (!bell_.open(static_cast<std::uint32_t>(::getpid()), random64()))
        out_.verbose(1, "no doorbell ({}): waits poll instead of sleeping", std::strerror(errno));
    else if (!waits_.open(bell_.fd()))
        out_.verbose(1,
                     "no epoll set ({}): a sleep ends at a local peer's death only by its "
                     "time limit",
                     std::strerror(errno));
}

void VaderSleep::ring_slow(SegmentHeader& peer) noexcept {
    std::uint32_t expected = asleep;
    // One ring per sleep: the first sender to see it asleep rings.
    if (peer.sleeping.compare_exchange_strong(expected, rung, std::memory_order_acq_rel)) {
        char name[bell_name_size];
        std::memcpy(name, peer.bell, bell_name_size);
        name[bell_name_size - 1] = '\0';  // the peer's bytes: bounded whatever they hold
        // and never a socket of another program's
        if (std::strncmp(name, Doorbell::prefix, std::strlen(Doorbell::prefix)) == 0)
            bell_.ring(name);
    }
}

btl::WaitObject::Armed VaderSleep::arm() noexcept {
    if (header_ == nullptr) return Armed::armed;  // no segment: nobody can send to us
    header_->sleeping.store(asleep, std::memory_order_seq_cst);
    if (!sleep_barrier()) [[unlikely]] {
        header_->sleeping.store(awake, std::memory_order_relaxed);
        return Armed::cannot;
    }
    // A sender that published before the barrier is seen here; one after it
    // sees `asleep` and rings.
    if (module_.has_work()) {
        header_->sleeping.store(awake, std::memory_order_relaxed);
        return Armed::busy;
    }
    return Armed::armed;
}

// The membarrier that makes a sleep safe costs the sleeper an interrupt on
// every CPU that runs a vader process: about 2 µs on an idle machine, 48 µs
// on a VM whose other vCPU busy-polls, paid before every sleep of a server
// that sleeps between requests.  The first sleep after a ring skips it: our
// own fence is taken and the timer ends the sleep after light_sleep µs, so a
// message whose publication raced our store of `asleep` (the sender read
// `awake`, we read its box before its store drained) waits that long at
// worst.  A light sleep that ran out makes the next one a full one: an idle
// process sleeps without timers.
bool VaderSleep::sleep_barrier() noexcept {
    if (light_next_ && waits_.arm_timer(config_.light_sleep)) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        return true;
    }
    return Doorbell::receiver_barrier();
}

void VaderSleep::disarm() noexcept {
    if (header_ == nullptr) return;
    // Rung: a peer woke us, the common case of a server between requests; two
    // system calls fewer than asking the wait set.  A timer or a peer's exit
    // that came with the ring keeps the wait set readable and ends the next
    // sleep at once, which asks it.
    if (header_->sleeping.exchange(awake, std::memory_order_relaxed) == rung) {
        bell_.take_ring();
        light_next_ = true;
        return;
    }
    if (bell_.drain()) light_next_ = true;
    const WaitSet::Fired fired = waits_.fired();
    if (fired.timer) light_next_ = false;
    if (fired.exit) [[unlikely]]
        pass_.exit_seen = true;
}

}  // namespace transit::vader
