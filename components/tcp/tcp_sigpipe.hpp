// SIGPIPE around splice(2): splicing into a socket whose peer is gone raises
// SIGPIPE (splice has no MSG_NOSIGNAL), which by default ends the process.  So
// SIGPIPE is blocked in the calling thread while payloads are lent, and one
// a lent write raised is taken back: the caller sees EPIPE, as from sendmsg.
//
// Blocking costs two system calls (block; restore, or look at what was
// pending when the thread blocks SIGPIPE itself).  They are paid once per
// scope, not per write: a SigpipeScope covers one progress pass (every
// payload lent to every socket in it) or one operation started by the user,
// and the signal is blocked only from the first lent write of the scope to
// its end; a scope in which nothing is lent costs nothing.
#pragma once

namespace transit::tcp {

// Scopes nest (a write inside a progress pass): only the outermost one
// restores the thread's mask.  The state is per thread, as the mask is.
class SigpipeScope {
  public:
    SigpipeScope() noexcept;
    ~SigpipeScope();
    SigpipeScope(const SigpipeScope&) = delete;
    SigpipeScope& operator=(const SigpipeScope&) = delete;

    // Before a splice: blocks SIGPIPE in this thread until the outermost
    // scope ends (nothing when it is blocked already in this scope).
    static void guard() noexcept;
    // A lent write failed with EPIPE: the SIGPIPE it raised is taken back
    // when the outermost scope ends.
    static void raised() noexcept;
    // Mask changes made in this thread so far (for tests: what a pass costs).
    static unsigned long mask_calls() noexcept;
};

}  // namespace transit::tcp
