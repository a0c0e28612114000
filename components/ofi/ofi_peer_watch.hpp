// How an ofi module learns that job peers left or were lost, and tells them
// when it leaves.  libfabric reports a lost peer only through an operation
// that fails (tcp) or not at all (shm), so peers on this node are watched by
// process id (from the modex) and greeted with a goodbye at finalize.  The
// module owns this object; the endpoints and operations it ends stay the
// module's.
#pragma once

#include "ofi_endpoint.hpp"
#include "transit/btl/module.hpp"

namespace transit::ofi {

class OfiModule;

class OfiPeerWatch {
  public:
    explicit OfiPeerWatch(OfiModule& module) noexcept : m_(module) {}

    void watch(OfiEndpoint& ep) noexcept;
    // The low-priority pass: peers outside the job, then job peers that exited.
    int check_peers() noexcept;
    void lose_peer(OfiEndpoint& ep) noexcept;
    void abandon_operations(OfiEndpoint& ep, Status status) noexcept;
    void say_goodbye(OfiEndpoint& ep) noexcept;
    void say_hello(OfiEndpoint& ep) noexcept;

  private:
    bool in_flight_to(OfiEndpoint& ep) noexcept;

    OfiModule& m_;
};

}  // namespace transit::ofi
