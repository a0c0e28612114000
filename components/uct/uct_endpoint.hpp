// Per-peer state of a uct module: the UCT endpoint connected to the peer's
// interface, and whether UCT reported the peer lost.
#pragma once

#include <uct/api/uct.h>

#include "transit/btl/module.hpp"
#include "transit/process_watch.hpp"

namespace transit::uct {

class UctEndpoint final : public btl::Endpoint {
  public:
    UctEndpoint(Rank peer, uct_ep_h ep) : btl::Endpoint(peer), ep(ep) {}
    UctEndpoint(const UctEndpoint&) = delete;
    UctEndpoint& operator=(const UctEndpoint&) = delete;
    ~UctEndpoint() override {
        if (ep != nullptr) uct_ep_destroy(ep);
    }

    uct_ep_h ep;
    bool failed = false;    // UCT reported the peer lost; sends fail at once
    bool reported = false;  // the error callback has been told
    bool added = false;     // by add_procs (not only connected to answer a request)
    ProcessWatch process;   // a peer on this node, watched for exit (or nothing)
};

}  // namespace transit::uct
