// btl/ofi: the component.  Asks libfabric for the reliable-datagram providers
// that offer messages, RMA and atomics, keeps those the provider lists select
// (one per provider: its first, preferred, domain), opens one module for each
// and publishes each endpoint's address through the modex.
#include <fmt/format.h>
#include <rdma/fabric.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ofi_module.hpp"
#include "transit/btl/base_params.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/join_timeout.hpp"
#include "transit/btl/util/memory_release_monitor.hpp"
#include "transit/btl/util/module_opener.hpp"
#include "transit/btl/util/network_interface.hpp"
#include "transit/params_bind.hpp"
#include "transit/version.hpp"

namespace transit::ofi {
namespace {

using params::Type;

constexpr params::Field<OfiConfig> ofi_params[] = {
    params::to<&OfiConfig::provider_include>(params::Decl{
        "provider_include", Type::string, "",
        "Libfabric providers to use, comma separated, by full name (tcp;ofi_rxm) or core name "
        "(tcp, shm, verbs, efa, cxi, opx); empty: every provider not excluded, but the "
        "shared-memory ones (shm, sm2) only where the btl list leaves vader out. Setting it "
        "together with a non-default btl_ofi_provider_exclude is an error",
        1}),
    params::to<&OfiConfig::provider_exclude>(params::Decl{
        "provider_exclude", Type::string, "sockets,net,udp",
        "Libfabric providers not to use (same names as btl_ofi_provider_include); by default "
        "the providers that duplicate tcp with less function or speed. Where the btl list "
        "selects vader, the shared-memory providers (shm, sm2) are left out too unless "
        "btl_ofi_provider_include names them: vader serves this node",
        1}),
    params::to<&OfiConfig::if_include>(params::Decl{
        "if_include", Type::string, "",
        "Network interfaces (names or CIDR blocks, comma separated: eth0,10.1.0.0/16) a "
        "provider with one domain per interface (tcp) may use; empty: any not excluded (both "
        "lists empty: the tcp btl's btl_tcp_if_include / btl_tcp_if_exclude). Of those, the "
        "module takes the interface holding an address of this node's hostname, else "
        "libfabric's first. Setting it together with btl_ofi_if_exclude is an error",
        3}),
    params::to<&OfiConfig::if_exclude>(params::Decl{
        "if_exclude", Type::string, "",
        "Network interfaces (names or CIDR blocks) a provider with one domain per interface "
        "(tcp) must not use",
        3}),
    btl::inherit<OfiConfig>(btl::BaseParam::eager_limit, {.default_value = "8k"}),
    btl::inherit<OfiConfig>(
        btl::BaseParam::max_send_size,
        {.default_value = "64k",
         .help = "Largest fragment; also the size of each preposted receive buffer, so it must "
                 "be the same in every process",
         .max = 64 << 20}),
    btl::inherit<OfiConfig>(
        btl::BaseParam::free_list_max,
        {.default_value = "128",
         .help = "Send fragments in each of the two pools (eager_limit and max_send_size bytes); "
                 "an empty pool makes alloc report out-of-resource"}),
    params::to<&OfiConfig::recv_buffers>(params::Decl{
        "recv_buffers", Type::unsigned_integer, "64",
        "Receive buffers of max_send_size bytes preposted per module and reposted after "
        "each delivery",
        6}
                                             .range(1, 1 << 16)),
    params::to<&OfiConfig::max_rdma_ops>(
        params::Decl{"max_rdma_ops", Type::unsigned_integer, "1024",
                     "Put, get and atomic operations in flight per module before they report "
                     "out-of-resource",
                     6}
            .range(1, 1 << 20)),
    params::to<&OfiConfig::rcache_size>(
        params::Decl{"rcache_size", Type::unsigned_integer, "16",
                     "Memory registrations kept after their last user released them, for reuse (0: "
                     "close at once).  Kept only while btl_ofi_rcache_monitor follows released "
                     "memory",
                     6}
            .range(0, 1 << 20)),
    params::to<&OfiConfig::rcache_monitor>(params::Decl{"rcache_monitor", Type::boolean, "true",
                                                        btl::util::release_monitor_param_help, 6}),
    params::to<&OfiConfig::join_timeout>(btl::join_timeout_decl),
    btl::inherit<OfiConfig>(
        btl::BaseParam::exclusivity,
        {.default_value = "32768",
         .help = "Priority against other transports; left at its default, from the provider (shm "
                 "32768, below vader; tcp/sockets 256, above the tcp btl; other providers 1024)"}),
    btl::inherit<OfiConfig>(btl::BaseParam::latency,
                            {.default_value = "0",
                             .help = "Relative latency, lower is preferred; 0: from the provider "
                                     "(shm 5, tcp 100, others 10)"}),
    btl::inherit<OfiConfig>(
        btl::BaseParam::bandwidth,
        {.default_value = "0",
         .help = "Bandwidth in MB/s used to weigh striping; 0: the link speed the provider "
                 "reports, else an estimate"}),
};

// The exclusivity default above is spelled out; keep it equal to the module's.
static_assert(local_exclusivity == 32768);

// Providers are matched by their full name or their core name.
bool listed(const params::Selection& s, const std::string& provider) {
    const std::string core = core_provider(provider);
    return std::find_if(s.names.begin(), s.names.end(), [&](const std::string& n) {
               return n == provider || n == core;
           }) != s.names.end();
}

struct InfoList {
    fi_info* head = nullptr;
    ~InfoList() {
        if (head) libfabric().freeinfo(head);
    }
};

class OfiComponent final : public btl::Component {
  public:
    void register_params(params::Registry& registry) override {
        registry_ = &registry;
        params::add_all(registry, "btl", "ofi", ofi_params);
        read_interfaces();  // a bad interface list stops the program, naming the parameter
    }

