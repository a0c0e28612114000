// The pml's settings: what its parameters decided.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "transit/transit.hpp"

namespace transit::pml {

// How a wait passes the time once its spin (wait_spin_time) found nothing:
// spin on (busy polling), nap between polls, or sleep in the kernel until a
// transport has work (SleepSet; napping when a transport cannot wake it).
enum class WaitPolicy : std::uint8_t { spin, nap, block };

// The pml's parameters (pml_base_*), bound from the table in params.cpp,
// which holds the defaults users get; the initializers here serve the unit
// tests that build a Core without the registry.
struct Settings {
    ThreadLevel thread_level = ThreadLevel::single;
    std::size_t unexpected_limit = 64u << 20;
    std::uint64_t wait_spin_count = 20000;
    std::chrono::microseconds wait_spin_time{50};
    std::chrono::microseconds wait_nap{20};
    WaitPolicy wait_policy = WaitPolicy::block;
    std::chrono::milliseconds wait_block_interval{100};
    bool progress_thread = false;
    std::size_t rndv_split_min = 128u << 10;
    std::chrono::milliseconds launcher_grace{1000};
    std::chrono::milliseconds control_refusal_grace{2000};
    std::chrono::milliseconds disconnect_linger{5000};
    std::uint64_t max_requests = 0;  // 0: no bound
    // The keep-alive (keepalive.hpp): a peer with outstanding work that sent
    // nothing for keepalive_period is probed, and failed when it answers
    // nothing within keepalive_timeout.  Either 0: off.
    std::chrono::milliseconds keepalive_period{250};
    std::chrono::milliseconds keepalive_timeout{2000};
    // Also peers whose transports report a death themselves (a process that
    // stops without dying, a node that hangs: they see neither).
    bool keepalive_all = false;
    bool keepalive() const noexcept {
        return keepalive_period.count() > 0 && keepalive_timeout.count() > 0;
    }
    int verbose = 0;
};

}  // namespace transit::pml
