// Signal dispositions across a library load (internal to libtransit).
#pragma once

#include <array>
#include <csignal>

namespace transit::mca {

// A plugin's dependencies run their constructors inside dlopen, and some
// network libraries install handlers there (libpsm's call exit() on SIGTERM,
// which turns a launcher's orderly kill into a teardown from inside the handler).
// Signal dispositions belong to the application: whatever a load changed, the
// guard puts back.
class SignalDispositionGuard {
  public:
    SignalDispositionGuard() {
        for (int s = 1; s < NSIG; ++s)
            saved_[s].valid = ::sigaction(s, nullptr, &saved_[s].action) == 0;
    }
    ~SignalDispositionGuard() {
        for (int s = 1; s < NSIG; ++s) {
            if (!saved_[s].valid) continue;
            struct sigaction now {};
            if (::sigaction(s, nullptr, &now) != 0) continue;
            if (now.sa_handler != saved_[s].action.sa_handler ||
                now.sa_flags != saved_[s].action.sa_flags)
                ::sigaction(s, &saved_[s].action, nullptr);
        }
    }
    SignalDispositionGuard(const SignalDispositionGuard&) = delete;
    SignalDispositionGuard& operator=(const SignalDispositionGuard&) = delete;

  private:
    struct Saved {
        struct sigaction action {};
        bool valid = false;
    };
    std::array<Saved, NSIG> saved_{};
};

}  // namespace transit::mca
