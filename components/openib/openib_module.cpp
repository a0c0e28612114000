// The openib module's setup and teardown, peers, memory registration and
// flush.  The data path is in openib_send.cpp, completions in openib_progress.cpp.
#include "openib_module.hpp"

#include <endian.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>

namespace transit::openib {

namespace {

constexpr char modex_key[] = "btl.openib.1";

// Port speed in MB/s from the encoded speed and width (IB spec table 11.4).
std::uint32_t port_bandwidth(const ibv_port_attr& a) {
    double lane_gbps = 0;
    switch (a.active_speed) {
        case 1:
            lane_gbps = 2.5;
            break;
        case 2:
            lane_gbps = 5;
            break;
        case 4:
            lane_gbps = 10;
            break;
        case 8:
            lane_gbps = 10.3125;
            break;
        case 16:
            lane_gbps = 14.0625;
            break;
        case 32:
            lane_gbps = 25.78125;
            break;
        case 64:
            lane_gbps = 50;
            break;
        case 128:
            lane_gbps = 100;
            break;
        default:
            lane_gbps = 10;
            break;
    }
    int lanes = 1;
    switch (a.active_width) {
        case 1:
            lanes = 1;
            break;
        case 2:
            lanes = 4;
            break;
        case 4:
            lanes = 8;
            break;
        case 8:
            lanes = 12;
            break;
        case 16:
            lanes = 2;
            break;
        default:
            lanes = 1;
            break;
    }
    return static_cast<std::uint32_t>(lane_gbps * lanes * 1000 / 8);
}

}  // namespace

// --- small helpers -------------------------------------------------------------------

int verbs::access_flags(std::uint32_t f) noexcept {
    int a = 0;
    if (f & btl::reg_flags::local_write) a |= IBV_ACCESS_LOCAL_WRITE;
    if (f & btl::reg_flags::remote_read) a |= IBV_ACCESS_REMOTE_READ;
    if (f & btl::reg_flags::remote_write) a |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    if (f & btl::reg_flags::remote_atomic) a |= IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
    return a;
}

int verbs::mtu_bytes(ibv_mtu mtu) noexcept {
    int n = static_cast<int>(mtu);
    return n >= 1 && n <= 5 ? 128 << n : 0;
}

bool unpack_handle(const btl::RegistrationHandle* h, RemoteKey& out) noexcept {
    auto k = wire::decode_remote_key(reinterpret_cast<const std::byte*>(h));
    if (!k) return false;
    out = *k;
    return true;
}

bool local_ok(const btl::RegistrationHandle* h, const void* addr, std::size_t len,
              bool write) noexcept {
    if (h == nullptr) return false;
    const Registration* r = reinterpret_cast<const Handle*>(h)->registration;
    if (r == nullptr || !r->covers(reinterpret_cast<std::uintptr_t>(addr), len)) return false;
    return !write || (verbs::access_flags(r->access) & IBV_ACCESS_LOCAL_WRITE) != 0;
}

// --- Device --------------------------------------------------------------------------

Device::Device(verbs::Context context, verbs::ProtectionDomain pd, const ibv_device_attr& attr,
               std::string name)
    : context_(std::move(context)), pd_(std::move(pd)), attr_(attr), name_(std::move(name)) {
    // Async events are read from progress, never waited for.
    int flags = fcntl(context_->async_fd, F_GETFL);
    if (flags >= 0) (void)fcntl(context_->async_fd, F_SETFL, flags | O_NONBLOCK);
}

Device::~Device() = default;

void Device::detach(Module* m) noexcept {
    std::erase(modules_, m);
}

int Device::poll_events() noexcept {
    int n = 0;
    ibv_async_event e;
    while (ibv_get_async_event(context_.get(), &e) == 0) {
        ++n;
        // By index: an error callback may finalize a module, which detaches it.
        for (std::size_t i = 0; i < modules_.size(); ++i) modules_[i]->on_async_event(e);
        ibv_ack_async_event(&e);
    }
    return n;
}

// --- Module setup --------------------------------------------------------------------

Module::Module(btl::Component& component, std::shared_ptr<Device> device, std::uint8_t port,
               const ibv_port_attr& port_attr, const Config& config, btl::InitContext& ctx,
               log::Stream out)
    : btl::Module(component),
      device_(std::move(device)),
      config_(config),
      runtime_(ctx.runtime),
      progress_(ctx.progress),
      am_table_(ctx.am_table),
      out_(std::move(out)),
      port_(*device_, port, port_attr, config_) {}

Module::~Module() {
    (void)finalize();
}

std::string Module::name() const {
    return "openib:" + device_->name() + ":" + std::to_string(port_.number);
}

void Module::setup() {
    const ibv_device_attr& dev = device_->attr();
    ibv_context* ctx = device_->context();
    port_.address.link = port_.attr.link_layer == IBV_LINK_LAYER_ETHERNET
                             ? wire::LinkLayer::ethernet
                             : wire::LinkLayer::infiniband;
    port_.address.port = port_.number;
    port_.address.mtu = static_cast<std::uint8_t>(port_.attr.active_mtu);
    port_.address.lid = port_.attr.lid;
    if (!port_.roce() && port_.attr.lid == 0)
        throw std::runtime_error("the port has no LID (is a subnet manager running?)");

    // GID: RoCE needs one (v2 preferred, it is routable); InfiniBand uses index 0.
    int chosen = config_.gid_index;
    if (chosen < 0) {
        chosen = 0;
        if (port_.roce()) {
            for (int i = 0; i < port_.attr.gid_tbl_len; ++i) {
                ibv_gid_entry e{};
                if (ibv_query_gid_ex(ctx, port_.number, static_cast<std::uint32_t>(i), &e, 0) != 0)
                    continue;
                if (e.gid_type == IBV_GID_TYPE_ROCE_V2) {
                    chosen = i;
                    break;
                }
            }
        }
    }
    if (chosen >= port_.attr.gid_tbl_len)
        throw std::runtime_error("btl_openib_gid_index " + std::to_string(chosen) +
                                 " is beyond the port's GID table (" +
                                 std::to_string(port_.attr.gid_tbl_len) + " entries)");
    ibv_gid gid{};
    if (ibv_query_gid(ctx, port_.number, chosen, &gid) != 0) verbs::fail("ibv_query_gid", errno);
    port_.gid_index = static_cast<std::uint8_t>(chosen);
    std::memcpy(port_.address.gid.data(), gid.raw, 16);
    port_.address.subnet_prefix = be64toh(gid.global.subnet_prefix);
    if (port_.roce() && std::all_of(port_.address.gid.begin(), port_.address.gid.end(),
                                    [](std::uint8_t b) { return b == 0; }))
        throw std::runtime_error("the RoCE port has no GID (no IP address on its interface?)");

    const rt::Secret& secret = runtime_.job_secret();
    std::memcpy(&job_key_, secret.data(), sizeof job_key_);
    std::random_device rd;
    port_.psn_state = rd() | 1;

    AtomicPath path = AtomicPath::emulated;
    switch (config_.atomics) {
        case Config::Atomics::emulated:
            path = AtomicPath::emulated;
            break;
        case Config::Atomics::hardware:
            if (dev.atomic_cap == IBV_ATOMIC_NONE)
                throw std::runtime_error(
                    "btl_openib_atomics is \"hardware\" but the device has no atomics");
            path = AtomicPath::hardware_only;
            break;
        case Config::Atomics::automatic:
            path = dev.atomic_cap == IBV_ATOMIC_GLOB ? AtomicPath::hybrid : AtomicPath::emulated;
            break;
    }
    if (dev.max_srq == 0 || dev.max_srq_wr == 0)
        throw std::runtime_error("the device has no shared receive queue support");
    // Every posted receive may complete at once: the receive CQ must hold them all.
    config_.srq_size =
        std::min<std::uint32_t>({config_.srq_size, static_cast<std::uint32_t>(dev.max_srq_wr),
                                 static_cast<std::uint32_t>(dev.max_cqe)});
    config_.srq_initial = std::min(config_.srq_initial, config_.srq_size);
    config_.sq_depth = std::min<std::uint32_t>(config_.sq_depth, dev.max_qp_wr);
    config_.send_cq_size = std::min<std::uint32_t>(config_.send_cq_size, dev.max_cqe);

    port_.send_cq.reset(
        ibv_create_cq(ctx, static_cast<int>(config_.send_cq_size), nullptr, nullptr, 0));
    if (!port_.send_cq) verbs::fail("ibv_create_cq (send)", errno);
    send_queue_.open(config_.send_cq_size);
    int recv_cqe = static_cast<int>(std::min<std::uint32_t>(config_.srq_size, dev.max_cqe));
    port_.recv_cq.reset(ibv_create_cq(ctx, recv_cqe, nullptr, nullptr, 0));
    if (!port_.recv_cq) verbs::fail("ibv_create_cq (receive)", errno);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = config_.srq_size;
    sa.attr.max_sge = 1;
    port_.srq.reset(ibv_create_srq(device_->pd(), &sa));
    if (!port_.srq) verbs::fail("ibv_create_srq", errno);

    one_sided_.open(device_->pd(), config_.rcache_max_unused, config_.rcache_monitor);

    // The last 64 bytes of the send fragments' block are the target of
    // non-fetching device atomics.
    const RegisteredBlocks::Block scratch =
        frags_.open(blocks_, device_->pd(), config_.free_list_max, config_.max_send_size);
    atomics_.open(path, scratch.data, scratch.lkey);
    receive_queue_.open(config_.srq_size, wire::FragHeader::size + config_.max_send_size,
                        config_.srq_initial);

    // The connection manager's UD queue pair.
    const RegisteredBlocks::Block cm = blocks_.add(device_->pd(), ConnectionManager::memory_size);
    cm_.open(port_, job_key_, cm.data, cm.lkey);
    port_.address.ud_qpn = cm_.qpn();
    port_.address.qkey = cm_.qkey();
    port_.address.recv_size =
        static_cast<std::uint32_t>(wire::FragHeader::size + config_.max_send_size);

    attr_.eager_limit = config_.eager_limit;
    attr_.rndv_eager_limit = config_.eager_limit;
    attr_.max_send_size = config_.max_send_size;
    attr_.exclusivity = config_.exclusivity;
    attr_.latency = config_.latency;
    attr_.bandwidth = config_.bandwidth ? config_.bandwidth : port_bandwidth(port_.attr);
    // Not flags::thread_safe: the send credits, the queue pairs' pending lists
    // and the fragment free lists are unlocked, and one thread polls the CQ.
    attr_.flags = btl::flags::send | btl::flags::put | btl::flags::get | btl::flags::atomic_ops |
                  btl::flags::atomic_fops | btl::flags::rdma_without_target;
    attr_.reach = btl::reach::node | btl::reach::remote;
    using namespace btl::atomic_support;
    if (path == AtomicPath::hardware_only) {
        // Only what the verbs have; coherent with the CPU only if the device says so.
        attr_.atomic_flags = add | cswap | (dev.atomic_cap == IBV_ATOMIC_GLOB ? global : 0);
    } else {
        // Every op (the target performs what the device cannot), all coherent
        // with CPU atomics: the hybrid path exists only with GLOB.
        attr_.atomic_flags = add | and_ | or_ | xor_ | land | lor | lxor | swap | min | max |
                             cswap | bits32 | global;
    }
    attr_.registration_handle_size = Handle::packed_size;
    attr_.put_limit = attr_.get_limit = port_.attr.max_msg_sz;
    attr_.put_local_registration_threshold = 0;
    attr_.get_local_registration_threshold = 0;
    device_->attach(this);
    update_progress();
    out_.verbose(10, "{}: {} port, LID {}, GID index {}, MTU {}, {} MB/s, atomics {}", name(),
                 port_.roce() ? "RoCE" : "InfiniBand", port_.address.lid, port_.gid_index,
                 verbs::mtu_bytes(port_.attr.active_mtu), attr_.bandwidth,
                 path == AtomicPath::hybrid
                     ? "fetch-add and compare-swap by the device, others by the target"
                 : path == AtomicPath::hardware_only
                     ? "fetch-add and compare-swap only, by the device"
                     : "all performed by the target");
}

// --- peers ---------------------------------------------------------------------------

Status Module::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                         btl::Reachability& reachable) {
    if (peers.size() != endpoints.size() || reachable.size() < peers.size())
        return Status::bad_param;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        if (Endpoint* ep = endpoint_for(peers[i])) {
            endpoints[i] = ep;
            reachable.set(i);
        }
    }
    update_progress();
    return Status::success;
}

