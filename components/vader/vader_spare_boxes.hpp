// The spare fast boxes of a segment (btl_vader_dynamic_fast_boxes): a peer
// outside the job on this node is given one at its join to write its messages
// into, as a local peer writes into its own box.
//
// A box goes back to the pool only when its writer can no longer write into
// it: at once when the writer left (its goodbye came) or exited; otherwise
// (we dropped a peer that still runs) it is parked until the writer says it
// let go (a release reference naming the box) or exits.  Reused while the
// old writer still wrote, the box would mix its records into the next peer's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "transit/btl/util/process_watch.hpp"

namespace transit::vader {

class SpareBoxes {
  public:
    static constexpr std::uint32_t none = ~0u;

    SpareBoxes() = default;
    explicit SpareBoxes(std::uint32_t count) : slots_(count) {}

    std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(slots_.size()); }

    // A free box's index, or none when every box is taken or parked.
    std::uint32_t take() noexcept {
        for (std::uint32_t i = 0; i < size(); ++i)
            if (slots_[i].state == State::free) {
                slots_[i].state = State::taken;
                return i;
            }
        return none;
    }

    // Its writer can no longer write into it.
    void free(std::uint32_t i) noexcept {
        if (i >= size()) return;
        if (slots_[i].state == State::parked) --parked_;
        slots_[i] = Slot{};
    }

    // Its writer (process `pid`, known here by `channel`) may still write.
    void park(std::uint32_t i, std::uint32_t channel, pid_t pid) noexcept {
        if (i >= size() || slots_[i].state != State::taken) return;
        slots_[i].state = State::parked;
        slots_[i].channel = channel;
        slots_[i].writer = btl::util::ProcessWatch(pid);
        ++parked_;
    }

    // The peer of `channel` let go of box `i`.
    void released(std::uint32_t i, std::uint32_t channel) noexcept {
        if (i < size() && slots_[i].state == State::parked && slots_[i].channel == channel) free(i);
    }

    // Parked boxes whose writer exited are free again.
    void reap_exited() noexcept {
        for (std::uint32_t i = 0; i < size() && parked_ != 0; ++i)
            if (slots_[i].state == State::parked && slots_[i].writer.exited()) free(i);
    }

    bool any_parked() const noexcept { return parked_ != 0; }

    // Boxes not free (taken or parked).
    std::uint32_t in_use() const noexcept {
        std::uint32_t n = 0;
        for (const Slot& s : slots_) n += s.state != State::free;
        return n;
    }

  private:
    enum class State : std::uint8_t { free, taken, parked };
    struct Slot {
        State state = State::free;
        std::uint32_t channel = 0;
        btl::util::ProcessWatch writer;
    };
    std::vector<Slot> slots_;
    std::uint32_t parked_ = 0;
};

}  // namespace transit::vader
