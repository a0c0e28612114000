// The answering side of a path measurement's bulk probe (path_measure.hpp)
// over a module that offers get: the probe names a region of the prober's,
// exposed for reading; this side reads it with the module's own gets, in the
// pieces a large message's transfer uses, into a scratch buffer, and answers
// once all have arrived.  So the prober times what its large messages would
// cost over that module: a rendezvous's get, native or served by the target.
//
// Owns the scratch buffer (allocated at the first probe, released with its
// registrations by release(): when this process has measured its own paths,
// since its peers measure theirs at the same time, and at the end) and
// borrows the outbox for the answers.
// Every byte of a probe is checked: it comes from a job rank, over a module
// that reaches it, names at most `max_length` bytes and a handle of the
// module's size; anything else is refused (counted, logged at a bounded rate)
// and answered as refused, so the prober does not wait.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "pml/core.hpp"
#include "pml/headers.hpp"
#include "transit/btl/module.hpp"

namespace transit::pml {

class Outbox;

class FetchProbes {
  public:
    // The most one probe reads, and the largest piece of it read by one get.
    static constexpr std::size_t max_length = 1 << 20;
    // Probes served at once: a measuring peer has one in flight, so more
    // means a rank that does not answer our gets and keeps asking; those
    // beyond are refused (counted) rather than kept without bound.
    static constexpr std::size_t max_in_flight = 64;

    FetchProbes(Core& core, Outbox& outbox) noexcept : c_(core), outbox_(outbox) {}
    FetchProbes(const FetchProbes&) = delete;
    FetchProbes& operator=(const FetchProbes&) = delete;

    // A probe (the whole ping) from `from`, a job rank, that came by
    // `arrived`: its token comes back in the answer (with
    // wire::probe_refused when it was not served).
    void serve(Rank from, btl::Module* arrived, std::span<const std::byte> msg) noexcept;
    // Registrations and the scratch buffer go, unless a get is still in
    // flight (before the transports do; a later probe makes them again).
    void release() noexcept;
    // No more probes are served or answered (the context shuts down); what
    // can be released is.
    void stop() noexcept;

  private:
    struct Fetch {
        Rank peer = any_rank;
        btl::Module* module = nullptr;
        btl::Endpoint* endpoint = nullptr;
        std::uint32_t token = 0;
        std::size_t pending = 0;
        bool failed = false;
        // The prober's handle, aligned for the module to read.
        alignas(std::max_align_t) std::byte handle[btl::max_registration_handle_size];
        FetchProbes* owner = nullptr;
    };
    struct Scratch {
        btl::Module* module;
        btl::RegistrationHandle* handle;
    };

    bool start(Fetch& f, const wire::FetchProbeHdr& probe, btl::Rdma& rdma) noexcept;
    btl::RegistrationHandle* scratch_handle(btl::Module* m, btl::Rdma& rdma) noexcept;
    static void fetched(btl::Module* module, btl::Endpoint* endpoint, void* local,
                        btl::RegistrationHandle* handle, void* context, void* cbdata,
                        Status status) noexcept;
    void answer(Fetch& f) noexcept;
    void answer(Rank peer, btl::Module* m, std::uint32_t token) noexcept;

    Core& c_;
    Outbox& outbox_;
    std::unique_ptr<std::byte[]> scratch_;
    std::vector<Scratch> registered_;
    std::vector<std::unique_ptr<Fetch>> fetches_;
    bool stopped_ = false;
};

}  // namespace transit::pml
