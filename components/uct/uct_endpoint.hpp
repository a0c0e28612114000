// Per-peer state of a uct module: the UCT endpoint connected to the peer's
// interface, whether UCT reported the peer lost, and for native RDMA the
// endpoint on the RDMA interface (cma) and the remote keys unpacked for it.
#pragma once

#include <uct/api/uct.h>

#include <chrono>

#include "transit/btl/module.hpp"
#include "transit/btl/util/outside_link.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "uct_frag.hpp"
#include "uct_rdma_policy.hpp"

namespace transit::uct {

class UctEndpoint final : public btl::Endpoint {
  public:
    UctEndpoint(Rank peer, uct_ep_h ep) : btl::Endpoint(peer), ep(ep) {}
    UctEndpoint(const UctEndpoint&) = delete;
    UctEndpoint& operator=(const UctEndpoint&) = delete;
    ~UctEndpoint() override {
        if (rkey_component != nullptr)
            rkeys.clear([this](uct_rkey_bundle_t& b) { uct_rkey_release(rkey_component, &b); });
        if (amo_component != nullptr)
            amo_rkeys.clear([this](uct_rkey_bundle_t& b) { uct_rkey_release(amo_component, &b); });
        if (rdma_ep != nullptr && rdma_ep != ep) uct_ep_destroy(rdma_ep);
        if (ep != nullptr) uct_ep_destroy(ep);
    }

    static constexpr std::size_t rkey_cache_size = 16;

    uct_ep_h ep;
    // Messages UCT had no room for (the peer's FIFO full), in order; while
    // any wait, a new message goes behind them (uct_send_queue.cpp).
    FifoQueue<UctFrag> queued;
    UctEndpoint* next_waiting = nullptr;  // the module's list of endpoints whose queue waits
    // On that list.  Not the queue's emptiness: a send empties the queue
    // without leaving the list, and a second entry would make the list a cycle.
    bool waiting = false;
    uct_ep_h rdma_ep = nullptr;  // native put/get; == ep when the module's own interface
    uct_component_h rkey_component = nullptr;  // unpacks (and releases) the remote keys
    RkeyCache<uct_rkey_bundle_t, rkey_cache_size> rkeys;
    bool rdma_broken = false;  // a native operation failed: active messages from now on
    // Native atomics (mem_alloc memory): the interface's own keys.
    uct_component_h amo_component = nullptr;
    RkeyCache<uct_rkey_bundle_t, rkey_cache_size> amo_rkeys;
    bool amo_broken = false;
    bool failed = false;              // UCT reported the peer lost; sends fail at once
    bool reported = false;            // the error callback has been told
    bool added = false;               // by add_procs (not only connected to answer a request)
    bool goodbye = false;             // the peer said it is leaving: losing it is no error
    btl::util::ProcessWatch process;  // a peer on this node, watched for exit (or nothing)
    // The source our messages to it carry: our rank for a job peer, the
    // channel it knows us by for a peer outside the job.
    Rank wire_source = 0;
    // A peer outside the job (rt::DynamicPeers): the channel its messages
    // carry (our key for it), and its link: a server's joining until it
    // welcomes our join (or the join times out, btl_uct_join_timeout),
    // departed when it left (goodbye) rather than failed.
    bool dynamic = false;
    btl::util::OutsideLink outside;
    bool deleted = false;  // by del_procs; freed at the module's next safe point
    std::uint32_t channel = 0;
    bool refused_token = false;  // the server's welcome said: wrong access token
};

// The peer's remote key for registration `key`: from the endpoint's cache, or
// unpacked from the handle's key for one memory domain (`md_tag`) and kept.
// For native put/get (UctOneSided) and native atomics (UctAtomics).
inline bool cached_rkey(RkeyCache<uct_rkey_bundle_t, UctEndpoint::rkey_cache_size>& cache,
                        uct_component_h component, const btl::RegistrationHandle* handle,
                        std::uint32_t md_tag, std::size_t len, std::uint64_t key,
                        uct_rkey_t& rkey) noexcept {
    if (const uct_rkey_bundle_t* b = cache.find(key)) {
        rkey = b->rkey;
        return true;
    }
    const std::byte* packed = handle_rkey(reinterpret_cast<const std::byte*>(handle), md_tag, len);
    if (packed == nullptr) return false;
    uct_rkey_bundle_t b{};
    if (uct_rkey_unpack(component, packed, &b) != UCS_OK) return false;
    cache.insert(key, b,
                 [component](uct_rkey_bundle_t& old) { uct_rkey_release(component, &old); });
    rkey = b.rkey;
    return true;
}

}  // namespace transit::uct
