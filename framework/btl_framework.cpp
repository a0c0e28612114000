// The btl framework's lifecycle: load -> register parameters -> select -> open
// -> init -> (use) -> finalize -> close -> unload.  Every decision about a
// component is one verbose line, so "why was this transport (not) used?" has
// an answer at btl_base_verbose >= 1.
#include "framework/btl_framework.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "transit/btl/util/leftovers.hpp"
#include "transit/params.hpp"
#include "transit/params_bind.hpp"

namespace transit::btl {

namespace {

using mca::ComponentState;

constexpr params::Decl selection_decl = {
    "", params::Type::string, "",
    "Comma-separated list of btl components to use (e.g. \"self,vader,tcp\"), or, "
    "with a leading '^', the components not to use (e.g. \"^openib\"); empty: all",
    1};

constexpr int max_verbosity = 100;

constexpr params::Decl verbose_decl =
    params::Decl{"verbose", params::Type::integer, "0",
                 "Verbosity of the btl framework: at 1 and above, one line per component "
                 "saying why it was selected, declined, excluded or rejected",
                 5}
        .range(0, max_verbosity);

constexpr params::Decl lazy_decl = {
    "lazy", params::Type::boolean, "true",
    "Start a component whose start-up is costly (ofi, uct: they start libfabric or UCX) only "
    "when some peer of the job may need it: not when, by the job's locality alone, a started "
    "component of higher exclusivity with its one-sided operations reaches every peer it "
    "could reach (on one node: self and vader). 0: start every selected component",
    6};

// The framework's own settings (btl_base_*), bound like a component's.
struct BaseSettings {
    int verbose = 0;
    bool lazy = true;
};

constexpr params::Field<BaseSettings> base_settings_table[] = {
    params::to<&BaseSettings::verbose>(verbose_decl),
    params::to<&BaseSettings::lazy>(lazy_decl),
};

// Read where each is used (verbose when the framework is made, lazy at init),
// so a value set between the two still counts.
BaseSettings base_settings() {
    BaseSettings s;
    params::bind(params::registry(), "btl", "base", base_settings_table, s);
    return s;
}

// Only the btl framework's own objects reach here (the loader checked the
// descriptor), but a plugin may still hand back a class of the wrong kind.
Component* as_btl(mca::LoadedComponent& c) {
    return dynamic_cast<Component*>(&c.component());
}

std::string what_of(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "an unknown exception";
    }
}

std::string module_names(std::span<const std::unique_ptr<Module>> modules) {
    std::string out;
    for (const auto& m : modules) out += (out.empty() ? "" : ", ") + m->name();
    return out;
}

}  // namespace

Framework::Framework(rt::Runtime& runtime, ProgressEngine& progress, AmTable& am_table)
    : runtime_(runtime), progress_(progress), am_table_(am_table) {
    params::Registry& registry = params::registry();
    registry.add("btl", "", selection_decl);
    params::add_all(registry, "btl", "base", base_settings_table);
    out_ = log::Stream("btl", base_settings().verbose);
}

Framework::~Framework() {
    for (auto it = modules_.rbegin(); it != modules_.rend(); ++it) {
        try {
            if (Status s = (*it)->finalize(); !ok(s))
                out_.verbose(1, "finalizing module {} failed: {}", (*it)->name(), to_string(s));
        } catch (...) {
            out_.verbose(1, "finalizing module {} threw: {}", (*it)->name(),
                         what_of(std::current_exception()));
        }
    }
    module_view_.clear();
    while (!modules_.empty()) modules_.pop_back();
    for (auto it = components_.rbegin(); it != components_.rend(); ++it) close_one(*it);
    while (!components_.empty()) components_.pop_back();
}

