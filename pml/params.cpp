// The pml's parameters.
#include "pml/params.hpp"

#include <cstdint>
#include <string_view>

#include "transit/params_bind.hpp"

namespace transit::pml {

namespace {

// A whole number of something (microseconds, milliseconds, polls) from lo to
// hi: most of the pml's parameters.
constexpr params::Decl count(std::string_view name, std::string_view default_value, std::int64_t lo,
                             std::int64_t hi, std::string_view help, int level) {
    const params::Decl d{name, params::Type::unsigned_integer, default_value, help, level};
    return d.range(lo, hi);
}

constexpr params::Field<Settings> pml_params[] = {
    params::to<&Settings::unexpected_limit>(
        {"unexpected_limit", params::Type::size, "64M",
         "Memory for buffered unexpected messages; past it, senders are throttled to rendezvous "
         "(header only) until receives catch up. Nothing is ever dropped",
         4}),
    params::to<&Settings::wait_spin_count>(
        {"wait_spin_count", params::Type::unsigned_integer, "20000",
         "Most idle progress polls in wait before it naps between polls (see wait_spin_time; "
         "at the default, the time decides where a poll is cheap, as over shared memory)",
         4}),
    params::to<&Settings::wait_spin_time>(
        count("wait_spin_time", "50", 0, 10000000,
              "Microseconds wait polls with nothing happening, counted from the 64th such poll, "
              "before it naps between polls (or after wait_spin_count polls, whichever comes "
              "first)",
              5)),
    params::to<&Settings::wait_nap>(
        count("wait_nap", "20", 0, 100000,
              "Microseconds a wait sleeps between idle polls once it stopped spinning. A sleeping "
              "rank gets the processor back soon after, where a spinning one waits its turn among "
              "the busy processes of a loaded node. 0: yield the processor instead of sleeping",
              5)),
    params::to<&Settings::wait_policy>(
        {"wait_policy", params::Type::enumeration, "block",
         "What a wait does once it has spun wait_spin_time with nothing to do: spin (keep polling: "
         "the lowest latency, a core per waiting process), nap (poll every wait_nap microseconds) "
         "or block (sleep in the kernel until a transport has work; used when every selected "
         "transport can wake a sleeper, see transit_info, and the program is single-threaded "
         "without the progress thread; nap otherwise)",
         4, "spin,nap,block"}),
    params::to<&Settings::wait_block_interval>(count(
        "wait_block_interval", "100", 1, 3600000,
        "Longest sleep of a blocked wait, in milliseconds, before it polls anyway: the checks that "
        "have no descriptor (the launcher's reports, connection deadlines) run at least this often",
        6)),
    params::to<&Settings::progress_thread>({"progress_thread", params::Type::boolean, "false",
                                            "Run a progress thread that drives transfers while the "
                                            "program computes; every API call then takes a lock",
                                            6}),
    params::to<&Settings::thread_level>(
        {"thread_level", params::Type::enumeration, "single",
         "How the program's threads may call the API when it does not say at init: single, "
         "funneled (only the thread that called init), serialized (one at a time) or multiple (any "
         "thread at any time; each call then takes the pml's lock)",
         4, "single,funneled,serialized,multiple"}),
    params::to<&Settings::verbose>(params::Decl{"verbose", params::Type::integer, "0",
                                                "Verbosity of the pml (protocol decisions)", 5}
                                       .range(0, 100)),
    params::to<&Settings::rndv_split_min>(
        {"rndv_split_min", params::Type::size, "128k",
         "Smallest rendezvous message split between the two processes: over a transport with both "
         "put and get, the receiver gets the first half while the sender puts the second, so both "
         "copy at once (shared memory and CMA copy on the CPU). Below 128 KiB the second copy's "
         "control messages and system call cost more than they save. 0: the receiver moves it all",
         5}),
    params::to<&Settings::launcher_grace>(
        count("launcher_grace", "1000", 0, 600000,
              "Milliseconds between the launcher's report that a rank's process ended and failing "
              "that peer here, so a transport that holds operations with it reports the loss "
              "first, in its own order. A peer no transport knows of is failed only after it",
              6)),
    params::to<&Settings::max_requests>(
        params::Decl{"max_requests", params::Type::unsigned_integer, "0",
                     "Most requests, the user's and the pml's own, that may exist at once; past it "
                     "a new send or receive returns out_of_resource and a large incoming active "
                     "message is declined (its counters count it lost). 0: no limit",
                     6}),
    params::to<&Settings::control_refusal_grace>(
        count("control_refusal_grace", "2000", 0, 600000,
              "Milliseconds a peer's transport may refuse our control messages (acks, fins, "
              "one-sided replies) for good, with none going through, before that peer is failed "
              "here. A transport that lost the peer normally reports it sooner",
              6)),
    params::to<&Settings::disconnect_linger>(
        count("disconnect_linger", "5000", 0, 600000,
              "Milliseconds a graceful disconnect (and the context's end, for each peer outside "
              "the job) waits for the peer to confirm it has everything sent to it before; past "
              "it, disconnect returns timeout and the sends still pending end peer_departed. Also "
              "how long a peer that confirmed keeps the transport open for the other side to close "
              "first. 0: every disconnect is abortive",
              5)),
    params::to<&Settings::keepalive_period>(
        count("keepalive_period", "250", 0, 3600000,
              "Milliseconds a rank of the job with which this process has work outstanding (a "
              "receive posted for it, a send, rendezvous or one-sided operation to it, a barrier "
              "round) may send nothing before it is probed. No probe goes to a peer that sends "
              "anything, nor to one with nothing outstanding. 0: no keep-alive",
              5)),
    params::to<&Settings::keepalive_timeout>(
        count("keepalive_timeout", "2000", 0, 3600000,
              "Milliseconds a probed peer has to answer (any message does) before it is failed "
              "like a lost peer: its requests end peer_failed. A peer answers from its progress, "
              "so a rank that computes without calling Transit for longer than keepalive_period + "
              "keepalive_timeout while another waits on it is taken for dead (raise both, or use "
              "pml_base_progress_thread). 0: no keep-alive",
              5)),
    params::to<&Settings::keepalive_all>(
        {"keepalive_all", params::Type::boolean, "false",
         "Probe every rank with outstanding work, also those reached over a transport that reports "
         "a dead peer itself (self, vader, tcp, UCT's tcp and shared memory): such transports do "
         "not see a process that stops without dying, or a node that hangs",
         6}),
};

}  // namespace

void register_params() {
    params::add_all(params::registry(), "pml", "base", pml_params);
}

Settings bound_settings() {
    Settings s;
    params::bind(params::registry(), "pml", "base", pml_params, s);
    return s;
}

}  // namespace transit::pml
