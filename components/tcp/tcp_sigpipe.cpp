#include "tcp_sigpipe.hpp"

#include <cerrno>
#include <csignal>
#include <ctime>

#include <pthread.h>

namespace transit::tcp {

namespace {

// Trivially destructible, so a thread_local costs no registration.
struct ThreadState {
    unsigned depth = 0;           // scopes open in this thread
    bool blocked = false;         // guard() ran in the current outermost scope
    bool blocked_before = false;  // the thread blocked SIGPIPE itself
    bool was_pending = false;     // a SIGPIPE not ours was pending then
    bool raised = false;          // a lent write got EPIPE
    unsigned long calls = 0;      // signal-mask system calls made
    sigset_t old;
};

thread_local ThreadState state;

sigset_t sigpipe_set() noexcept {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    return s;
}

}  // namespace

SigpipeScope::SigpipeScope() noexcept {
    ++state.depth;
}

SigpipeScope::~SigpipeScope() {
    ThreadState& s = state;
    if (--s.depth > 0 || !s.blocked) return;
    const int saved = errno;
    const sigset_t pipe = sigpipe_set();
    if (s.raised && !s.was_pending) {
        const timespec now{};
        ::sigtimedwait(&pipe, nullptr, &now);
    }
    if (!s.blocked_before) {
        ::pthread_sigmask(SIG_SETMASK, &s.old, nullptr);
        ++s.calls;
    }
    s.blocked = s.raised = s.was_pending = s.blocked_before = false;
    errno = saved;
}

void SigpipeScope::guard() noexcept {
    ThreadState& s = state;
    if (s.blocked) return;
    const sigset_t pipe = sigpipe_set();
    ::pthread_sigmask(SIG_BLOCK, &pipe, &s.old);
    ++s.calls;
    s.blocked = true;
    s.blocked_before = sigismember(&s.old, SIGPIPE) == 1;
    if (s.blocked_before) {
        // Only a blocked signal can be pending in this thread's view; one
        // pending before is not ours to take back.
        sigset_t pending;
        sigemptyset(&pending);
        ::sigpending(&pending);
        ++s.calls;
        s.was_pending = sigismember(&pending, SIGPIPE) == 1;
    }
}

void SigpipeScope::raised() noexcept {
    state.raised = true;
}

unsigned long SigpipeScope::mask_calls() noexcept {
    return state.calls;
}

}  // namespace transit::tcp