void Framework::open() {
    if (opened_) return;
    opened_ = true;
    // Named objects that this user's killed processes listed (btl::util::Leftovers)
    // outlive them, and nobody else knows their names: every start clears them.
    for (const std::string& r : btl::util::remove_leftovers_of_gone_processes())
        out_.verbose(5, "removed {}: its process is gone", r);
    const params::Selection chosen = selection();
    mca::LoadResult loaded = mca::load_components("btl", [&](std::string_view name) {
        return chosen.empty() || chosen.selects(name) ? std::string() : exclusion_reason();
    });
    components_ = std::move(loaded.components);
    failures_ = std::move(loaded.failures);
    for (const mca::ComponentRecord& f : failures_) {
        if (f.state == ComponentState::excluded)
            out_.verbose(1, "excluded {}: {} (not loaded: {})", f.name, f.reason, f.path);
        else
            out_.verbose(1, "rejected {} ({}): {}", f.name, f.path, f.reason);
    }
    check_types();
    register_component_params();
    apply_selection(chosen);
    open_selected();
    unload_unused();
}

std::optional<mca::DeviceReport> Framework::devices(std::string_view name) const {
    for (const mca::LoadedComponent& c : components_) {
        const ComponentState s = c.record().state;
        if (c.record().name != name || (s != ComponentState::opened && s != ComponentState::active))
            continue;
        mca::DeviceReport report;
        if (c.describe_devices(report)) return report;
    }
    return std::nullopt;
}

void Framework::init() {
    if (!opened_) open();
    if (initialized_) return;
    initialized_ = true;
    InitContext ctx{runtime_, progress_, am_table_, false, multi_threaded_};
    const bool lazy = base_settings().lazy;
    // Each component's modules, kept in the components' order whatever order
    // they were started in.
    std::vector<std::vector<std::unique_ptr<Module>>> made(components_.size());
    std::vector<std::pair<std::size_t, Prospect>> costly;
    for (std::size_t i = 0; i < components_.size(); ++i) {
        mca::LoadedComponent& c = components_[i];
        if (c.record().state != ComponentState::opened) continue;
        std::optional<Prospect> p = lazy ? prospect_of(c) : std::nullopt;
        if (p)
            costly.emplace_back(i, *p);
        else
            made[i] = init_one(c, ctx);
    }
    // The highest first: one started may make a lower one needless.
    std::stable_sort(costly.begin(), costly.end(), [](const auto& a, const auto& b) {
        return a.second.exclusivity > b.second.exclusivity;
    });
    for (const auto& [i, p] : costly) {
        std::vector<const Module*> started;
        for (const auto& list : made)
            for (const auto& m : list) started.push_back(m.get());
        if (std::optional<std::string> why = needless(p, started)) {
            not_started(components_[i], std::move(*why));
            continue;
        }
        made[i] = init_one(components_[i], ctx);
    }
    for (auto& list : made)
        for (auto& m : list) modules_.push_back(std::move(m));
    for (const auto& m : modules_) module_view_.push_back(m.get());
    std::stable_sort(module_view_.begin(), module_view_.end(), [](Module* a, Module* b) {
        return a->attributes().exclusivity > b->attributes().exclusivity;
    });
    unload_unused();
}

std::optional<Prospect> Framework::prospect_of(mca::LoadedComponent& c) {
    try {
        return as_btl(c)->prospect();
    } catch (...) {
        // Started as any other: its init will say what is wrong.
        out_.verbose(1, "{}: prospect() threw: {}", c.record().name,
                     what_of(std::current_exception()));
        return std::nullopt;
    }
}

