// btl/uct: the component.  Lists UCX's transports (every memory domain of every
// UCT component, and the transports on its devices), keeps those chosen by
// btl_uct_transports that can carry active messages and connect to a peer's
// interface, opens one module for each and publishes each interface's address
// through the modex.
#include <fmt/format.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transit/btl/base_params.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/join_timeout.hpp"
#include "transit/btl/util/module_opener.hpp"
#include "transit/btl/util/network_interface.hpp"
#include "transit/keep_loaded.hpp"
#include "transit/params_bind.hpp"
#include "transit/version.hpp"
#include "uct_module.hpp"
#include "ucx_log.hpp"

namespace transit::uct {
namespace {

using params::Type;

constexpr params::Field<UctConfig> uct_params[] = {
    params::to<&UctConfig::transports>(params::Decl{
        "transports", Type::string, "",
        "UCT transports to open, one module each: a list of transport names (posix, sysv, tcp, "
        "self, ...) or transport/device (tcp/eth0), or an exclusion list starting with '^' "
        "(^sysv). Empty: one shared-memory transport (posix, else sysv, else another) and every "
        "network transport, on its first non-loopback device. Transports that cannot carry "
        "active messages or connect to a peer's interface (cma, rc_verbs) are never opened",
        1}),
    btl::inherit<UctConfig>(
        btl::BaseParam::eager_limit,
        {.default_value = "4k",
         .help = "Largest message sent eagerly, the pml's header included. Over UCT's tcp, "
                 "left at its default: 65600 (64 KiB of payload), in segments the module widens "
                 "to 66 KiB unless UCX_TCP_TX_SEG_SIZE or UCX_TCP_RX_SEG_SIZE is set"}),
    btl::inherit<UctConfig>(
        btl::BaseParam::max_send_size,
        {.default_value = "0",
         .help = "Largest fragment; 0: what one buffered active message of the transport "
                 "carries (about 8 KiB for posix, sysv and tcp). Must be the same in every "
                 "process",
         .min = 0}),
    btl::inherit<UctConfig>(
        btl::BaseParam::free_list_max,
        {.default_value = "128",
         .help = "Send fragments per module; an empty pool makes alloc report out-of-resource"}),
    params::to<&UctConfig::recv_ring>(
        params::Decl{"recv_ring", Type::unsigned_integer, "256",
                     "Receive slots per module (received messages wait there until UCT's progress "
                     "returns); the ring doubles when a burst fills it",
                     6}
            .range(1, 1 << 16)),
    params::to<&UctConfig::max_rdma_ops>(
        params::Decl{"max_rdma_ops", Type::unsigned_integer, "256",
                     "Put, get and atomic operations in flight per module before they report "
                     "out-of-resource",
                     6}
            .range(1, 1 << 20)),
    btl::inherit<UctConfig>(
        btl::BaseParam::exclusivity,
        {.default_value = "32768",
         .help = "Priority against other transports; left at its default, from the device type "
                 "(shared memory 32768, below vader; tcp 256, above the tcp btl; other networks "
                 "1024)"}),
    btl::inherit<UctConfig>(btl::BaseParam::latency,
                            {.default_value = "0",
                             .help = "Relative latency, lower is preferred; 0: UCT's latency plus "
                                     "overhead in units of 0.5 us"}),
    btl::inherit<UctConfig>(
        btl::BaseParam::bandwidth,
        {.default_value = "0", .help = "Bandwidth in MB/s; 0: what UCT reports"}),
    params::to<&UctConfig::rdma>(rdma_params[0]),
    params::to<&UctConfig::rdma_min_size>(rdma_params[1]),
    params::to<&UctConfig::join_timeout>(btl::join_timeout_decl),
};

// The exclusivity default above is spelled out; keep it equal to the module's.
static_assert(shm_exclusivity == 32768);

// Preference among shared-memory transports when the list is empty.
int shm_rank(const std::string& tl) {
    if (tl == "posix") return 0;
    if (tl == "sysv") return 1;
    return 2;
}

bool loopback_device(const std::string& dev) {
    return dev == "lo" || dev.rfind("lo:", 0) == 0;
}

// UCX's libraries are not made to be unloaded: their constructors set up
// global state (configuration tables, loaded transport modules) that their
// destructors do not undo.  Once this plugin has loaded them they stay until
// the process exits (see mca::keep_loaded).
constexpr const char* ucx_libraries[] = {"libuct.so.0", "libucs.so.0", "libucm.so.0"};
[[maybe_unused]] const std::size_t ucx_pinned = mca::keep_loaded(ucx_libraries);

class UctComponent final : public btl::Component {
  public:
    void register_params(params::Registry& registry) override {
        registry_ = &registry;
        params::add_all(registry, "btl", "uct", uct_params);
    }

