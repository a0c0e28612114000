// The progress engine: every component with work in flight registers a callback;
// progress() runs them.  A component with nothing to do unregisters, so an idle
// transport costs the others nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace transit {

// Returns the number of events it completed.  Must not throw, allocate or block.
using ProgressFn = int (*)(void* context) noexcept;

enum class ProgressPriority { normal, low };

class ProgressEngine {
  public:
    struct Handle {
        std::uint32_t id = 0;
        explicit operator bool() const noexcept { return id != 0; }
    };

    // Low-priority callbacks run on every `low_priority_interval`-th call only.
    Handle add(ProgressFn fn, void* context, ProgressPriority priority = ProgressPriority::normal);
    // Safe to call from inside a callback.
    void remove(Handle h);

    // Runs every normal callback once (and the low ones every Nth call).
    int progress() noexcept {
        int events = 0;
        // Indexes, not iterators: a callback may add another callback.
        for (std::size_t i = 0; i < normal_.size(); ++i)
            events += normal_[i].fn(normal_[i].context);
        if (!low_.empty() && ++calls_ >= low_priority_interval_) {
            calls_ = 0;
            for (std::size_t i = 0; i < low_.size(); ++i) events += low_[i].fn(low_[i].context);
        }
        if (dirty_) compact();
        return events;
    }

    void set_low_priority_interval(std::uint32_t n) { low_priority_interval_ = n ? n : 1; }
    // The next progress() runs the low-priority callbacks too.  For a caller
    // back from a nap or a sleep: its passes may come milliseconds apart (a
    // loaded node, one pass per wake-up), and the checks paced by the clock
    // (a local peer's exit, the launcher's reports, the keep-alive) would then
    // come every 8th of them only, seconds late.
    void low_next() noexcept { calls_ = low_priority_interval_ - 1; }
    std::size_t size() const noexcept { return normal_.size() + low_.size(); }

  private:
    struct Entry {
        ProgressFn fn;
        void* context;
        std::uint32_t id;
    };
    static int idle(void*) noexcept { return 0; }
    void compact() noexcept;

    std::vector<Entry> normal_;
    std::vector<Entry> low_;
    std::uint32_t calls_ = 0;
    std::uint32_t low_priority_interval_ = 8;
    std::uint32_t next_id_ = 1;
    bool dirty_ = false;
};

// The process-wide engine.
ProgressEngine& progress_engine();

}  // namespace transit