// The bml asks a module for a peer unless a module of higher exclusivity that
// sends reaches it with every one-sided capability it adds.  Applied to each
// kind of peer the job has, with the started modules' announced reach.
std::optional<std::string> Framework::needless(const Prospect& p,
                                               std::span<const Module* const> started) const {
    if (!dynamic_kinds_carried(p, started)) return std::nullopt;
    const std::uint32_t size = std::max<std::uint32_t>(runtime_.size(), 1);
    const std::uint32_t local = std::clamp<std::uint32_t>(runtime_.local_size(), 1, size);
    struct Kind {
        std::uint32_t bit;
        std::uint32_t count;
        const char* what;
    };
    const Kind kinds[] = {{reach::own_process, 1, "its own process"},
                          {reach::node, local - 1, "peer(s) on this node"},
                          {reach::remote, size - local, "peer(s) on other nodes"}};
    std::string why;
    for (const Kind& k : kinds) {
        if (!(p.reach & served_ & k.bit) || k.count == 0) continue;
        const Module* top = nullptr;
        std::uint32_t top_caps = 0;
        for (const Module* m : started) {
            const Attributes& a = m->attributes();
            if (!(a.reach & k.bit) || !(a.flags & flags::send)) continue;
            if (top == nullptr || a.exclusivity > top->attributes().exclusivity) {
                top = m;
                top_caps = 0;
            }
            if (a.exclusivity == top->attributes().exclusivity)
                top_caps |= a.flags & flags::one_sided;
        }
        if (top == nullptr || top->attributes().exclusivity <= p.exclusivity ||
            (p.flags & flags::one_sided & ~top_caps) != 0)
            return std::nullopt;
        const std::string who = k.bit == reach::own_process ? std::string(k.what)
                                                            : fmt::format("{} {}", k.count, k.what);
        why += fmt::format("{}{} by {} (exclusivity {} > {})", why.empty() ? "" : "; ", who,
                           top->name(), top->attributes().exclusivity, p.exclusivity);
    }
    if (why.empty()) return "the job has no peer of a kind it reaches";
    return "no peer needs it: " + why + ", with every one-sided operation it could add";
}

// Peers outside the job are a kind of peer of their own when the runtime can
// meet them (the pml's can): a component that may carry them (its prospect has
// flags::dynamic_peers) is needed unless a started module carries them to
// each place it reaches, this node and other nodes.  So `btl=self,ofi` starts
// ofi for a listening singleton, and the default selection, where tcp and
// vader carry them, starts nothing more for them.
bool Framework::dynamic_kinds_carried(const Prospect& p,
                                      std::span<const Module* const> started) const {
    if (!(p.flags & flags::dynamic_peers) || runtime_.dynamic_peers() == nullptr) return true;
    for (const std::uint32_t bit : {reach::node, reach::remote}) {
        if (!(p.reach & bit)) continue;
        const bool carried = std::any_of(started.begin(), started.end(), [bit](const Module* m) {
            const Attributes& a = m->attributes();
            return (a.flags & flags::dynamic_peers) && (a.reach == 0 || (a.reach & bit));
        });
        if (!carried) return false;
    }
    return true;
}

void Framework::not_started(mca::LoadedComponent& c, std::string why) {
    mca::ComponentRecord& r = c.record();
    close_one(c);  // it was opened
    r.state = ComponentState::declined;
    r.reason = "not started: " + why;
    out_.verbose(1, "not started {}: {}", r.name, why);
}

std::vector<mca::ComponentRecord> Framework::records() const {
    std::vector<mca::ComponentRecord> out;
    for (const mca::LoadedComponent& c : components_) out.push_back(c.record());
    out.insert(out.end(), failures_.begin(), failures_.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.name < b.name; });
    return out;
}

void Framework::check_types() {
    for (mca::LoadedComponent& c : components_)
        if (as_btl(c) == nullptr)
            fail(c, "the factory returned an object that is not a btl component");
}

void Framework::register_component_params() {
    for (mca::LoadedComponent& c : components_) {
        if (c.record().state != ComponentState::loaded) continue;
        try {
            c.component().register_params(params::registry());
        } catch (const params::Error&) {
            throw;  // a bad value set by the user: the program must stop and say so
        } catch (...) {
            fail(c, "registering parameters threw: " + what_of(std::current_exception()));
        }
    }
}