    mca::OpenResult open() override {
        out_ = log::Stream("btl:uct", btl::base_verbosity(reg()));
        select(read_config());  // a mistyped transport list fails here, device or not
        return mca::OpenResult::ok();
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override {
        std::vector<std::unique_ptr<btl::Module>> modules;
        // Read again: a program (or the conformance suite) may set them after open.
        const UctConfig config = read_config();
        select(config);
        // Before any interface opens: UCX logs as soon as a peer is lost.
        if (!quiet_log_) {
            quiet_log_.emplace();
            if (!quiet_log_->replaced().empty())
                out_.verbose(10,
                             "UCX's log level lowered from '{}' to 'fatal' (UCX_LOG_LEVEL "
                             "keeps the user's)",
                             quiet_log_->replaced());
        }
        std::vector<Resource> all;
        std::string why;
        if (!discover(all, why)) {
            decline_reason_ = why;
            return modules;
        }
        const std::vector<Resource> chosen = choose(all, why);
        if (chosen.empty()) {
            decline_reason_ = why;
            return modules;
        }
        auto regions = std::make_shared<Regions>();
        btl::util::ModuleOpener opener(ctx.runtime, out_);
        for (const Resource& res : chosen) {
            const UctModule* m = opener.open(modules, res.name(), [&] {
                return std::make_unique<UctModule>(*this, res, config, ctx.runtime, ctx.progress,
                                                   ctx.am_table, regions, out_);
            });
            if (m == nullptr) continue;
            const btl::Attributes& a = m->attributes();
            out_.verbose(10,
                         "{}: exclusivity {}, latency {}, bandwidth {} MB/s, max send {}, "
                         "eager limit {}",
                         m->name(), a.exclusivity, a.latency, a.bandwidth, a.max_send_size,
                         a.eager_limit);
        }
        if (modules.empty())
            decline_reason_ = opener.none_opened("no UCT transport could be opened");
        return modules;
    }

    // Starting UCX costs a shared-memory region and more per process: it is
    // started only when a peer may need it, peers outside the job included
    // (flags::dynamic_peers: a listening singleton under btl=self,uct).
    std::optional<btl::Prospect> prospect() const override {
        // Left at its default, the exclusivity is shm_exclusivity, the highest a
        // module of this component takes.
        return btl::Prospect{btl::reach::any, read_config().exclusivity,
                             btl::flags::send | btl::flags::one_sided | btl::flags::dynamic_peers};
    }

    // transit_info --devices: every transport on every device UCX lists, and
    // what the choice at init would make of it.  A transport chosen here may
    // still be refused when its interface opens (the reason is then logged).
    void describe_devices(mca::DeviceReport& report) const {
        std::vector<Resource> all;
        std::string why;
        if (!discover(all, why)) {
            report.notes.push_back(why);
            return;
        }
        LeftOut left_out;
        const std::vector<Resource> chosen = choose(all, why, &left_out);
        if (chosen.empty()) report.notes.push_back(why);
        for (const Resource& r : all) {
            const bool used = std::any_of(chosen.begin(), chosen.end(),
                                          [&](const Resource& c) { return c.name() == r.name(); });
            const auto reason = left_out.find(r.name());
            report.devices.push_back({"transport", r.name(), used,
                                      used ? fmt::format("{} device, memory domain {}",
                                                         device_type(r.dev_type), r.md_name)
                                      : reason != left_out.end() ? reason->second
                                                                 : std::string("not chosen")});
        }
    }

  private:
    params::Registry& reg() const { return registry_ ? *registry_ : params::registry(); }

    static const char* device_type(uct_device_type_t t) {
        switch (t) {
            case UCT_DEVICE_TYPE_NET:
                return "network";
            case UCT_DEVICE_TYPE_SHM:
                return "shared-memory";
            case UCT_DEVICE_TYPE_SELF:
                return "loopback";
            default:
                return "accelerator";
        }
    }

    // Every transport on every device of every memory domain.
    bool discover(std::vector<Resource>& out, std::string& why) const {
        uct_component_h* components = nullptr;
        unsigned count = 0;
        if (ucs_status_t s = uct_query_components(&components, &count); s != UCS_OK) {
            why = fmt::format("uct_query_components failed: {}", ucs_status_string(s));
            return false;
        }
        for (unsigned c = 0; c < count; ++c) {
            uct_component_attr_t attr{};
            attr.field_mask =
                UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
            if (uct_component_query(components[c], &attr) != UCS_OK) continue;
            std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
            attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
            attr.md_resources = mds.data();
            if (mds.empty() || uct_component_query(components[c], &attr) != UCS_OK) continue;
            for (const uct_md_resource_desc_t& md_desc : mds) {
                uct_md_config_t* config = nullptr;
                if (uct_md_config_read(components[c], nullptr, nullptr, &config) != UCS_OK)
                    continue;
                uct_md_h md = nullptr;
                const ucs_status_t s = uct_md_open(components[c], md_desc.md_name, config, &md);
                uct_config_release(config);
                if (s != UCS_OK) {
                    out_.verbose(20, "memory domain {}: {}", md_desc.md_name, ucs_status_string(s));
                    continue;
                }
                uct_tl_resource_desc_t* tls = nullptr;
                unsigned n = 0;
                if (uct_md_query_tl_resources(md, &tls, &n) == UCS_OK) {
                    for (unsigned i = 0; i < n; ++i) {
                        Resource r;
                        r.component = components[c];
                        r.md_name = md_desc.md_name;
                        r.tl_name = tls[i].tl_name;
                        r.dev_name = tls[i].dev_name;
                        r.dev_type = tls[i].dev_type;
                        out.push_back(std::move(r));
                    }
                    uct_release_tl_resource_list(tls);
                }
                uct_md_close(md);
            }
        }
        uct_release_component_list(components);
        if (out.empty()) {
            why = "UCX lists no transport on this machine";
            return false;
        }
        return true;
    }

    // A list entry names a transport ("tcp") or a transport on a device ("tcp/lo").
    static bool listed(const params::Selection& s, const Resource& r, bool& by_device) {
        by_device = false;
        for (const std::string& n : s.names) {
            if (n == r.name()) {
                by_device = true;
                return true;
            }
            if (n == r.tl_name) return true;
        }
        return false;
    }

    // Resource name -> why choose() left it out, for transit_info --devices.
    using LeftOut = std::map<std::string, std::string>;

    std::vector<Resource> choose(const std::vector<Resource>& all, std::string& why,
                                 LeftOut* left_out = nullptr) const {
        auto leave = [&](const Resource& r, std::string reason) {
            if (left_out != nullptr) (*left_out)[r.name()] = std::move(reason);
        };
        std::vector<Resource> out;
        std::set<std::string> available;
        for (const Resource& r : all) available.insert(r.name());
        const bool automatic = selection_.empty();
        const bool include = !automatic && !selection_.exclude;
        // Candidates: named ones (all devices named explicitly, else one per
        // transport), or, automatically, everything but self and loopback tcp.
        std::vector<const Resource*> candidates;
        for (const Resource& r : all) {
            bool by_device = false;
            const bool named = !automatic && listed(selection_, r, by_device);
            if (include && !named) {
                leave(r, fmt::format("not in btl_uct_transports={}", transports_));
                continue;
            }
            if (!include && named) {
                leave(r, fmt::format("excluded by btl_uct_transports={}", transports_));
                continue;
            }
            if (!include && r.dev_type == UCT_DEVICE_TYPE_SELF) {
                leave(r, "Transit's btl/self serves the process itself");
                continue;
            }
            if (!by_device && std::any_of(candidates.begin(), candidates.end(), [&](auto* c) {
                    return c->tl_name == r.tl_name && c->component == r.component;
                })) {
                // One device per transport: a non-loopback one replaces loopback.
                bool replaced = false;
                for (auto*& c : candidates)
                    if (c->tl_name == r.tl_name && loopback_device(c->dev_name) &&
                        !loopback_device(r.dev_name)) {
                        leave(*c, fmt::format("one device per transport: {} is not loopback",
                                              r.name()));
                        c = &r;
                        replaced = true;
                    }
                if (!replaced)
                    leave(r, "one device per transport: another device of " + r.tl_name +
                                 " is used (name tl/device in btl_uct_transports for more)");
                continue;
            }
            candidates.push_back(&r);
        }
        // Transports UCT cannot use as a btl are known only once opened (the
        // module refuses them); the automatic choice keeps one shared-memory
        // transport, by preference.
        if (automatic) {
            for (const Resource*& c : candidates)
                if (c->dev_type == UCT_DEVICE_TYPE_NET) c = on_chosen_interface(all, *c);
            const Resource* best_shm = nullptr;
            for (const Resource* c : candidates) {
                if (c->dev_type != UCT_DEVICE_TYPE_SHM || !carries_messages(*c)) continue;
                if (best_shm == nullptr || shm_rank(c->tl_name) < shm_rank(best_shm->tl_name))
                    best_shm = c;
            }
            for (const Resource* c : candidates) {
                if (c->dev_type == UCT_DEVICE_TYPE_SHM && c != best_shm) {
                    leave(*c, !carries_messages(*c)
                                  ? std::string("moves data only for another transport (no "
                                                "active messages)")
                                  : fmt::format("one shared-memory transport: {} is preferred",
                                                best_shm->name()));
                    continue;
                }
                out.push_back(*c);
            }
        } else {
            for (const Resource* c : candidates) out.push_back(*c);
        }
        // Shared memory first: it is the one the bml prefers for a local peer.
        std::stable_partition(out.begin(), out.end(),
                              [](const Resource& r) { return r.dev_type != UCT_DEVICE_TYPE_NET; });
        if (out.empty())
            why = fmt::format(
                "no selected UCT transport is available (available: {}; "
                "btl_uct_transports={})",
                fmt::join(available, ", "), automatic ? "\"\"" : transports_);
        return out;
    }

    // A network transport's devices are the host's interfaces, in UCX's
    // order, which may put first one where no other node answers (a
    // management network on every node, not joined): chosen automatically, the
    // device btl::util::choose_interface picks (the interface of this node's
    // hostname), else UCX's first non-loopback one.  btl_uct_transports=tcp/eth0
    // names one instead.
    const Resource* on_chosen_interface(const std::vector<Resource>& all,
                                        const Resource& first) const {
        std::vector<const Resource*> devices;
        std::vector<std::string> names;
        for (const Resource& r : all)
            if (r.tl_name == first.tl_name && r.component == first.component &&
                !loopback_device(r.dev_name)) {
                devices.push_back(&r);
                names.push_back(r.dev_name);
            }
        if (devices.size() < 2) return &first;
        std::string why;
        const auto choice = btl::util::choose_interface(names, {}, {}, why);
        if (!choice) return &first;
        out_.verbose(10, "{}: device {} ({}; offered: {})", first.tl_name, names[choice->index],
                     choice->why, fmt::join(names, ", "));
        return devices[choice->index];
    }

    // Shared-memory transports without active messages (cma, knem, xpmem)
    // only move data for another transport.
    static bool carries_messages(const Resource& r) {
        return r.tl_name != "cma" && r.tl_name != "knem" && r.tl_name != "xpmem";
    }

    UctConfig read_config() const {
        params::Registry& r = reg();
        UctConfig c;
        params::bind(r, "btl", "uct", uct_params, c);
        // The registry checked each value against its declared range.
        if (c.max_send_size != 0)  // 0: the transport's own limit, known once opened
            btl::require_eager_fits(r, "uct");
        return c;
    }

    void select(const UctConfig& c) {
        selection_ = params::parse_selection(c.transports, {}, "btl_uct_transports");
        transports_ = c.transports;
    }

    params::Registry* registry_ = nullptr;
    log::Stream out_;
    std::optional<QuietUcxLog> quiet_log_;
    params::Selection selection_;
    std::string transports_;  // as set, for messages
};

}  // namespace
}  // namespace transit::uct

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_uct_component =
    transit::mca::make_descriptor<transit::uct::UctComponent>("btl", transit::btl_interface_version,
                                                              "uct", {1, 0, 0});
