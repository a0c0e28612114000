// What every protocol of the pml shares: who we are, the settings, the peers,
// the request pool and the buffers for messages kept for later.  The Engine
// owns one; each collaborator (Outbox, Sender, Receiver, ActiveMessages, OneSided,
// Failure) holds a reference to it.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "pml/drop_log.hpp"
#include "pml/peer.hpp"
#include "pml/pools.hpp"
#include "pml/request.hpp"
#include "pml/settings.hpp"
#include "transit/log.hpp"

namespace transit::pml {

class ActiveMessages;

struct Core {
    Rank rank = 0;
    std::uint32_t size = 1;
    Settings settings;
    log::Stream out;
    Context* ctx = nullptr;
    std::vector<std::uint32_t> component_hash;  // by module index
    PeerTable peers;
    NamedPool<Req> reqs;  // peers name them by handle (request_named)
    Pool<RawMsg> raws;
    BufferPool buffers;
    DropLog drops;
    ActiveMessages* am = nullptr;  // ends the pml's own receives (complete_internal)
    bool has_pending = false;      // a queue or a failure waits for progress
    bool watch_peers = false;      // the keep-alive runs: received messages mark their sender heard
    bool any_failed = false;       // some peer failed
    // The context listens or connected by address: messages may come from
    // peers outside the job, whose headers name them by their own rank.
    bool any_dynamic = false;
    // any_failed or any_dynamic: received messages are screened (Dispatch).
    bool receive_checks = false;
    // Peers whose bye came (Peer::bye_heard), to be acked, or that linger
    // after the ack (Peer::linger_until); progress looks at them while
    // `farewells` (farewell.cpp).
    std::vector<Peer*> byes;
    bool farewells = false;

    Req* new_req(Req::Kind k, void* user) noexcept {
        Req* r = reqs.get();
        if (!r) [[unlikely]]
            return nullptr;
        r->reset(k, user);
        return r;
    }
    void release(Req* r) noexcept {
        r->set_done();  // free requests are never live (see Failure)
        reqs.put(r);
    }
    void complete(Req* r) noexcept {
        if (r->local_handle) [[unlikely]] {
            r->handle_module->rdma()->deregister_mem(r->local_handle);
            r->local_handle = nullptr;
        }
        if (r->internal) [[unlikely]]
            complete_internal(r);
        else
            r->set_done();
    }
    void complete_internal(Req* r) noexcept;
    // The request a peer's frame of kind k names by handle h, when it is live,
    // ours with the peer `from` the frame came over, and at the stage that
    // waits for such a frame; else nullptr, and the frame is logged as
    // dropped.  Nothing a peer sends is ever taken for an address.
    Req* request_named(wire::Kind k, WireHandle h, Rank from) noexcept;
    // A transfer of r (fragment, get, put) ended with error s: once r's peer
    // is known gone, that is the cause whatever the transport said, and a
    // request already failed keeps peer_failed.
    static void transfer_failed(Req* r, Status s) noexcept {
        if (r->st().status == Status::peer_failed || r->st().status == Status::peer_departed)
            return;
        r->st().status = r->peer && r->peer->failed ? r->peer->gone_status() : s;
    }

    // Who sent a message of the job's own control (barrier, keep-alive): the
    // peer whose endpoint it came over, else (a transport that does not say)
    // the rank its header names.  Only another rank of the job may send them.
    static Rank job_sender(Rank from, Rank named) noexcept {
        return from != any_rank ? from : named;
    }
    bool other_job_rank(Rank r) const noexcept { return r < size && r != rank; }

    // A copy of a message in a pooled buffer (nullptr when out of memory).
    RawMsg* keep(const std::byte* bytes, std::size_t len, btl::Tag tag) noexcept;
    void drop(RawMsg* m) noexcept;
};

}  // namespace transit::pml
