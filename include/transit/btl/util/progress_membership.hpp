// A component's callback in the progress engine only while it has work: an
// idle transport then costs the others' progress nothing.  A component calls
// keep_registered whenever what it waits for changes (a peer added or gone, an
// operation posted or completed), with `wanted` saying whether it has work now.
//
//   void Module::update_progress() noexcept {
//       if (!btl::util::keep_registered(progress_, handle_, peers_ > 0, &Module::poll_cb, this))
//           report_error(btl::error_flags::fatal, any_rank, "cannot join the progress engine");
//   }
#pragma once

#include "transit/progress.hpp"

namespace transit::btl::util {

// Joins `engine` with fn(context) when `wanted` and `handle` is empty, leaves
// it when not wanted and `handle` holds a registration; otherwise does nothing,
// so calling it on every change costs a test or two.  Returns false only when
// joining failed (the engine could not grow its list): `handle` stays empty and
// the next call tries again.  Never throws, so a noexcept path may call it.
inline bool keep_registered(ProgressEngine& engine, ProgressEngine::Handle& handle, bool wanted,
                            ProgressFn fn, void* context,
                            ProgressPriority priority = ProgressPriority::normal) noexcept {
    if (wanted && !handle) {
        try {
            handle = engine.add(fn, context, priority);
        } catch (...) {
            return false;
        }
    } else if (!wanted && handle) {
        engine.remove(handle);  // only marks the entry: nothing in it can throw
        handle = {};
    }
    return true;
}

}  // namespace transit::btl::util
