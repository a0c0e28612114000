// btl/uct: the component.  Lists UCX's transports (every memory domain of every
// UCT component, and the transports on its devices), keeps those chosen by
// btl_uct_transports that can carry active messages and connect to a peer's
// interface, opens one module for each and publishes each interface's address
// through the modex.
#include <fmt/format.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "transit/btl/component.hpp"
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
    params::to<&UctConfig::eager_limit>(params::Decl{
        "eager_limit", Type::size, "4k", "Largest message the upper layer sends eagerly", 4}
                                            .at_least(1)),
    params::to<&UctConfig::max_send_size>(
        params::Decl{"max_send_size", Type::size, "0",
                     "Largest fragment; 0: what one buffered active message of the transport "
                     "carries (about 8 KiB for posix, sysv and tcp). Must be the same in every "
                     "process",
                     4}
            .range(0, 1 << 30)),
    params::to<&UctConfig::free_list_max>(params::Decl{
        "free_list_max", Type::unsigned_integer, "128",
        "Send fragments per module; an empty pool makes alloc report out-of-resource", 6}
                                              .range(1, 1 << 20)),
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
    params::to<&UctConfig::exclusivity>(
        params::Decl{"exclusivity", Type::integer, "-1",
                     "Priority against other transports; -1: from the device type (shared memory "
                     "32768, below vader; tcp 256, above the tcp btl; other networks 1024)",
                     7}
            .range(-1, UINT32_MAX)),
    params::to<&UctConfig::latency>(params::Decl{
        "latency", Type::integer, "-1",
        "Relative latency, lower is preferred; -1: UCT's latency plus overhead in units "
        "of 0.5 us",
        7}
                                        .range(-1, UINT32_MAX)),
    params::to<&UctConfig::bandwidth>(
        params::Decl{"bandwidth", Type::integer, "-1", "Bandwidth in MB/s; -1: what UCT reports", 7}
            .range(-1, UINT32_MAX)),
};

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
        registry.add_all("btl", "uct", rdma_params);
    }

    mca::OpenResult open() override {
        params::Registry& r = reg();
        int verbosity = 0;
        if (params::Variable* v = r.find("btl_base_verbose"))
            verbosity = static_cast<int>(v->as_int());
        out_ = log::Stream("btl:uct", verbosity);
        selection_ = params::parse_selection(r.get("btl_uct_transports").as_string(), {},
                                             "btl_uct_transports");
        return mca::OpenResult::ok();
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override {
        std::vector<std::unique_ptr<btl::Module>> modules;
        // Read again: a program (or the conformance suite) may set them after open.
        selection_ = params::parse_selection(reg().get("btl_uct_transports").as_string(), {},
                                             "btl_uct_transports");
        const UctConfig config = read_config();
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
        std::vector<std::string> failures;
        auto regions = std::make_shared<Regions>();
        for (const Resource& res : chosen) {
            std::unique_ptr<UctModule> m;
            try {
                m = std::make_unique<UctModule>(*this, res, config, ctx.runtime, ctx.progress,
                                                ctx.am_table, regions, out_);
            } catch (const std::exception& e) {
                failures.push_back(fmt::format("{}: {}", res.name(), e.what()));
                out_.verbose(1, "{} not used: {}", res.name(), e.what());
                continue;
            }
            const Status s = ctx.runtime.modex_send(m->modex_key(), m->address());
            if (!ok(s)) {
                failures.push_back(
                    fmt::format("{}: publishing the address failed: {}", res.name(), to_string(s)));
                continue;
            }
            const btl::Attributes& a = m->attributes();
            out_.verbose(10, "{}: exclusivity {}, latency {}, bandwidth {} MB/s, max send {}",
                         m->name(), a.exclusivity, a.latency, a.bandwidth, a.max_send_size);
            modules.push_back(std::move(m));
        }
        if (modules.empty())
            decline_reason_ =
                fmt::format("no UCT transport could be opened ({})", fmt::join(failures, "; "));
        return modules;
    }

    // Starting UCX costs a shared-memory region and more per process: it is
    // started only when a peer may need it.
    std::optional<btl::Prospect> prospect() const override {
        const std::int64_t excl = reg().get("btl_uct_exclusivity").as_int();
        return btl::Prospect{btl::reach::any,
                             excl >= 0 ? static_cast<std::uint32_t>(excl) : shm_exclusivity,
                             btl::flags::send | btl::flags::one_sided};
    }

  private:
    params::Registry& reg() const { return registry_ ? *registry_ : params::registry(); }

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

    std::vector<Resource> choose(const std::vector<Resource>& all, std::string& why) const {
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
            if (include && !named) continue;
            if (!include && named) continue;  // excluded
            if (!include && r.dev_type == UCT_DEVICE_TYPE_SELF) continue;
            if (!by_device && std::any_of(candidates.begin(), candidates.end(), [&](auto* c) {
                    return c->tl_name == r.tl_name && c->component == r.component;
                })) {
                // One device per transport: a non-loopback one replaces loopback.
                for (auto*& c : candidates)
                    if (c->tl_name == r.tl_name && loopback_device(c->dev_name) &&
                        !loopback_device(r.dev_name))
                        c = &r;
                continue;
            }
            candidates.push_back(&r);
        }
        // Transports UCT cannot use as a btl are known only once opened (the
        // module refuses them); the automatic choice keeps one shared-memory
        // transport, by preference.
        if (automatic) {
            const Resource* best_shm = nullptr;
            for (const Resource* c : candidates) {
                if (c->dev_type != UCT_DEVICE_TYPE_SHM || !carries_messages(*c)) continue;
                if (best_shm == nullptr || shm_rank(c->tl_name) < shm_rank(best_shm->tl_name))
                    best_shm = c;
            }
            for (const Resource* c : candidates) {
                if (c->dev_type == UCT_DEVICE_TYPE_SHM && c != best_shm) continue;
                out.push_back(*c);
            }
        } else {
            for (const Resource* c : candidates) out.push_back(*c);
        }
        // posix and sysv cannot register memory for put/get; cma beside them can.
        const auto cma = std::find_if(all.begin(), all.end(),
                                      [](const Resource& r) { return r.tl_name == "cma"; });
        if (cma != all.end()) {
            for (Resource& r : out) {
                if (r.dev_type != UCT_DEVICE_TYPE_SHM || r.tl_name == "cma") continue;
                r.rdma_component = cma->component;
                r.rdma_md_name = cma->md_name;
                r.rdma_dev_name = cma->dev_name;
            }
        }
        // Shared memory first: it is the one the bml prefers for a local peer.
        std::stable_partition(out.begin(), out.end(),
                              [](const Resource& r) { return r.dev_type != UCT_DEVICE_TYPE_NET; });
        if (out.empty())
            why = fmt::format(
                "no selected UCT transport is available (available: {}; "
                "btl_uct_transports={})",
                fmt::join(available, ", "),
                automatic ? "\"\"" : reg().get("btl_uct_transports").text());
        return out;
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
        // The registry accepts only the declared choices.
        c.rdma = parse_rdma_mode(r.get("btl_uct_rdma").as_string()).value_or(RdmaMode::automatic);
        c.rdma_min_size = r.get("btl_uct_rdma_min_size").as_unsigned();
        // The registry checked each value against its declared range.
        if (c.max_send_size != 0)  // 0: the transport's own limit, known once opened
            params::require_at_most(r.get("btl_uct_eager_limit"), r.get("btl_uct_max_send_size"));
        return c;
    }

    params::Registry* registry_ = nullptr;
    log::Stream out_;
    std::optional<QuietUcxLog> quiet_log_;
    params::Selection selection_;
};

}  // namespace
}  // namespace transit::uct

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_uct_component =
    transit::mca::make_descriptor<transit::uct::UctComponent>("btl", transit::btl_interface_version,
                                                              "uct", {1, 0, 0});
