// The goodbyes of a uct module (see uct_farewells.hpp).
#include "uct_farewells.hpp"

#include "uct_module.hpp"
#include "uct_send_queue.hpp"

namespace transit::uct {

// Tells the peer we are leaving: one header-only message, pushed out with a
// bounded wait (a peer that no longer listens must not hold up finalize).
void UctFarewells::say_goodbye(UctEndpoint& e) noexcept {
    // A peer that said goodbye itself may be gone already: nothing to tell.
    if (e.failed || e.goodbye || e.ep == nullptr || !module_.uct().is_open()) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    // What waits for the peer's FIFO goes first.
    while (!e.queued.empty() && !e.failed && !send_queue_.send_queued(e) &&
           std::chrono::steady_clock::now() < deadline)
        module_.uct().progress();
    // A peer outside the job is never added again (ids are not reused).
    Farewells none;
    Farewells& f = e.dynamic ? none : farewells_[e.peer()];
    ucs_status_t s = send_header(
        e, UctModule::wire(Kind::goodbye, static_cast<btl::Tag>(f.said + 1), &e), deadline);
    if (s != UCS_OK) return;
    ++f.said;
    f.owe_hello = true;
    while ((s = uct_ep_flush(e.ep, UCT_FLUSH_FLAG_LOCAL, nullptr)) != UCS_OK &&
           (s == UCS_INPROGRESS || s == UCS_ERR_NO_RESOURCE) &&
           std::chrono::steady_clock::now() < deadline)
        module_.uct().progress();
}

// A header-only message (goodbye, hello), retried while UCT has no room until
// `deadline`: these are sent from add_procs/del_procs, never on a hot path.
ucs_status_t UctFarewells::send_header(UctEndpoint& e, const WireHeader& h,
                                       std::chrono::steady_clock::time_point deadline) noexcept {
    const std::uint64_t word = wire_word(h);
    ucs_status_t s;
    while ((s = uct_ep_am_short(e.ep, am_id, word, nullptr, 0)) == UCS_ERR_NO_RESOURCE &&
           std::chrono::steady_clock::now() < deadline)
        module_.uct().progress();
    return s;
}

// Tells a peer we said goodbye to that we added it again: its endpoint for
// us takes the goodbye back, so our exit from now on is a loss again.  Sent
// before anything else on the new endpoint; a bounded wait, as a goodbye's.
void UctFarewells::say_hello(UctEndpoint& e) noexcept {
    Farewells& f = farewells_[e.peer()];
    if (e.failed || e.ep == nullptr || !module_.uct().is_open()) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    const ucs_status_t s =
        send_header(e, UctModule::wire(Kind::hello, static_cast<btl::Tag>(f.said), &e), deadline);
    if (s == UCS_OK)
        f.owe_hello = false;
    else
        out_.verbose(1, "{}: could not tell rank {} it was added again: {}", module_.name(),
                     e.peer(), ucs_status_string(s));
}

}  // namespace transit::uct
