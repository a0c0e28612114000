// The receive FIFO: a bounded lock-free multi-producer single-consumer queue of
// 64-bit fragment references, living in the receiver's shared segment.
//
// Every slot carries a sequence number (Vyukov's bounded queue): a producer
// claims a position with one CAS on the tail, writes the value and publishes
// it by storing the sequence; the single consumer needs no atomic RMW at all.
// Being bounded, a full queue is reported to the sender (out_of_resource)
// instead of growing or blocking.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

namespace transit::vader {

inline constexpr std::size_t cache_line = 64;

class Fifo {
  public:
    // Shared-memory bytes needed for `capacity` slots (a power of two).
    static constexpr std::size_t bytes(std::uint32_t capacity) noexcept {
        return sizeof(Control) + std::size_t{capacity} * sizeof(Slot);
    }

    Fifo() = default;

    // Formats a zeroed area (done once, by the owner of the segment).
    static Fifo create(void* memory, std::uint32_t capacity) noexcept {
        auto* control = new (memory) Control{};
        control->capacity = capacity;
        Slot* slots = slots_of(memory);
        for (std::uint32_t i = 0; i < capacity; ++i) {
            new (&slots[i]) Slot{};
            slots[i].seq.store(i, std::memory_order_relaxed);
        }
        std::atomic_thread_fence(std::memory_order_release);
        return Fifo(memory);
    }
    // A view of a FIFO formatted by another process.
    static Fifo attach(void* memory) noexcept { return Fifo(memory); }

    std::uint32_t capacity() const noexcept { return mask_ + 1; }
    // The capacity a FIFO formatted at `memory` gives itself (what attach() uses).
    static std::uint32_t capacity_at(const void* memory) noexcept {
        return static_cast<const Control*>(memory)->capacity;
    }

    // Producer side (any process).  False when full.
    bool push(std::uint64_t value) noexcept {
        std::uint64_t pos = control_->tail.load(std::memory_order_relaxed);
        for (;;) {
            Slot& s = slots_[pos & mask_];
            const std::uint64_t seq = s.seq.load(std::memory_order_acquire);
            const auto diff = static_cast<std::int64_t>(seq - pos);
            if (diff == 0) {
                if (control_->tail.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
                    s.value.store(value, std::memory_order_relaxed);
                    s.seq.store(pos + 1, std::memory_order_release);
                    return true;
                }
            } else if (diff < 0) {
                return false;
            } else {
                // Another producer took `pos`, so the tail has moved past it;
                // a tail that has not is a corrupt queue: full, not a spin.
                const std::uint64_t now = control_->tail.load(std::memory_order_relaxed);
                if (now == pos) [[unlikely]]
                    return false;
                pos = now;
            }
        }
    }

    // Consumer side (the owner only; `head` is the consumer's private cursor).
    bool pop(std::uint64_t& head, std::uint64_t& value) noexcept {
        Slot& s = slots_[head & mask_];
        if (s.seq.load(std::memory_order_acquire) != head + 1) return false;
        value = s.value.load(std::memory_order_relaxed);
        s.seq.store(head + mask_ + 1, std::memory_order_release);
        ++head;
        return true;
    }

    bool empty_at(std::uint64_t head) const noexcept {
        return slots_[head & mask_].seq.load(std::memory_order_acquire) != head + 1;
    }

  private:
    struct alignas(cache_line) Control {
        std::atomic<std::uint64_t> tail{0};
        std::uint32_t capacity = 0;
    };
    struct Slot {
        std::atomic<std::uint64_t> seq{0};
        std::atomic<std::uint64_t> value{0};
    };
    static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
                  "shared-memory atomics must be address-free");

    static Slot* slots_of(void* memory) noexcept {
        return reinterpret_cast<Slot*>(static_cast<char*>(memory) + sizeof(Control));
    }
    explicit Fifo(void* memory) noexcept
        : control_(static_cast<Control*>(memory)),
          slots_(slots_of(memory)),
          mask_(control_->capacity - 1) {}

    Control* control_ = nullptr;
    Slot* slots_ = nullptr;
    std::uint64_t mask_ = 0;
};

}  // namespace transit::vader