Endpoint* Module::endpoint_for(Rank peer) {
    if (Endpoint* known = endpoints_.find(peer)) return known;
    // The own process is the self btl's; a QP to oneself would need two endpoints.
    if (peer == runtime_.rank() || port_down_ || peer >= runtime_.size()) return nullptr;
    std::vector<std::byte> blob;
    std::vector<wire::PortAddress> ports;
    if (runtime_.modex_recv(peer, modex_key, blob) != Status::success) {
        out_.verbose(20, "{}: peer {} has no openib address", name(), peer);
        return nullptr;
    }
    if (!wire::decode_modex(blob, ports)) {
        out_.verbose(1, "{}: peer {} published a malformed openib address", name(), peer);
        return nullptr;
    }
    std::vector<const wire::PortAddress*> match;
    for (const auto& p : ports)
        if (p.link == port_.address.link &&
            (p.subnet_prefix == port_.address.subnet_prefix || port_.roce()))
            match.push_back(&p);
    if (match.empty()) {
        out_.verbose(10, "{}: peer {} has no port on this fabric ({} ports published)", name(),
                     peer, ports.size());
        return nullptr;
    }
    // Same subnet first for RoCE; then spread our ports over the peer's.
    std::stable_partition(match.begin(), match.end(), [&](const wire::PortAddress* p) {
        return p->subnet_prefix == port_.address.subnet_prefix;
    });
    const wire::PortAddress& remote = *match[(port_.number - 1u) % match.size()];
    if (remote.recv_size < port_.address.recv_size) {
        out_.verbose(1,
                     "{}: peer {} receives at most {} bytes per fragment, this process sends up "
                     "to {}: set btl_openib_max_send_size alike everywhere",
                     name(), peer, remote.recv_size, port_.address.recv_size);
        return nullptr;
    }
    Connection::Config cc{runtime_.rank(), peer, job_key_, config_.connect_retry_ms,
                          config_.connect_retries};
    Endpoint* raw = &endpoints_.add(std::make_unique<Endpoint>(*this, peer, remote, cc));
    out_.verbose(20, "{}: peer {} reachable through its port {} (LID {})", name(), peer,
                 remote.port, remote.lid);
    return raw;
}