    mca::OpenResult open() override {
        out_ = log::Stream("btl:ofi", btl::base_verbosity(reg()));
        selection_ = read_selection();
        vader_selected_ = vader_selected();
        if (if_include_.empty() && if_exclude_.empty()) adopt_tcp_interfaces();
        return mca::OpenResult::ok();
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override {
        std::vector<std::unique_ptr<btl::Module>> modules;
        std::string why;
        // It stays until the process exits: libfabric keeps what its providers
        // allocate at start-up, and unloading it would turn that into leaks of
        // an unnamed module.
        if (load_libfabric(why) == nullptr) {
            decline_reason_ = "cannot load libfabric: " + why;
            return modules;
        }
        const OfiConfig config = read_config();
        InfoList infos;
        const std::vector<const fi_info*> chosen = choose(infos, why);
        if (chosen.empty()) {
            decline_reason_ = why;
            return modules;
        }
        // Peers on this node watch this process through its id (a peer that
        // cannot read it only loses that watch).
        const auto pid = static_cast<std::uint32_t>(::getpid());
        if (!ok(ctx.runtime.modex_send(OfiModule::pid_key, std::as_bytes(std::span(&pid, 1)))))
            out_.verbose(1, "publishing the process id failed: local peers will not watch it");
        btl::util::ModuleOpener opener(ctx.runtime, out_);
        for (const fi_info* info : chosen) {
            const OfiModule* m = opener.open(modules, info->fabric_attr->prov_name, [&] {
                return std::make_unique<OfiModule>(*this, *info, config, ctx.runtime, ctx.progress,
                                                   ctx.am_table, out_);
            });
            if (m != nullptr)
                out_.verbose(10, "{}: domain {}, exclusivity {}, atomics {:#x}", m->name(),
                             info->domain_attr->name, m->attributes().exclusivity,
                             m->attributes().atomic_flags);
        }
        if (modules.empty()) decline_reason_ = opener.none_opened("no provider could be opened");
        return modules;
    }

    // Opening libfabric maps its shm provider's region and more per process:
    // it is opened only when a peer may need it.
    std::optional<btl::Prospect> prospect() const override {
        // Left at its default, the exclusivity is local_exclusivity, the highest a
        // module of this component takes.
        // No one-sided operation (ofi_module.cpp, choose_attributes).
        return btl::Prospect{btl::reach::any, read_config().exclusivity,
                             btl::flags::send | btl::flags::dynamic_peers};
    }

    // transit_info --devices: every provider libfabric has here, the ones init
    // would open (one module each, in libfabric's order of preference) and why
    // each other one is left out.  It loads libfabric, as init would.
    void describe_devices(mca::DeviceReport& report) const {
        std::string why;
        if (load_libfabric(why) == nullptr) {
            report.notes.push_back("cannot load libfabric: " + why);
            return;
        }
        InfoList infos;
        std::set<std::string> offered;
        const std::vector<const fi_info*> chosen = choose(infos, why, &offered);
        if (chosen.empty()) report.notes.push_back(why);
        std::set<std::string> done;
        for (const fi_info* info : chosen) {
            const std::string prov = info->fabric_attr->prov_name;
            report.devices.push_back(
                {"provider", prov, true,
                 fmt::format("{}domain {}, fabric {}", done.empty() ? "preferred, " : "",
                             info->domain_attr->name, info->fabric_attr->name)});
            done.insert(prov);
        }
        for (const std::string& prov : offered) {
            if (done.count(prov)) continue;
            done.insert(prov);
            report.devices.push_back(
                {"provider", prov, false,
                 selection_.use_include ? "not in btl_ofi_provider_include"
                 : vader_selected_ && node_local(core_provider(prov))
                     ? "vader serves this node (btl_ofi_provider_include=" + prov + " to use it)"
                     : "in btl_ofi_provider_exclude"});
        }
        // The providers that offer no reliable-datagram endpoint with messages,
        // RMA and atomics are not in libfabric's answer above.
        InfoList everything;
        if (libfabric().getinfo(FI_VERSION(1, 10), nullptr, nullptr, 0, nullptr,
                                &everything.head) != 0)
            return;
        for (const fi_info* i = everything.head; i != nullptr; i = i->next) {
            const std::string prov = i->fabric_attr->prov_name;
            if (done.count(prov)) continue;
            done.insert(prov);
            report.devices.push_back({"provider", prov, false,
                                      "no reliable-datagram endpoint with messages, RMA and "
                                      "atomics in the form the component needs"});
        }
    }

  private:
    params::Registry& reg() const { return registry_ ? *registry_ : params::registry(); }

    struct ProviderSelection {
        params::Selection include;
        params::Selection exclude;
        bool use_include = false;
    };

    ProviderSelection read_selection() const {
        params::Registry& r = reg();
        const params::Variable& inc =
            params::variable_of<&OfiConfig::provider_include>(r, "btl", "ofi", ofi_params);
        const params::Variable& exc =
            params::variable_of<&OfiConfig::provider_exclude>(r, "btl", "ofi", ofi_params);
        ProviderSelection s;
        s.include = params::parse_selection(inc.as_string(), {}, inc.full_name());
        s.exclude = params::parse_selection(exc.as_string(), {}, exc.full_name());
        if (s.include.exclude || s.exclude.exclude)
            throw params::Error(
                "btl_ofi_provider_include and btl_ofi_provider_exclude take plain lists of "
                "provider names (no '^')");
        s.use_include = !s.include.empty();
        if (s.use_include && !s.exclude.empty() &&
            exc.source().origin != params::Origin::default_value)
            throw params::Error(fmt::format(
                "btl_ofi_provider_include ({}) and btl_ofi_provider_exclude ({}, {}) are both "
                "set; use one of them",
                inc.text(), exc.text(), exc.source().describe()));
        return s;
    }

    // btl_ofi_if_include / _exclude: a bad entry stops the job at open.
    void read_interfaces() {
        params::Registry& r = reg();
        const params::Variable& inc =
            params::variable_of<&OfiConfig::if_include>(r, "btl", "ofi", ofi_params);
        const params::Variable& exc =
            params::variable_of<&OfiConfig::if_exclude>(r, "btl", "ofi", ofi_params);
        const params::Selection in = params::parse_selection(inc.as_string(), {}, inc.full_name());
        const params::Selection ex = params::parse_selection(exc.as_string(), {}, exc.full_name());
        if (in.exclude || ex.exclude)
            throw params::Error(
                "btl_ofi_if_include and btl_ofi_if_exclude take plain lists of interface names "
                "and CIDR blocks (no '^')");
        try {
            btl::util::interface_selected("", in.names, ex.names);  // checks every entry
        } catch (const std::invalid_argument& e) {
            throw params::Error(fmt::format("btl_ofi_if_include ({}) / btl_ofi_if_exclude ({}): {}",
                                            inc.text(), exc.text(), e.what()));
        }
        if_include_ = in.names;
        if_exclude_ = ex.names;
    }

    // With btl_ofi_if_include and _exclude left empty, the interfaces the
    // user gave the tcp btl (btl_tcp_if_include / _exclude): one list of the
    // interfaces other nodes answer on serves every transport.  Read at open,
    // once every component registered its parameters; a list tcp refuses is
    // left to tcp to report.
    void adopt_tcp_interfaces() {
        for (const char* name : {"btl_tcp_if_include", "btl_tcp_if_exclude"}) {
            const params::Variable* v = reg().find(name);
            if (v == nullptr || v->source().origin == params::Origin::default_value ||
                v->text().empty())
                continue;
            try {
                const bool include = name == std::string_view("btl_tcp_if_include");
                const params::Selection list = params::parse_selection(v->text(), {}, name);
                if (list.exclude || (!include && !if_include_.empty())) continue;
                // Checks every entry (throws for one that is no name nor block).
                btl::util::interface_selected("", include ? list.names : std::vector<std::string>{},
                                              include ? std::vector<std::string>{} : list.names);
                (include ? if_include_ : if_exclude_) = list.names;
                out_.verbose(10, "interfaces from {}={} ({})", name, v->text(),
                             v->source().describe());
            } catch (const std::exception& e) {
                out_.verbose(10, "{} not adopted: {}", name, e.what());
            }
        }
    }

    bool selected(const std::string& provider) const {
        if (selection_.use_include) return listed(selection_.include, provider);
        if (vader_selected_ && node_local(core_provider(provider))) return false;
        return !listed(selection_.exclude, provider);
    }

    // Where vader serves this node, libfabric's shared-memory providers would
    // only add a region per process (shm: 16 MiB in /dev/shm, named after the
    // pid, which a killed process leaves behind and nothing removes) and
    // never carry a message: vader's exclusivity is above theirs.
    bool vader_selected() const {
        try {
            return params::parse_selection(reg().get("btl").text(), {}, "btl").selects("vader");
        } catch (...) {
            return false;  // the framework reports a bad list
        }
    }

    // The first domain of each selected provider, in libfabric's order of preference.
    // `offered`, when given, receives every provider libfabric offers with what
    // the component needs, selected or not.
    std::vector<const fi_info*> choose(InfoList& infos, std::string& why,
                                       std::set<std::string>* offered = nullptr) const {
        std::vector<const fi_info*> out;
        fi_info* hints = libfabric().allocinfo();
        if (hints == nullptr) {
            why = "fi_allocinfo failed";
            return out;
        }
        hints->caps = FI_MSG | FI_RMA | FI_ATOMIC;
        hints->mode = FI_CONTEXT | FI_CONTEXT2;
        hints->ep_attr->type = FI_EP_RDM;
        hints->domain_attr->mr_mode =
            FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
        hints->domain_attr->threading = FI_THREAD_DOMAIN;
        hints->tx_attr->msg_order = FI_ORDER_SAS;
        hints->rx_attr->msg_order = FI_ORDER_SAS;
        const int rc =
            libfabric().getinfo(FI_VERSION(1, 10), nullptr, nullptr, 0, hints, &infos.head);
        libfabric().freeinfo(hints);
        if (rc != 0) {
            why = fmt::format(
                "libfabric offers no reliable-datagram provider with messages, "
                "RMA and atomics ({})",
                libfabric().strerror(-rc));
            return out;
        }
        std::set<std::string> seen, skipped;
        for (const fi_info* i = infos.head; i != nullptr; i = i->next) {
            const std::string prov = i->fabric_attr->prov_name;
            if (seen.count(prov)) continue;
            seen.insert(prov);
            if (!selected(prov)) {
                skipped.insert(prov);
            } else if (const fi_info* chosen = on_chosen_interface(infos, prov)) {
                out.push_back(chosen);
            }
        }
        if (offered != nullptr) *offered = seen;
        if (out.empty())
            why =
                fmt::format("no selected provider is available (available: {}; selection: {})",
                            fmt::join(seen, ", "),
                            selection_.use_include
                                ? "btl_ofi_provider_include=" +
                                      fmt::format("{}", fmt::join(selection_.include.names, ","))
                                : "btl_ofi_provider_exclude=" +
                                      fmt::format("{}", fmt::join(selection_.exclude.names, ",")));
        for (const std::string& p : skipped)
            out_.verbose(20, "provider {} not selected{}", p,
                         vader_selected_ && node_local(core_provider(p))
                             ? " (vader serves this node; btl_ofi_provider_include=shm to use it)"
                             : "");
        return out;
    }

    // tcp's domains are the host's interfaces, listed in libfabric's order,
    // which may put first one where no other node answers (a management
    // network on every node, not joined): the entry of the interface
    // btl::util::choose_interface picks (btl_ofi_if_include / _exclude, then
    // the interface of this node's hostname), in libfabric's order among its
    // address families.  Other providers: their first entry.  Null when the
    // interface lists leave none (said at verbose level).
    const fi_info* on_chosen_interface(const InfoList& infos, const std::string& prov) const {
        std::vector<const fi_info*> entries;
        for (const fi_info* i = infos.head; i != nullptr; i = i->next)
            if (prov == i->fabric_attr->prov_name) entries.push_back(i);
        const std::string core = core_provider(prov);
        if (core != "tcp" && core != "sockets" && core != "udp") return entries.front();
        std::vector<std::string> names;
        for (const fi_info* i : entries) {
            const std::string name = i->domain_attr->name ? i->domain_attr->name : "";
            if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
        }
        std::string why;
        const auto choice = btl::util::choose_interface(names, if_include_, if_exclude_, why);
        if (!choice) {
            out_.verbose(10, "{}: not used: {} (interfaces: {})", prov, why,
                         fmt::join(names, ", "));
            return nullptr;
        }
        const std::string& name = names[choice->index];
        out_.verbose(10, "{}: interface {} ({}; offered: {})", prov, name, choice->why,
                     fmt::join(names, ", "));
        for (const fi_info* i : entries)
            if (i->domain_attr->name && name == i->domain_attr->name) return i;
        return entries.front();
    }

    OfiConfig read_config() const {
        params::Registry& r = reg();
        OfiConfig c;
        params::bind(r, "btl", "ofi", ofi_params, c);
        // The registry checked each value against its declared range.
        btl::require_eager_fits(r, "ofi");
        return c;
    }

    params::Registry* registry_ = nullptr;
    log::Stream out_;
    ProviderSelection selection_;
    std::vector<std::string> if_include_;  // btl_ofi_if_include / _exclude, split
    std::vector<std::string> if_exclude_;
    bool vader_selected_ = false;
};

}  // namespace
}  // namespace transit::ofi

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_ofi_component =
    transit::mca::make_descriptor<transit::ofi::OfiComponent>("btl", transit::btl_interface_version,
                                                              "ofi", {1, 0, 0});
