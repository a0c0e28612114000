// The answering side of a bulk probe over a module that offers get
// (fetch_probes.hpp).
#include "pml/fetch_probes.hpp"

#include <algorithm>
#include <cstring>

#include "bml/r2.hpp"
#include "pml/header_parts.hpp"
#include "pml/outbox.hpp"

namespace transit::pml {

void FetchProbes::release() noexcept {
    // A get still in flight writes into the scratch with its registration:
    // both stay until the transports end it.
    if (std::any_of(fetches_.begin(), fetches_.end(), [](const auto& f) { return f->pending > 0; }))
        return;
    for (const Scratch& s : registered_)
        if (s.handle) s.module->rdma()->deregister_mem(s.handle);
    registered_.clear();
    fetches_.clear();
    scratch_.reset();
}

void FetchProbes::stop() noexcept {
    stopped_ = true;
    release();
}

void FetchProbes::serve(Rank from, btl::Module* arrived, std::span<const std::byte> msg) noexcept {
    const std::uint32_t token = wire::header_of<wire::KeepAliveHdr>(msg).pad & ~wire::probe_fetch;
    Peer* p = c_.peers.peer(from);
    if (stopped_ || p->failed || !p->ep) return;
    const bml::BtlRef* ref = nullptr;
    for (const bml::BtlRef& r : p->ep->candidates)
        if (r.module == arrived) ref = &r;
    if (ref == nullptr) {
        // We measure no paths to it (bml_base_measure=false here): it learns
        // at once, over the usual path, and counts no sample.
        const wire::KeepAliveHdr hdr{c_.rank, token | wire::probe_refused};
        (void)outbox_.send_ctrl(p, wire::pong, &hdr, sizeof hdr);
        return;
    }
    const auto& a = arrived->attributes();
    const auto parts = wire::fetch_parts(msg, a.registration_handle_size, max_length);
    if (!parts || parts->handle.size() > sizeof(Fetch::handle)) {
        c_.drops.refused(wire::ping, from, "a malformed bulk probe");
        return answer(from, arrived, token | wire::probe_refused);
    }
    // A module that cannot get, or no memory for the scratch: the prober
    // learns at once and counts no sample.
    if (ref->rdma == nullptr || !(a.flags & btl::flags::get))
        return answer(from, arrived, token | wire::probe_refused);
    std::erase_if(fetches_, [](const auto& f) { return f->pending == 0; });
    if (fetches_.size() >= max_in_flight) {
        c_.drops.refused(wire::ping, from, "a bulk probe beyond the probes served at once");
        return answer(from, arrived, token | wire::probe_refused);
    }
    try {
        if (!scratch_) scratch_ = std::make_unique_for_overwrite<std::byte[]>(max_length);
        fetches_.push_back(std::make_unique<Fetch>());
    } catch (...) {
        return answer(from, arrived, token | wire::probe_refused);
    }
    Fetch& f = *fetches_.back();
    f.peer = from;
    f.module = arrived;
    f.endpoint = ref->endpoint;
    f.token = token;
    f.owner = this;
    std::memcpy(f.handle, parts->handle.data(), parts->handle.size());
    if (!start(f, parts->probe, *ref->rdma)) f.failed = true;
    if (f.pending == 0) answer(f);
}

bool FetchProbes::start(Fetch& f, const wire::FetchProbeHdr& probe, btl::Rdma& rdma) noexcept {
    const auto& a = f.module->attributes();
    const std::size_t piece = std::min<std::size_t>(a.get_limit ? a.get_limit : max_length,
                                                    static_cast<std::size_t>(probe.length));
    btl::RegistrationHandle* local = scratch_handle(f.module, rdma);
    const auto* remote =
        probe.handle_size ? reinterpret_cast<const btl::RegistrationHandle*>(f.handle) : nullptr;
    for (std::size_t off = 0; off < probe.length; off += piece) {
        const std::size_t size = std::min<std::size_t>(piece, probe.length - off);
        ++f.pending;
        const btl::RdmaRequest req{.endpoint = f.endpoint,
                                   .local = scratch_.get() + off,
                                   .remote = probe.address + off,
                                   .local_handle = local,
                                   .remote_handle = remote,
                                   .size = size,
                                   .cb = &FetchProbes::fetched,
                                   .cbcontext = this,
                                   .cbdata = &f};
        const Status s = rdma.get(req);
        if (s != Status::success) --f.pending;  // no callback will come
        if (s != Status::success && s != Status::completed) return false;
    }
    return true;
}

btl::RegistrationHandle* FetchProbes::scratch_handle(btl::Module* m, btl::Rdma& rdma) noexcept {
    for (const Scratch& s : registered_)
        if (s.module == m) return s.handle;
    btl::RegistrationHandle* h = nullptr;
    try {
        h = rdma.register_mem(nullptr, scratch_.get(), max_length, btl::reg_flags::local_write);
        registered_.push_back({m, h});
    } catch (...) {
        if (h) rdma.deregister_mem(h);
        return nullptr;
    }
    return h;
}

void FetchProbes::fetched(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*,
                          void* cbdata, Status status) noexcept {
    auto& f = *static_cast<Fetch*>(cbdata);
    if (!ok(status)) f.failed = true;
    if (--f.pending == 0 && !f.owner->stopped_) f.owner->answer(f);
}

void FetchProbes::answer(Fetch& f) noexcept {
    answer(f.peer, f.module, f.failed ? f.token | wire::probe_refused : f.token);
}

void FetchProbes::answer(Rank peer, btl::Module* m, std::uint32_t token) noexcept {
    Peer* p = c_.peers.peer(peer);
    if (p->failed || !p->ep) return;
    for (const bml::BtlRef& r : p->ep->candidates) {
        if (r.module != m) continue;
        const wire::KeepAliveHdr hdr{c_.rank, token};
        (void)outbox_.send_over(p, r, wire::tag(wire::pong), &hdr, sizeof hdr, nullptr, 0,
                                Outbox::Refusal::lost);
        return;
    }
}

}  // namespace transit::pml