Status Module::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    (void)peers;
    for (btl::Endpoint* e : endpoints) {
        Endpoint* ep = endpoints_.owned(e);
        if (ep == nullptr) continue;
        destroy_endpoint(ep);
        endpoints_.erase(ep);
    }
    update_progress();
    return Status::success;
}

void Module::destroy_endpoint(Endpoint* ep) noexcept {
    ep->error_reported = true;  // going away on request: not an error to report
    ep->connection().fail("endpoint removed");
    fail_pending(*ep);
    // Let the flushed work requests come back before the QP and fragments go.
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ep->posted > 0 && std::chrono::steady_clock::now() < until) {
        completions_.poll_sends();
        completions_.poll_receives();
    }
    endpoints_.forget(ep);
}

void Module::dump(btl::Endpoint* endpoint, int verbosity) {
    btl::Module::dump(endpoint, verbosity);
    const log::Stream out(name(), verbosity);
    const RegistrationCache* rc = one_sided_.cache();
    out.verbose(1,
                "SRQ {} posted of {}, {} reserved; {} endpoints, {} active; rcache {} entries "
                "({} unused), {} hits {} misses",
                receive_queue_.posted(), config_.srq_size, receive_queue_.reserved(),
                endpoints_.all().size(), active_endpoints_, rc ? rc->size() : 0,
                rc ? rc->unused() : 0, rc ? rc->stats().hits : 0, rc ? rc->stats().misses : 0);
    if (auto* ep = static_cast<Endpoint*>(endpoint)) {
        out.verbose(1, "peer {}: {}, credits {} (owed back {}), send slots {}, rdma in flight {}",
                    ep->peer(), to_string(ep->connection().state()), ep->credits.send_credits(),
                    ep->credits.pending_returns(), ep->send_slots.free(), ep->rdma_in_flight);
    }
}

