// The state of a vader module's progress pass that its parts share: whether a
// pass or the exit watch's check runs, whether the next pass starts with its
// chores, and whether a sleep ended by a peer's exit.  The module owns it
// beside the fields its progress pass reads on every pass (boxes_ in
// vader_module.hpp: a pass reads it first); VaderOutside, VaderSleep and
// VaderPeerWatch borrow it.
#pragma once

namespace transit::vader {

struct VaderPass {
    // A progress pass runs: a receive callback that calls progress does not
    // re-enter the boxes (VaderModule::progress).
    bool in_progress = false;
    // The next pass starts with its chores (VaderModule::do_pass_chores): the
    // peers outside the job left endpoints to free or departures to report, or
    // the polled boxes have null entries.  One test per pass for all of them.
    bool chores = false;
    // A sleep ended by a peer's exit (VaderSleep::disarm): the next pass looks
    // at the peers at once (VaderPeerWatch::check).
    bool exit_seen = false;
    // The exit watch's check runs (VaderPeerWatch::check).
    bool in_check = false;

    // Inside a pass or a check: a caller up the stack may still hold an
    // endpoint deleted now, which is freed at the next pass.
    bool in_pass() const noexcept { return in_progress || in_check; }
};

}  // namespace transit::vader