// Parsed before any plugin is loaded, against the names the plugin files carry.
params::Selection Framework::selection() const {
    return params::parse_selection(params::registry().get("btl").text(),
                                   mca::component_names("btl"), "btl");
}

std::string Framework::exclusion_reason() const {
    const params::Variable& var = params::registry().get("btl");
    return fmt::format("excluded by btl={} (from {})", var.text(), var.source().describe());
}

// Plugin files the selection leaves out are not even loaded; this is for the
// components built into the library.
void Framework::apply_selection(const params::Selection& selection) {
    if (selection.empty()) return;
    for (mca::LoadedComponent& c : components_) {
        mca::ComponentRecord& r = c.record();
        if (r.state != ComponentState::loaded || selection.selects(r.name)) continue;
        r.state = ComponentState::excluded;
        r.reason = exclusion_reason();
        out_.verbose(1, "excluded {}: {}", r.name, r.reason);
    }
}

void Framework::open_selected() {
    for (mca::LoadedComponent& c : components_) {
        mca::ComponentRecord& r = c.record();
        if (r.state != ComponentState::loaded) continue;
        try {
            mca::OpenResult result = c.component().open();
            if (result.available) {
                r.state = ComponentState::opened;
                out_.verbose(1, "opened {} ({})", r.name, r.path);
            } else {
                r.state = ComponentState::declined;
                r.reason = result.reason.empty() ? "declined to open" : result.reason;
                out_.verbose(1, "declined {}: {}", r.name, r.reason);
            }
        } catch (...) {
            fail(c, "open() threw: " + what_of(std::current_exception()));
        }
    }
}

std::vector<std::unique_ptr<Module>> Framework::init_one(mca::LoadedComponent& c,
                                                         InitContext& ctx) {
    mca::ComponentRecord& r = c.record();
    std::vector<std::unique_ptr<Module>> modules;
    try {
        modules = as_btl(c)->init(ctx);
    } catch (...) {
        fail(c, "init() threw: " + what_of(std::current_exception()));
        return {};
    }
    std::erase(modules, nullptr);
    if (modules.empty()) {
        const std::string& why = as_btl(c)->decline_reason();
        close_one(c);  // it was opened
        r.state = ComponentState::declined;
        r.reason = why.empty() ? "no usable module" : why;
        out_.verbose(1, "declined {}: {}", r.name, r.reason);
        return {};
    }
    r.state = ComponentState::active;
    out_.verbose(1, "selected {}: {} module(s): {}", r.name, modules.size(), module_names(modules));
    return modules;
}

void Framework::fail(mca::LoadedComponent& c, std::string reason) {
    mca::ComponentRecord& r = c.record();
    out_.verbose(1, "rejected {} ({}): {}", r.name, r.path, reason);
    // An opened component gets its close() even when a later step failed.
    if (r.state == ComponentState::opened) close_one(c);
    r.state = ComponentState::failed;
    r.reason = std::move(reason);
}

// Only opened and active components were opened, so only they are closed.
void Framework::close_one(mca::LoadedComponent& c) {
    mca::ComponentRecord& r = c.record();
    if (r.state != ComponentState::opened && r.state != ComponentState::active) return;
    try {
        c.component().close();
    } catch (...) {
        out_.verbose(1, "closing {} threw: {}", r.name, what_of(std::current_exception()));
    }
}

// A component that will never run is unloaded at once: its library (and what
// the library pulls in, e.g. libibverbs) should not stay mapped for nothing.
void Framework::unload_unused() {
    auto unused = [](const mca::LoadedComponent& c) {
        ComponentState s = c.record().state;
        return s == ComponentState::failed || s == ComponentState::declined ||
               s == ComponentState::excluded;
    };
    for (auto it = components_.begin(); it != components_.end();) {
        if (!unused(*it)) {
            ++it;
            continue;
        }
        failures_.push_back(it->record());
        it = components_.erase(it);
    }
}

}  // namespace transit::btl