Status Module::finalize() {
    for (const auto& ep : endpoints_.all()) destroy_endpoint(ep.get());
    endpoints_.clear();
    if (rc_handle_) progress_.remove(rc_handle_);
    if (cm_handle_) progress_.remove(cm_handle_);
    rc_handle_ = {};
    cm_handle_ = {};
    if (device_) device_->detach(this);
    return Status::success;
}

void Module::update_progress() noexcept {
    // The RC queues need polling only while some peer is connecting or connected;
    // the connection manager while anybody could ask us to connect.
    active_endpoints_ = 0;
    waiting_endpoints_ = 0;
    for (const auto& ep : endpoints_.all()) {
        const ConnState st = ep->connection().state();
        if (ep->connection().waiting()) ++waiting_endpoints_;
        if ((st != ConnState::idle && st != ConnState::failed) || ep->posted > 0 ||
            ep->on_attention)
            ++active_endpoints_;
    }
    if (active_endpoints_ > 0 && !rc_handle_) rc_handle_ = progress_.add(&progress_rc, this);
    if (active_endpoints_ == 0 && rc_handle_) {
        progress_.remove(rc_handle_);
        rc_handle_ = {};
    }
    // Any other rank may ask us to connect at any time, even one this process
    // never sends to (the upper layer adds peers lazily, at their first send):
    // the connection manager listens, at low priority, while the job has others.
    if (runtime_.size() > 1 && !port_down_ && !cm_handle_)
        cm_handle_ = progress_.add(&progress_cm, this, ProgressPriority::low);
}

}  // namespace transit::openib
