// The btl framework: opens the components the `btl` parameter selects, initialises
// them into modules, and closes everything in reverse order.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "framework/repository.hpp"
#include "transit/btl/component.hpp"
#include "transit/log.hpp"
#include "transit/params.hpp"

namespace transit::btl {

class Framework {
  public:
    // Registers the framework's own parameters (btl, btl_base_verbose, ...).
    Framework(rt::Runtime& runtime, ProgressEngine& progress, AmTable& am_table);
    ~Framework();  // finalizes modules, closes components, unloads
    Framework(const Framework&) = delete;
    Framework& operator=(const Framework&) = delete;

    // Loads every component, registers its parameters, applies the `btl`
    // selection and opens the selected ones.  Throws params::Error for a bad
    // selection list or parameter value.
    void open();
    // Calls init on every opened component and collects the modules.  A component
    // that returns none is declined (its decline_reason()), closed and unloaded.
    // With btl_base_lazy, a component with a prospect is started only when some
    // peer of the job may need it; otherwise it is declined as "not started".
    void init();

    // The kinds of peers (btl::reach) the modules will be asked for: every kind
    // by default.  A host that reaches some itself (Open MPI's self serves the
    // own process) names the others, so no component is started for those.
    void serve(std::uint32_t kinds) noexcept { served_ = kinds; }
    // Before init: the modules will be called by several threads at once
    // (InitContext::multi_threaded): a module may then lock what it shares and
    // announce flags::thread_safe.  Off, they run lock-free for one thread.
    void multi_threaded(bool on) noexcept { multi_threaded_ = on; }

    // Modules in exclusivity order, highest first.
    std::span<Module* const> modules() const noexcept { return module_view_; }
    // Every component seen, with its state and reason (for transit_info and the bml),
    // sorted by name.  Components that were refused, excluded or declined are
    // unloaded as soon as that is known; only their records remain.
    std::vector<mca::ComponentRecord> records() const;
    // After open: what the opened component `name` would use on this machine,
    // from its describe_devices hook; nullopt when it is not open or has no
    // hook.  Throws what the hook throws.
    std::optional<mca::DeviceReport> devices(std::string_view name) const;
    const log::Stream& output() const noexcept { return out_; }

  private:
    void check_types();
    void register_component_params();
    params::Selection selection() const;
    std::string exclusion_reason() const;
    void apply_selection(const params::Selection& selection);
    void open_selected();
    std::vector<std::unique_ptr<Module>> init_one(mca::LoadedComponent& c, InitContext& ctx);
    std::optional<Prospect> prospect_of(mca::LoadedComponent& c);
    // Why no peer of the job can need a component with this prospect, given the
    // modules started; nullopt when some peer may.
    std::optional<std::string> needless(const Prospect& p,
                                        std::span<const Module* const> started) const;
    bool dynamic_kinds_carried(const Prospect& p, std::span<const Module* const> started) const;
    void not_started(mca::LoadedComponent& c, std::string why);
    void fail(mca::LoadedComponent& c, std::string reason);
    void close_one(mca::LoadedComponent& c);
    void unload_unused();

    rt::Runtime& runtime_;
    ProgressEngine& progress_;
    AmTable& am_table_;
    log::Stream out_;
    std::vector<mca::LoadedComponent> components_;
    std::vector<mca::ComponentRecord> failures_;
    std::vector<std::unique_ptr<Module>> modules_;
    std::vector<Module*> module_view_;
    std::uint32_t served_ = reach::any;
    bool multi_threaded_ = false;
    bool opened_ = false;
    bool initialized_ = false;
};

}  // namespace transit::btl
