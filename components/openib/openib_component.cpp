// btl/openib: the component.  Registers the parameters, finds the devices
// through rdma-core (ibv_get_device_list), and creates one module per active
// port that the interface selection keeps.  With no device it declines with
// one line, printed only at btl_base_verbose >= 1 and by transit_info: a
// machine without InfiniBand is normal, not worth a warning.
#include <fmt/format.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "openib_ifsel.hpp"
#include "openib_module.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/util/memory_release_monitor.hpp"
#include "transit/params_bind.hpp"
#include "transit/version.hpp"

namespace transit::openib {
namespace {

using params::Type;

// The btl_openib_* values: the module's Config and what selects the ports.
struct OpenibParams : Config {
    std::string if_include;
    std::string if_exclude;
    bool prefer_closest = true;
};

constexpr params::Field<OpenibParams> openib_params[] = {
    params::to<&OpenibParams::if_include, OpenibParams>(params::Decl{
        "if_include", Type::string, "",
        "Devices or ports to use, comma separated: DEVICE (every port) or DEVICE:PORT, e.g. "
        "\"mlx5_0,mlx5_1:2\"; empty: all.  Cannot be combined with btl_openib_if_exclude",
        2}),
    params::to<&OpenibParams::if_exclude, OpenibParams>(
        params::Decl{"if_exclude", Type::string, "",
                     "Devices or ports not to use (same form as btl_openib_if_include)", 2}),
    params::to<&OpenibParams::prefer_closest, OpenibParams>(params::Decl{
        "prefer_closest", Type::boolean, "true",
        "Without btl_openib_if_include, use only the devices nearest (NUMA distance) to the "
        "process",
        4}),
    btl::inherit<OpenibParams>(btl::BaseParam::eager_limit, {.default_value = "12k"}),
    btl::inherit<OpenibParams>(
        btl::BaseParam::max_send_size,
        {.default_value = "16k",
         .help =
             "Largest fragment, and the size of every receive buffer of the shared receive queue",
         .min = 64}),
    btl::inherit<OpenibParams>(
        btl::BaseParam::free_list_max,
        {.default_value = "1024",
         .help = "Send fragments and RDMA operation slots per module (each); allocated at init"}),
    params::to<&OpenibParams::srq_size, OpenibParams>(params::Decl{
        "srq_size", Type::unsigned_integer, "1024",
        "Most receive buffers the shared receive queue holds; bounds the credits granted to all "
        "peers together",
        5}
                                                          .range(2, 1 << 22)),
    params::to<&OpenibParams::srq_initial, OpenibParams>(
        params::Decl{"srq_initial", Type::unsigned_integer, "256",
                     "Receive buffers posted at init; more are added as peers connect", 6}
            .at_least(1)),
    params::to<&OpenibParams::credits_per_peer, OpenibParams>(
        params::Decl{"credits_per_peer", Type::unsigned_integer, "32",
                     "Data credits (receive buffers) granted to each connected peer", 5}
            .range(1, 65535)),
    params::to<&OpenibParams::sq_depth, OpenibParams>(params::Decl{
        "sq_depth", Type::unsigned_integer, "128", "Send work requests per queue pair", 6}
                                                          .range(2, 1 << 16)),
    params::to<&OpenibParams::send_cq_size, OpenibParams>(params::Decl{
        "send_cq_size", Type::unsigned_integer, "4096",
        "Entries of the send completion queue; bounds the work in flight per module", 6}
                                                              .range(16, 1 << 22)),
    params::to<&OpenibParams::max_inline, OpenibParams>(params::Decl{
        "max_inline", Type::unsigned_integer, "64",
        "Largest send (header included) the HCA copies at post time instead of reading it by DMA",
        6}
                                                            .range(wire::FragHeader::size, 1024)),
    params::to<&OpenibParams::rcache_max_unused, OpenibParams>(params::Decl{
        "rcache_max_unused", Type::unsigned_integer, "0",
        "Released memory registrations kept for reuse (least recently used first out).  0: a "
        "registration ends with its last release.  Kept only while btl_openib_rcache_monitor "
        "follows released memory, so memory freed and mapped again is never reached through "
        "a registration of the old pages",
        7}
                                                                   .range(0, 1 << 20)),
    params::to<&OpenibParams::rcache_monitor, OpenibParams>(params::Decl{
        "rcache_monitor", Type::boolean, "true", btl::util::release_monitor_param_help, 7}),
    params::to<&OpenibParams::connect_retry_ms, OpenibParams>(
        params::Decl{"connect_retry_interval", Type::unsigned_integer, "100",
                     "Milliseconds before a connection request or reply is resent", 6}
            .range(1, 60000)),
    params::to<&OpenibParams::connect_retries, OpenibParams>(
        params::Decl{"connect_retries", Type::unsigned_integer, "50",
                     "Resends before a connection attempt fails and the error callback fires", 6}
            .range(0, 100000)),
    params::to<&OpenibParams::qp_timeout, OpenibParams>(params::Decl{
        "qp_timeout", Type::unsigned_integer, "20",
        "Transport timeout of the queue pairs: 4.096 us * 2^value per retry (1..31)", 7}
                                                            .range(1, 31)),
    params::to<&OpenibParams::qp_retry_count, OpenibParams>(
        params::Decl{"qp_retry_count", Type::unsigned_integer, "7",
                     "Transport retries before a send to an unresponsive peer fails (0..7)", 7}
            .range(0, 7)),
    params::to<&OpenibParams::rnr_retry, OpenibParams>(
        params::Decl{"rnr_retry", Type::unsigned_integer, "7",
                     "Receiver-not-ready retries (0..7; 7 retries forever)", 7}
            .range(0, 7)),
    params::to<&OpenibParams::service_level, OpenibParams>(params::Decl{
        "service_level", Type::unsigned_integer, "0", "InfiniBand service level (0..15)", 7}
                                                               .range(0, 15)),
    params::to<&OpenibParams::traffic_class, OpenibParams>(params::Decl{
        "traffic_class", Type::unsigned_integer, "0", "Traffic class of routed (GRH) packets", 7}
                                                               .range(0, 255)),
    params::to<&OpenibParams::pkey_index, OpenibParams>(
        params::Decl{"pkey_index", Type::unsigned_integer, "0", "Partition key index", 7}.range(
            0, 65535)),
    params::to<&OpenibParams::gid_index, OpenibParams>(params::Decl{
        "gid_index", Type::integer, "-1",
        "GID table index of the local port; -1 chooses (RoCE v2 first, else index 0)", 6}
                                                           .range(-1, 255)),
    params::to<&OpenibParams::atomics, OpenibParams>(params::Decl{
        "atomics", Type::enumeration, "auto",
        "How atomics run.  auto: the device's fetch-add and compare-swap when they are coherent "
        "with CPU atomics (IBV_ATOMIC_GLOB), every other op (and all ops on other devices) "
        "performed by the target; hardware: only fetch-add and compare-swap, always by the "
        "device; emulated: every op performed by the target",
        6, "auto,hardware,emulated"}),
    btl::inherit<OpenibParams>(
        btl::BaseParam::exclusivity,
        {.default_value = "1024",
         .help = "Priority of openib among the transports that reach a peer (highest wins)"}),
    btl::inherit<OpenibParams>(
        btl::BaseParam::latency,
        {.default_value = "10", .help = "Relative latency (lower is preferred)"}),
    btl::inherit<OpenibParams>(btl::BaseParam::bandwidth,
                               {.default_value = "0",
                                .help = "Bandwidth in MB/s for striping weights; 0 computes it "
                                        "from the port's speed and width"}),
};

struct Settings {
    Config config;
    IfFilter filter;
    bool prefer_closest = true;
};

Settings read_settings(params::Registry& r) {
    // The registry checked every value against its declared range, so each
    // fits its field; only the limits that must nest are left.
    btl::require_eager_fits(r, "openib");
    params::require_at_most(
        params::variable_of<&OpenibParams::srq_initial>(r, "btl", "openib", openib_params),
        params::variable_of<&OpenibParams::srq_size>(r, "btl", "openib", openib_params));
    OpenibParams p;
    params::bind(r, "btl", "openib", openib_params, p);
    Settings s;
    s.config = static_cast<const Config&>(p);
    s.filter = parse_if_filter(p.if_include, p.if_exclude);
    s.prefer_closest = p.prefer_closest;
    return s;
}

// "0000:3b:00.0" from sysfs, or "" (then the distance is unknown).
std::string pci_bus_id(const char* device_name) {
    std::error_code ec;
    auto p = std::filesystem::canonical(
        std::filesystem::path("/sys/class/infiniband") / device_name / "device", ec);
    return ec ? std::string() : p.filename().string();
}

const char* port_state(ibv_port_state s) {
    return ibv_port_state_str(s);
}

class OpenibComponent final : public btl::Component {
  public:
    void register_params(params::Registry& registry) override {
        registry_ = &registry;
        params::add_all(registry, "btl", "openib", openib_params);
        // A mistyped value stops the program here, device or not.
        (void)read_settings(registry);
    }

