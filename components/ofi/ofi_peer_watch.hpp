// How an ofi module learns that job peers left or were lost, and tells them
// when it leaves.  libfabric reports a lost peer only through an operation
// that fails (tcp) or not at all (shm), so peers on this node are watched by
// process id (from the modex) and greeted with a goodbye at finalize.
//
// Owns: which ranks are owed a hello (we said goodbye, then added them
// again) and the pace of the watch.  Borrows: the module's OfiFabric (its
// fragments in flight), its completion queue (polled before a peer is
// declared lost), its OfiOneSided (operations in flight), its OfiOutside (a
// peer outside the job's link), the runtime (process ids, node), and the
// module for control messages and error reports.  The endpoints it ends stay
// the module's.
#pragma once

#include <memory>
#include <vector>

#include "ofi_endpoint.hpp"
#include "transit/btl/module.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/log.hpp"
#include "transit/runtime.hpp"

namespace transit::ofi {

class OfiCompletions;
class OfiModule;
class OfiOneSided;
class OfiOutside;
struct OfiFabric;

class OfiPeerWatch {
  public:
    OfiPeerWatch(OfiModule& module, OfiFabric& fabric, rt::Runtime& runtime,
                 OfiCompletions& completions, OfiOneSided& one_sided, OfiOutside& outside,
                 const log::Stream& out) noexcept
        : m_(module),
          f_(fabric),
          runtime_(runtime),
          completions_(completions),
          one_sided_(one_sided),
          outside_(outside),
          out_(out) {}

    // For `ranks` job ranks.
    void setup(std::size_t ranks) { owe_hello_.assign(ranks, false); }
    void watch(OfiEndpoint& ep) noexcept;
    // The low-priority pass over job peers (the module's, by rank): those that exited.
    int check_peers(std::vector<std::unique_ptr<OfiEndpoint>>& by_rank) noexcept;
    void lose_peer(OfiEndpoint& ep) noexcept;
    void abandon_operations(OfiEndpoint& ep, Status status) noexcept;
    void say_goodbye(OfiEndpoint& ep) noexcept;
    // When ep is owed one (see owe_hello_).
    void say_hello(OfiEndpoint& ep) noexcept;

  private:
    bool in_flight_to(OfiEndpoint& ep) noexcept;

    OfiModule& m_;
    OfiFabric& f_;
    rt::Runtime& runtime_;
    OfiCompletions& completions_;
    OfiOneSided& one_sided_;
    OfiOutside& outside_;
    const log::Stream& out_;

    // Per rank, outliving its endpoint: we said goodbye to it and, should it
    // be added again, owe it a hello.
    std::vector<bool> owe_hello_;
    btl::util::WatchPace check_pace_;  // every 16th low-priority pass, at most every 100 ms
};

}  // namespace transit::ofi
