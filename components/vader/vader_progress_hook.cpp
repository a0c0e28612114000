#include "components/vader/vader_progress_hook.hpp"

#include "components/vader/vader_module.hpp"
#include "components/vader/vader_outside.hpp"
#include "components/vader/vader_peer_watch.hpp"

namespace transit::vader {

// The engine's argument is the module itself: a pass costs no more than a
// callback of the module's own.
int VaderProgressHook::progress_cb(void* module) noexcept {
    return static_cast<VaderModule*>(module)->progress();
}

void VaderProgressHook::start() {
    if (!handle_) handle_ = engine_.add(&progress_cb, &module_);
    peer_watch_.start();
}

void VaderProgressHook::stop() {
    if (handle_) engine_.remove(handle_);
    handle_ = {};
    peer_watch_.stop();
}

// No peer to poll for: progress stops (a process alone on its node costs
// nothing between its clients).  Parked fast boxes wait for their release.
void VaderProgressHook::stop_if_idle() noexcept {
    if (active_.empty() && outside_.idle()) stop();
}

void VaderProgressHook::flush_round() {
    engine_.progress();
    if (!handle_) module_.progress();
    // A peer that died must not make flush hang.
    peer_watch_.hurry();
    peer_watch_.check();
}

}  // namespace transit::vader