    mca::OpenResult open() override {
        int n = 0;
        errno = 0;
        verbs::DeviceList list(ibv_get_device_list(&n));
        if (!list) {
            // ENOSYS: the kernel has no RDMA support at all (no ib_uverbs).
            return mca::OpenResult::decline(
                errno == ENOSYS || errno == 0
                    ? std::string("no InfiniBand/RoCE device found (ibv_get_device_list returned "
                                  "0 devices: the kernel has no RDMA support)")
                    : fmt::format("no InfiniBand/RoCE device found (ibv_get_device_list failed: "
                                  "{})",
                                  std::strerror(errno)));
        }
        if (n == 0)
            return mca::OpenResult::decline(
                "no InfiniBand/RoCE device found (ibv_get_device_list returned 0 devices)");
        return mca::OpenResult::ok();
    }

    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext& ctx) override;
    // transit_info --devices: every port of every device, the ones init would
    // use and why each other one is left out (state, btl_openib_if_include /
    // btl_openib_if_exclude).  Closeness to the process (btl_openib_prefer_closest)
    // needs the job's placement, known at init only.
    void describe_devices(mca::DeviceReport& report) const;

  private:
    params::Registry& reg() const { return registry_ ? *registry_ : params::registry(); }

    params::Registry* registry_ = nullptr;
};

struct Candidate {
    std::shared_ptr<Device> device;
    std::uint8_t port;
    ibv_port_attr attr;
};

void OpenibComponent::describe_devices(mca::DeviceReport& report) const {
    const Settings s = read_settings(reg());
    int n = 0;
    verbs::DeviceList list(ibv_get_device_list(&n));
    if (!list || n == 0) {
        report.notes.emplace_back("no InfiniBand/RoCE device");
        return;
    }
    struct Port {
        std::string name;
        std::string what;  // link layer and LID, for a used port
    };
    std::vector<Port> active;
    std::vector<PortCandidate> described;
    for (int i = 0; i < n; ++i) {
        ibv_device* d = list.get()[i];
        const char* dname = ibv_get_device_name(d);
        verbs::Context context(ibv_open_device(d));
        ibv_device_attr attr{};
        if (!context) {
            report.devices.push_back(
                {"device", dname, false, fmt::format("cannot open: {}", std::strerror(errno))});
            continue;
        }
        if (int rc = ibv_query_device(context.get(), &attr)) {
            report.devices.push_back(
                {"device", dname, false, fmt::format("ibv_query_device: {}", std::strerror(rc))});
            continue;
        }
        for (int p = 1; p <= attr.phys_port_cnt; ++p) {
            const std::string id = fmt::format("{}:{}", dname, p);
            ibv_port_attr pa{};
            if (int rc = ibv_query_port(context.get(), static_cast<std::uint8_t>(p), &pa)) {
                report.devices.push_back(
                    {"port", id, false, fmt::format("ibv_query_port: {}", std::strerror(rc))});
                continue;
            }
            if (pa.state != IBV_PORT_ACTIVE) {
                report.devices.push_back({"port", id, false, port_state(pa.state)});
                continue;
            }
            active.push_back({id, pa.link_layer == IBV_LINK_LAYER_ETHERNET
                                      ? std::string("RoCE")
                                      : fmt::format("InfiniBand, LID {}", pa.lid)});
            described.push_back({dname, static_cast<std::uint32_t>(p), -1});
        }
    }
    const IfSelectionResult sel = select_ports(described, s.filter, false);
    for (std::size_t i = 0; i < active.size(); ++i)
        report.devices.push_back({"port", active[i].name, sel.verdicts[i].use,
                                  sel.verdicts[i].use ? active[i].what : sel.verdicts[i].reason});
    for (const std::string& u : sel.unmatched)
        report.notes.push_back("btl_openib_if_include names " + u +
                               ", which is not an active port here");
}

std::vector<std::unique_ptr<btl::Module>> OpenibComponent::init(btl::InitContext& ctx) {
    std::vector<std::unique_ptr<btl::Module>> out;
    const Settings s = read_settings(reg());
    log::Stream log("btl:openib", btl::base_verbosity(reg()));

    int n = 0;
    verbs::DeviceList list(ibv_get_device_list(&n));
    if (!list || n == 0) {
        decline_reason_ =
            "no InfiniBand/RoCE device found (ibv_get_device_list returned 0 devices)";
        return out;
    }
    std::vector<Candidate> candidates;
    std::vector<PortCandidate> described;
    std::vector<std::string> problems;
    for (int i = 0; i < n; ++i) {
        ibv_device* d = list.get()[i];
        const char* dname = ibv_get_device_name(d);
        verbs::Context context(ibv_open_device(d));
        if (!context) {
            problems.push_back(fmt::format("{}: cannot open ({})", dname, std::strerror(errno)));
            continue;
        }
        ibv_device_attr attr{};
        if (int rc = ibv_query_device(context.get(), &attr)) {
            problems.push_back(fmt::format("{}: ibv_query_device: {}", dname, std::strerror(rc)));
            continue;
        }
        verbs::ProtectionDomain pd(ibv_alloc_pd(context.get()));
        if (!pd) {
            problems.push_back(fmt::format("{}: ibv_alloc_pd: {}", dname, std::strerror(errno)));
            continue;
        }
        auto device = std::make_shared<Device>(std::move(context), std::move(pd), attr, dname);
        const std::string bus = pci_bus_id(dname);
        const int distance = bus.empty() ? -1 : ctx.runtime.distance_to_device(bus);
        for (int p = 1; p <= attr.phys_port_cnt; ++p) {
            ibv_port_attr pa{};
            if (ibv_query_port(device->context(), static_cast<std::uint8_t>(p), &pa) != 0) continue;
            if (pa.state != IBV_PORT_ACTIVE) {
                problems.push_back(fmt::format("{}:{} is {}", dname, p, port_state(pa.state)));
                continue;
            }
            candidates.push_back({device, static_cast<std::uint8_t>(p), pa});
            described.push_back({dname, static_cast<std::uint32_t>(p), distance});
            log.verbose(20, "found {}:{} ({}, PCI {}, distance {})", dname, p,
                        pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
                        bus.empty() ? "unknown" : bus, distance);
        }
    }
    const IfSelectionResult sel = select_ports(described, s.filter, s.prefer_closest);
    for (const std::string& u : sel.unmatched)
        log::warn("btl_openib_if_include names {}, which is not an active port here", u);

    std::vector<wire::PortAddress> published;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        const std::string id = fmt::format("{}:{}", described[i].device, described[i].port);
        if (!sel.verdicts[i].use) {
            log.verbose(10, "{} not used: {}", id, sel.verdicts[i].reason);
            problems.push_back(id + " " + sel.verdicts[i].reason);
            continue;
        }
        auto m = std::make_unique<Module>(*this, candidates[i].device, candidates[i].port,
                                          candidates[i].attr, s.config, ctx, log);
        try {
            m->setup();
        } catch (const std::exception& e) {
            log.verbose(1, "{} not used: {}", id, e.what());
            problems.push_back(id + ": " + e.what());
            continue;
        }
        published.push_back(m->port().address);
        out.push_back(std::move(m));
    }
    if (out.empty()) {
        decline_reason_ = problems.empty() ? "no active InfiniBand/RoCE port"
                                           : "no usable InfiniBand/RoCE port (" + problems[0] +
                                                 (problems.size() > 1 ? ", ..." : "") + ")";
        return out;
    }
    std::vector<std::byte> blob;
    wire::encode_modex(std::span<const wire::PortAddress>(published), blob);
    if (Status st = ctx.runtime.modex_send("btl.openib.1", blob); !ok(st)) {
        decline_reason_ = fmt::format("publishing the port addresses failed: {}", to_string(st));
        out.clear();
    }
    return out;
}

}  // namespace
}  // namespace transit::openib

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_openib_component =
    transit::mca::make_descriptor<transit::openib::OpenibComponent>(
        "btl", transit::btl_interface_version, "openib", {1, 0, 0});
