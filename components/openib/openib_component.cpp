// btl/openib: the component.  Registers the parameters, finds the devices
// through rdma-core (ibv_get_device_list), and creates one module per active
// port that the interface selection keeps.  With no device it declines with
// one line, printed only at btl_base_verbose >= 1 and by transit_info: a
// machine without InfiniBand is normal, not worth a warning.
#include <fmt/format.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "openib_ifsel.hpp"
#include "openib_module.hpp"
#include "transit/btl/component.hpp"
#include "transit/version.hpp"

namespace transit::openib {
namespace {

using params::Type;

constexpr params::Decl openib_params[] = {
    {"if_include", Type::string, "",
     "Devices or ports to use, comma separated: DEVICE (every port) or DEVICE:PORT, e.g. "
     "\"mlx5_0,mlx5_1:2\"; empty: all.  Cannot be combined with btl_openib_if_exclude",
     2},
    {"if_exclude", Type::string, "",
     "Devices or ports not to use (same form as btl_openib_if_include)", 2},
    {"prefer_closest", Type::boolean, "true",
     "Without btl_openib_if_include, use only the devices nearest (NUMA distance) to the "
     "process",
     4},
    {"eager_limit", Type::size, "12k", "Largest message the upper layer sends eagerly", 4},
    {"max_send_size", Type::size, "16k",
     "Largest fragment, and the size of every receive buffer of the shared receive queue", 4},
    {"free_list_max", Type::unsigned_integer, "1024",
     "Send fragments and RDMA operation slots per module (each); allocated at init", 6},
    {"srq_size", Type::unsigned_integer, "1024",
     "Most receive buffers the shared receive queue holds; bounds the credits granted to all "
     "peers together",
     5},
    {"srq_initial", Type::unsigned_integer, "256",
     "Receive buffers posted at init; more are added as peers connect", 6},
    {"credits_per_peer", Type::unsigned_integer, "32",
     "Data credits (receive buffers) granted to each connected peer", 5},
    {"sq_depth", Type::unsigned_integer, "128", "Send work requests per queue pair", 6},
    {"send_cq_size", Type::unsigned_integer, "4096",
     "Entries of the send completion queue; bounds the work in flight per module", 6},
    {"max_inline", Type::unsigned_integer, "64",
     "Largest send (header included) the HCA copies at post time instead of reading it by DMA", 6},
    {"rcache_max_unused", Type::unsigned_integer, "0",
     "Released memory registrations kept for reuse (least recently used first out).  0: a "
     "registration ends with its last release, so freed memory is never reachable through it.  "
     "Above 0, safe only if the program does not free registered memory and reuse the "
     "addresses while cached (there is no hook that reports freed memory)",
     7},
    {"connect_retry_interval", Type::unsigned_integer, "100",
     "Milliseconds before a connection request or reply is resent", 6},
    {"connect_retries", Type::unsigned_integer, "50",
     "Resends before a connection attempt fails and the error callback fires", 6},
    {"qp_timeout", Type::unsigned_integer, "20",
     "Transport timeout of the queue pairs: 4.096 us * 2^value per retry (1..31)", 7},
    {"qp_retry_count", Type::unsigned_integer, "7",
     "Transport retries before a send to an unresponsive peer fails (0..7)", 7},
    {"rnr_retry", Type::unsigned_integer, "7",
     "Receiver-not-ready retries (0..7; 7 retries forever)", 7},
    {"service_level", Type::unsigned_integer, "0", "InfiniBand service level (0..15)", 7},
    {"traffic_class", Type::unsigned_integer, "0", "Traffic class of routed (GRH) packets", 7},
    {"pkey_index", Type::unsigned_integer, "0", "Partition key index", 7},
    {"gid_index", Type::integer, "-1",
     "GID table index of the local port; -1 chooses (RoCE v2 first, else index 0)", 6},
    {"atomics", Type::enumeration, "auto",
     "How atomics run.  auto: the device's fetch-add and compare-swap when they are coherent "
     "with CPU atomics (IBV_ATOMIC_GLOB), every other op (and all ops on other devices) "
     "performed by the target; hardware: only fetch-add and compare-swap, always by the "
     "device; emulated: every op performed by the target",
     6, "auto,hardware,emulated"},
    {"exclusivity", Type::unsigned_integer, "1024",
     "Priority of openib among the transports that reach a peer (highest wins)", 7},
    {"latency", Type::unsigned_integer, "10", "Relative latency (lower is preferred)", 7},
    {"bandwidth", Type::unsigned_integer, "0",
     "Bandwidth in MB/s for striping weights; 0 computes it from the port's speed and width", 7},
};

struct Settings {
    Config config;
    IfFilter filter;
    bool prefer_closest = true;
};

Settings read_settings(params::Registry& r) {
    auto u = [&](const char* n, std::uint64_t lo, std::uint64_t hi) {
        params::Variable& v = r.get(std::string("btl_openib_") + n);
        std::uint64_t x = v.as_unsigned();
        if (x < lo || x > hi)
            throw params::Error(
                fmt::format("parameter {}: value \"{}\" (from {}) is out of range: "
                            "expected {}..{}",
                            v.full_name(), v.text(), v.source().describe(), lo, hi));
        return x;
    };
    Settings s;
    Config& c = s.config;
    s.filter = parse_if_filter(r.get("btl_openib_if_include").as_string(),
                               r.get("btl_openib_if_exclude").as_string());
    s.prefer_closest = r.get("btl_openib_prefer_closest").as_bool();
    c.max_send_size = u("max_send_size", 64, 1u << 30);
    c.eager_limit = u("eager_limit", 1, c.max_send_size);
    c.free_list_max = static_cast<std::uint32_t>(u("free_list_max", 1, 1u << 20));
    c.srq_size = static_cast<std::uint32_t>(u("srq_size", 2, 1u << 22));
    c.srq_initial = static_cast<std::uint32_t>(u("srq_initial", 1, c.srq_size));
    c.credits_per_peer = static_cast<std::uint32_t>(u("credits_per_peer", 1, 0xffff));
    c.sq_depth = static_cast<std::uint32_t>(u("sq_depth", 2, 1u << 16));
    c.send_cq_size = static_cast<std::uint32_t>(u("send_cq_size", 16, 1u << 22));
    c.max_inline = static_cast<std::uint32_t>(u("max_inline", wire::FragHeader::size, 1024));
    c.rcache_max_unused = u("rcache_max_unused", 0, 1u << 20);
    c.connect_retry_ms = static_cast<std::uint32_t>(u("connect_retry_interval", 1, 60000));
    c.connect_retries = static_cast<std::uint32_t>(u("connect_retries", 0, 100000));
    c.qp_timeout = static_cast<std::uint8_t>(u("qp_timeout", 1, 31));
    c.qp_retry_count = static_cast<std::uint8_t>(u("qp_retry_count", 0, 7));
    c.rnr_retry = static_cast<std::uint8_t>(u("rnr_retry", 0, 7));
    c.service_level = static_cast<std::uint8_t>(u("service_level", 0, 15));
    c.traffic_class = static_cast<std::uint8_t>(u("traffic_class", 0, 255));
    c.pkey_index = static_cast<std::uint16_t>(u("pkey_index", 0, 0xffff));
    params::Variable& gid = r.get("btl_openib_gid_index");
    if (gid.as_int() < -1 || gid.as_int() > 255)
        throw params::Error(
            fmt::format("parameter {}: value \"{}\" (from {}) is out of range: "
                        "expected -1..255",
                        gid.full_name(), gid.text(), gid.source().describe()));
    c.gid_index = static_cast<int>(gid.as_int());
    const std::string& atomics = r.get("btl_openib_atomics").as_string();
    c.atomics = atomics == "hardware"   ? Config::Atomics::hardware
                : atomics == "emulated" ? Config::Atomics::emulated
                                        : Config::Atomics::automatic;
    c.exclusivity = static_cast<std::uint32_t>(u("exclusivity", 0, 0xffffffffu));
    c.latency = static_cast<std::uint32_t>(u("latency", 0, 0xffffffffu));
    c.bandwidth = static_cast<std::uint32_t>(u("bandwidth", 0, 0xffffffffu));
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
        registry.add_all("btl", "openib", openib_params);
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

  private:
    params::Registry& reg() const { return registry_ ? *registry_ : params::registry(); }

    params::Registry* registry_ = nullptr;
};

struct Candidate {
    std::shared_ptr<Device> device;
    std::uint8_t port;
    ibv_port_attr attr;
};

std::vector<std::unique_ptr<btl::Module>> OpenibComponent::init(btl::InitContext& ctx) {
    std::vector<std::unique_ptr<btl::Module>> out;
    const Settings s = read_settings(reg());
    int verbosity = 0;
    if (params::Variable* v = reg().find("btl_base_verbose"))
        verbosity = static_cast<int>(v->as_int());
    log::Stream log("btl:openib", verbosity);

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
        published.push_back(m->address());
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
