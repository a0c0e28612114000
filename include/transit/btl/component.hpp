// A BTL component: discovers its devices and creates modules.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "transit/btl/am_table.hpp"
#include "transit/btl/module.hpp"
#include "transit/component.hpp"
#include "transit/progress.hpp"
#include "transit/runtime.hpp"

namespace transit::btl {

// What a component receives at init: the job, the progress engine, the tag table.
struct InitContext {
    rt::Runtime& runtime;
    ProgressEngine& progress;
    AmTable& am_table;
    bool progress_threads = false;
    bool multi_threaded = false;
};

// What a component's modules could be at most, known without starting
// anything: the peers they may reach (btl::reach), their highest exclusivity
// and every capability flag they may have.
struct Prospect {
    std::uint32_t reach = reach::any;
    std::uint32_t exclusivity = exclusivity_low;
    std::uint32_t flags = 0;
};

class Component : public mca::Component {
  public:
    // For a component whose init is costly (it starts another library, maps
    // memory, opens a device): its prospect, asked before init.  The framework
    // then starts it only when some peer of the job may need it: when no
    // started module of higher exclusivity, with every one-sided capability it
    // could add, reaches each kind of peer it could reach (the bml would never
    // ask it).  A prospect with flags::dynamic_peers counts peers outside the
    // job as a kind too: it is started when the runtime can meet them and no
    // started module carries them to each place (node, remote) it reaches.
    // nullopt (the default): always started.
    virtual std::optional<Prospect> prospect() const { return std::nullopt; }

    // Creates 0..n modules (0: nothing usable, with the reason in decline_reason()).
    // Publishes the modules' addresses through ctx.runtime.modex_send().
    virtual std::vector<std::unique_ptr<Module>> init(InitContext& ctx) = 0;

    // Set when init returns no module, for transit_info and verbose output.
    const std::string& decline_reason() const noexcept { return decline_reason_; }

  protected:
    std::string decline_reason_;
};

}  // namespace transit::btl
