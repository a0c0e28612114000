// The ofi module: setup of the libfabric objects, the active-message path,
// adding and deleting peers, and joining the progress engine.
#include "ofi_module.hpp"
#include "ofi_status.hpp"

#include <fmt/format.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "transit/btl/util/descriptor_setup.hpp"
#include "transit/btl/util/progress_membership.hpp"

namespace transit::ofi {
namespace {

constexpr std::size_t header_size = sizeof(WireHeader);
// Room left in rxm's eager buffer for rxm's own packet header.
constexpr std::size_t rxm_headroom = 256;

AddressForm address_form(std::uint32_t format) noexcept {
    switch (format) {
        case FI_ADDR_STR:
            return AddressForm::string;
        case FI_SOCKADDR:
        case FI_FORMAT_UNSPEC:
            return AddressForm::variable;
        default:
            return AddressForm::fixed;
    }
}

bool software_network(const std::string& core) {
    return core == "tcp" || core == "sockets" || core == "udp" || core == "net";
}

[[noreturn]] void fail(const char* what, int rc) {
    throw std::runtime_error(fmt::format("{} failed: {}", what, libfabric().strerror(-rc)));
}

}  // namespace

std::string core_provider(const std::string& provider) {
    return provider.substr(0, provider.find(';'));
}

std::string OfiModule::modex_key() const {
    std::string key = "btl.ofi." + provider_;
    std::replace(key.begin(), key.end(), ';', '+');
    return key;
}

OfiModule::OfiModule(btl::Component& component, const fi_info& info, const OfiConfig& config,
                     rt::Runtime& runtime, ProgressEngine& progress, btl::AmTable& am_table,
                     const log::Stream& out)
    : btl::Module(component),
      provider_(info.fabric_attr->prov_name),
      config_(config),
      runtime_(runtime),
      progress_(progress),
      am_table_(am_table),
      out_(out) {
    fabric_.node_local = node_local(core_provider(provider_));
    open_objects(info);
    atomics_.query();
    choose_attributes(info);
    setup_buffers();
    by_rank_.resize(runtime_.size());
    peers_.setup(runtime_.size());
    av_addr_.assign(runtime_.size(), FI_ADDR_NOTAVAIL);
}

// The endpoint closes before the members go: OfiOneSided's records are
// operation contexts the provider may hold.
OfiModule::~OfiModule() {
    if (progress_handle_) progress_.remove(progress_handle_);
    fabric_.close();
}

void OfiModule::open_objects(const fi_info& info) {
    OfiFabric& f = fabric_;
    f.info.reset(libfabric().dupinfo(&info));
    if (!f.info) throw std::runtime_error("fi_dupinfo failed");
    f.mr_mode = static_cast<std::uint64_t>(f.info->domain_attr->mr_mode);
    f.virt_addr = (f.mr_mode & FI_MR_VIRT_ADDR) != 0;
    f.local_mr = (f.mr_mode & FI_MR_LOCAL) != 0;
    f.address_form = address_form(f.info->addr_format);
    // shm writes a put before it completes it; other providers say by
    // default that the data left, not that it arrived.
    f.delivery_complete = node_local(core_provider(provider_)) ? 0 : FI_DELIVERY_COMPLETE;
    if (int rc = libfabric().fabric(f.info->fabric_attr, f.fabric.out(), nullptr); rc != 0)
        fail("fi_fabric", rc);
    if (int rc = fi_domain(f.fabric.get(), f.info.get(), f.domain.out(), nullptr); rc != 0)
        fail("fi_domain", rc);
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_attr.size = f.info->tx_attr->size + f.info->rx_attr->size;
    if (int rc = fi_cq_open(f.domain.get(), &cq_attr, f.cq.out(), nullptr); rc != 0)
        fail("fi_cq_open", rc);
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    av_attr.count = runtime_.size() + 64;  // and peers outside the job
    if (int rc = fi_av_open(f.domain.get(), &av_attr, f.av.out(), nullptr); rc != 0)
        fail("fi_av_open", rc);
    open_endpoint();
    std::size_t len = 256;
    f.address.resize(len);
    int rc = fi_getname(&f.ep->fid, f.address.data(), &len);
    if (rc == -FI_ETOOSMALL) {
        f.address.resize(len);
        rc = fi_getname(&f.ep->fid, f.address.data(), &len);
    }
    if (rc != 0) fail("fi_getname", rc);
    f.address.resize(len);
    f.rcache.setup(f.domain.get(), f.ep.get(), f.mr_mode, config_.rcache_size,
                   config_.rcache_monitor);
    if (const char* why = f.rcache.unused_off_reason())
        out_.verbose(1, "{}: no memory registration is kept for reuse: {}", name(), why);
}

// shm names its region after the process id (and an endpoint count).  A
// region left by a killed process whose pid has come round to us looks owned
// by a live process (us): shm removes it and fails fi_enable with EBUSY.  The
// next endpoint gets the next name, so trying again is enough.
void OfiModule::open_endpoint() {
    constexpr int attempts = 4;
    for (int attempt = 1;; ++attempt) {
        OfiFabric& f = fabric_;
        if (int rc = fi_endpoint(f.domain.get(), f.info.get(), f.ep.out(), nullptr); rc != 0)
            fail("fi_endpoint", rc);
        if (int rc = fi_ep_bind(f.ep.get(), &f.av->fid, 0); rc != 0)
            fail("binding the address vector", rc);
        if (int rc = fi_ep_bind(f.ep.get(), &f.cq->fid, FI_TRANSMIT | FI_RECV); rc != 0)
            fail("binding the completion queue", rc);
        if (f.node_local) list_region();
        const int rc = fi_enable(f.ep.get());
        if (rc == 0) return;
        if (rc != -FI_EBUSY || attempt == attempts) fail("fi_enable", rc);
        out_.verbose(1,
                     "{}: fi_enable found its name in use (a dead process's region?); "
                     "opening another endpoint",
                     provider_);
        f.ep.reset();
    }
}

// fi_enable makes a node-local provider's region, named as the endpoint's
// address: listed first, a kill between the two leaves a name with no object
// listed (harmless), never an object unlisted.  Without a list the module
// still works; the region of a killed process then stays (as it would
// without Transit).
void OfiModule::list_region() {
    std::array<char, 256> address{};
    std::size_t len = address.size();
    if (int rc = fi_getname(&fabric_.ep->fid, address.data(), &len);
        rc != 0 || len > address.size()) {
        out_.verbose(10,
                     "{}: the endpoint's name is not readable before fi_enable ({}); its "
                     "region is not listed for removal after a kill",
                     provider_, rc != 0 ? libfabric().strerror(-rc) : "too long");
        return;
    }
    const std::string name = ListedRegion::region_name({address.data(), len});
    if (name.empty()) {
        out_.verbose(10, "{}: the endpoint's name '{}' is not a region's name; not listed",
                     provider_, std::string_view(address.data(), len));
        return;
    }
    try {
        fabric_.region.list("ofi_" + core_provider(provider_), name);
        out_.verbose(20, "{}: region /dev/shm{} listed for removal after a kill", provider_, name);
    } catch (const std::exception& e) {
        out_.verbose(1, "{}: region /dev/shm{} not listed for removal after a kill: {}", provider_,
                     name, e.what());
    }
}

void OfiModule::choose_attributes(const fi_info& info) {
    const std::string core = core_provider(provider_);
    const bool local = node_local(core);
    const bool soft = software_network(core);
    // Below vader for shared memory, above the tcp btl for software networks,
    // the default for hardware providers (as openib).
    const std::uint32_t excl = local ? local_exclusivity : soft ? 256 : btl::exclusivity_default;
    attr_.exclusivity =
        config_.left_default(btl::BaseParam::exclusivity) ? excl : config_.exclusivity;
    attr_.latency = config_.latency != 0 ? config_.latency : local ? 5 : soft ? 100 : 10;
    std::uint32_t bandwidth = local ? 10000 : soft ? 1000 : 10000;
    if (info.nic != nullptr && info.nic->link_attr != nullptr && info.nic->link_attr->speed > 0)
        bandwidth = static_cast<std::uint32_t>(
            std::max<std::size_t>(1, info.nic->link_attr->speed / 8 / 1000000));
    attr_.bandwidth = config_.bandwidth != 0 ? config_.bandwidth : bandwidth;
    // rxm delivers messages above its eager size by rendezvous, completing them
    // after later eager ones: fragments stay below it so they arrive in order.
    if (provider_.find("ofi_rxm") != std::string::npos) {
        std::size_t buffer = 16384;
        if (const char* env = std::getenv("FI_OFI_RXM_BUFFER_SIZE"))
            buffer = std::max<std::size_t>(std::strtoull(env, nullptr, 0), 1024);
        const std::size_t cap = buffer - rxm_headroom - header_size;
        if (config_.max_send_size > cap) {
            out_.verbose(10, "{}: fragments capped at {} bytes (rxm eager size {})", name(), cap,
                         buffer);
            config_.max_send_size = cap;
            config_.eager_limit = std::min(config_.eager_limit, cap);
        }
    }
    // shm sends a message above its inject size (4 KiB) by handing the
    // receiver an iovec and waiting in the sender's one response queue for its
    // answer, and it completes that queue strictly in order: a receiver killed
    // with such a message from us never answers, and every later one, to any
    // peer, waits behind it for good (the survivors of a killed rank stall).
    // A message up to the inject size is copied into the receiver's region and
    // completes at once, so fragments stay within it (in every process alike:
    // the receive buffers are as large).
    if (local && info.tx_attr->inject_size > header_size) {
        const std::size_t cap = info.tx_attr->inject_size - header_size;
        if (config_.max_send_size > cap) {
            out_.verbose(10, "{}: fragments capped at {} bytes (shm inject size {})", name(), cap,
                         info.tx_attr->inject_size);
            config_.max_send_size = cap;
            config_.eager_limit = std::min(config_.eager_limit, cap);
        }
    }
    attr_.eager_limit = config_.eager_limit;
    attr_.rndv_eager_limit = config_.eager_limit;
    attr_.max_send_size = config_.max_send_size;
    // Not flags::thread_safe: the domain is opened FI_THREAD_DOMAIN (the
    // caller serialises), and the fragment free lists are unlocked.
    attr_.flags = btl::flags::send | btl::flags::dynamic_peers;
    // No one-sided operation is announced, so the upper layers do them over
    // the send path, where the target checks each against its registrations.
    // Through libfabric's RMA a peer's operation through the key of a region
    // the target deregistered is not refused as the btl contract requires
    // (RdmaRefusal.ThroughStaleHandle), even with a region of its own per
    // registration closed at deregistration: shm does not check keys (a put
    // or get through a stale key writes), and tcp;ofi_rxm refuses the
    // operation but then breaks its connection to the peer, and every later
    // message to it fails.
    attr_.reach = local ? btl::reach::node : btl::reach::node | btl::reach::remote;
    fabric_.inject_limit = std::min(info.tx_attr->inject_size, header_size + config_.eager_limit);
    inject_scratch_.resize(fabric_.inject_limit);
}

void OfiModule::setup_buffers() {
    OfiFabric& fb = fabric_;
    const std::size_t n = config_.free_list_max;
    fb.eager.setup(
        {.initial = n, .max = n, .buffer_size = config_.eager_limit, .headroom = header_size});
    fb.large.setup(
        {.initial = n, .max = n, .buffer_size = config_.max_send_size, .headroom = header_size});
    const std::size_t recv_size = header_size + config_.max_send_size;
    const std::size_t stride = (recv_size + 63) & ~std::size_t{63};
    fb.recv_storage = std::make_unique<std::byte[]>(stride * config_.recv_buffers);
    fb.recvs = std::vector<OfiRecv>(config_.recv_buffers);
    if (fb.local_mr) {
        // One registration per block, kept for the module's life.
        auto reg = [&](const void* base, std::size_t len) -> void* {
            std::string error;
            CacheEntry* e = fb.rcache.acquire(base, len, &error);
            if (e == nullptr) throw std::runtime_error("registering buffers failed: " + error);
            fb.pool_registrations.push_back(e);
            return e->desc;
        };
        for (FragPool* pool : {&fb.eager, &fb.large}) {
            void* desc = reg(pool->chunk_buffers(0).data(), pool->chunk_buffers(0).size());
            for (OfiFrag& f : pool->items()) f.desc = desc;
        }
        fb.recv_desc = reg(fb.recv_storage.get(), stride * config_.recv_buffers);
    }
    one_sided_.setup(config_.max_rdma_ops, runtime_.size());
    for (std::size_t i = 0; i < fb.recvs.size(); ++i) {
        OfiRecv& r = fb.recvs[i];
        r.kind = OpKind::recv;
        r.buffer = fb.recv_storage.get() + i * stride;
        r.size = recv_size;
        const ssize_t rc = fi_recv(fb.ep.get(), r.buffer, r.size, fb.recv_desc, FI_ADDR_UNSPEC,
                                   static_cast<OpContext*>(&r));
        if (rc != 0) fail("posting the receive buffers", static_cast<int>(rc));
    }
}

bool OfiModule::valid(const btl::Endpoint* e) const noexcept {
    if (e == nullptr) return false;
    const Rank peer = e->peer();
    if (peer < by_rank_.size()) [[likely]]
        return by_rank_[peer].get() == e;
    return outside_.dynamic_endpoint(peer) == e;
}

bool OfiModule::job_address(fi_addr_t address) const noexcept {
    return std::find(av_addr_.begin(), av_addr_.end(), address) != av_addr_.end();
}

// --- peers -------------------------------------------------------------------

Status OfiModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                            btl::Reachability& reachable) {
    if (endpoints.size() < peers.size() || reachable.size() < peers.size())
        return Status::bad_param;
    const bool local_only = fabric_.node_local;
    const Rank self = runtime_.rank();
    outside_.add_procs(peers, endpoints, reachable);
    // First every new address goes into the address vector, then each is
    // checked against the others: an insert can change where an earlier one
    // leads (see aliased()).
    std::vector<Inserted> inserted;
    for (const Rank peer : peers) {
        if (peer >= by_rank_.size() || by_rank_[peer]) continue;
        if (local_only && peer != self && !runtime_.on_this_node(peer)) continue;
        if (av_addr_[peer] != FI_ADDR_NOTAVAIL) continue;
        if (std::any_of(inserted.begin(), inserted.end(),
                        [&](const Inserted& n) { return n.peer == peer; }))
            continue;
        std::vector<std::byte> blob;
        if (peer == self) {
            blob = fabric_.address;
        } else if (Status s = runtime_.modex_recv(peer, modex_key(), blob); s != Status::success) {
            out_.verbose(10, "{}: rank {} published no address ({})", name(), peer, to_string(s));
            continue;
        }
        std::vector<std::byte> padded;
        if (!av_address(blob, fabric_.address.size(), fabric_.address_form, padded)) {
            log::error(
                "{}: rank {}'s address ({} bytes) cannot be one of {}'s ({} bytes{}): "
                "rank {} is left to other transports",
                name(), peer, blob.size(), provider_, fabric_.address.size(),
                fabric_.address_form == AddressForm::fixed ? "" : " or a string", peer);
            continue;
        }
        fi_addr_t a = FI_ADDR_NOTAVAIL;
        if (fi_av_insert(fabric_.av.get(), padded.data(), 1, &a, 0, nullptr) != 1) {
            out_.verbose(1, "{}: the address of rank {} was refused", name(), peer);
            continue;
        }
        inserted.push_back({peer, a, std::move(blob)});
    }
    for (const Inserted& n : inserted) {
        if (aliased(n.peer, n.address, n.blob, inserted)) continue;
        av_addr_[n.peer] = n.address;
    }
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const Rank peer = peers[i];
        if (peer >= by_rank_.size() || av_addr_[peer] == FI_ADDR_NOTAVAIL) continue;
        if (!by_rank_[peer]) {
            by_rank_[peer] = std::make_unique<OfiEndpoint>(peer, av_addr_[peer]);
            ++job_peers_;
            peers_.watch(*by_rank_[peer]);
        }
        // Added again after a goodbye: take it back, so losing us is an error again.
        peers_.say_hello(*by_rank_[peer]);
        endpoints[i] = by_rank_[peer].get();
        reachable.set(i);
    }
    update_progress();
    return Status::success;
}

// Two ranks behind one libfabric address would get each other's messages, so
// a rank whose address is not its own alone is refused, with an error.
// libfabric 1.17's shm does this when it is given the name of an endpoint that
// does not exist (any more): the insert succeeds (a peer may create its
// endpoint later) but leaves the slot free, and the next name inserted takes
// the same slot and fi_addr_t and renames it, so the first rank's messages go
// to the second.  A stale modex value once did that here: rank 1 read rank
// 0's address from an earlier, closed endpoint and then sent rank 0's
// messages to itself.  shm's addresses are names that fi_av_lookup gives back,
// so there the rank the slot really leads to keeps it; elsewhere every rank
// sharing an address is refused.
bool OfiModule::aliased(Rank peer, fi_addr_t address, const std::vector<std::byte>& blob,
                        std::span<const Inserted> inserted) const {
    std::vector<Rank> sharing;
    for (Rank r = 0; r < av_addr_.size(); ++r)
        if (r != peer && av_addr_[r] == address) sharing.push_back(r);
    for (const Inserted& n : inserted)
        if (n.peer != peer && n.address == address &&
            std::find(sharing.begin(), sharing.end(), n.peer) == sharing.end())
            sharing.push_back(n.peer);
    bool leads_here = sharing.empty();
    if (core_provider(provider_) == "shm") {
        std::array<char, 256> found{};
        std::size_t len = found.size();
        leads_here = fi_av_lookup(fabric_.av.get(), address, found.data(), &len) == 0 &&
                     len <= found.size() && len == blob.size() &&
                     std::memcmp(found.data(), blob.data(), len) == 0;
    }
    if (leads_here) {
        // This rank keeps the address; those sharing it are refused when their
        // turn comes, or were added by an earlier call and can only be reported.
        for (Rank r : sharing)
            if (av_addr_[r] == address)
                log::error(
                    "{}: rank {}'s libfabric address now leads to rank {}; messages to rank {} "
                    "will be misdelivered (its address was an endpoint that does not exist)",
                    name(), r, peer, r);
        return false;
    }
    log::error(
        "{}: rank {}'s address does not lead to rank {} alone in libfabric's address vector "
        "(fi_addr {}{}{}); rank {} is left to other transports (its address may be a closed "
        "endpoint's)",
        name(), peer, peer, address, sharing.empty() ? "" : ", also rank ", fmt::join(sharing, ","),
        peer);
    return true;
}

Status OfiModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    if (endpoints.size() < peers.size()) return Status::bad_param;
    // Address-vector entries stay until finalize: a peer added again reuses them.
    for (std::size_t i = 0; i < peers.size(); ++i) {
        btl::Endpoint* e = endpoints[i];
        if (e == nullptr || !valid(e)) continue;
        if (auto* ep = static_cast<OfiEndpoint*>(e); ep->dynamic) {
            outside_.delete_dynamic(*ep);
            endpoints[i] = nullptr;
            continue;
        }
        peers_.say_goodbye(*by_rank_[e->peer()]);
        by_rank_[e->peer()].reset();
        --job_peers_;
        endpoints[i] = nullptr;
    }
    update_progress();
    return Status::success;
}

// --- progress ------------------------------------------------------------------

void OfiModule::update_progress() noexcept {
    const bool peers = job_peers_ > 0 || outside_.dynamic_endpoints() > 0;
    const bool want =
        peers || outside_.listening() || sends_pending_ > 0 || one_sided_.pending() > 0;
    if (!btl::util::keep_registered(progress_, progress_handle_, want, &OfiModule::progress_cb,
                                    this))
        report_error(btl::error_flags::fatal, any_rank, "cannot join the progress engine");
    const bool watching = peers || outside_.listening() || outside_.retiring();
    if (!btl::util::keep_registered(progress_, check_handle_, watching, &OfiModule::check_peers_cb,
                                    this, ProgressPriority::low))
        out_.verbose(1, "{}: local peers' exits are not watched (no memory)", name());
}

int OfiModule::progress_cb(void* self) noexcept {
    auto* m = static_cast<OfiModule*>(self);
    const bool in_flight = m->sends_pending_ > 0 || m->one_sided_.pending() > 0;
    if (!m->pacer_.due(in_flight)) return 0;
    const int n = m->completions_.poll();
    m->pacer_.found(n, in_flight);
    if (m->job_peers_ == 0 && m->outside_.dynamic_endpoints() == 0 && !m->outside_.listening())
        m->update_progress();
    return n;
}

// At low priority: peers outside the job (OfiOutside), then local job peers'
// exits (OfiPeerWatch).
int OfiModule::check_peers_cb(void* self) noexcept {
    auto* m = static_cast<OfiModule*>(self);
    m->outside_.check_dynamic();
    return m->peers_.check_peers(m->by_rank_);
}

Status OfiModule::post_control(OfiEndpoint& ep, WireKind kind, bool wait,
                               std::span<const std::byte> payload, btl::Tag tag) noexcept {
    OfiFrag* f = fabric_.take(payload.size());
    if (f == nullptr) return Status::out_of_resource;
    if (payload.size() > f->capacity) {
        fabric_.release(f);
        return Status::bad_param;
    }
    std::copy(payload.begin(), payload.end(), f->buffer + header_size);
    f->seg = {f->buffer + header_size, payload.size()};
    f->segments = &f->seg;
    f->segment_count = 1;
    f->internal = true;  // freed at completion
    const std::size_t before = sends_pending_;
    // A join may wait as long as its answer may take: tcp;ofi_rxm says "try
    // again" until the server's side of the new connection has progressed,
    // which a loaded or stopped server does late.
    const auto deadline = kind == WireKind::join
                              ? ep.outside.deadline()
                              : std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    Status s;
    while ((s = post_send(f, &ep, tag, kind)) == Status::out_of_resource &&
           std::chrono::steady_clock::now() < deadline)
        completions_.poll();
    if (s != Status::success) {
        fabric_.release(f);
        return s;
    }
    // No endpoint: the endpoint may be deleted before the completion comes,
    // and a goodbye that fails (the peer has gone) is no error to report.
    f->endpoint = nullptr;
    while (wait && sends_pending_ > before && std::chrono::steady_clock::now() < deadline)
        completions_.poll();
    return Status::success;
}

// --- sends -------------------------------------------------------------------

void OfiModule::end_send(OfiFrag* f, Status status, const char* why) noexcept {
    --sends_pending_;
    f->posted = false;
    // An abandoned send's completion only frees it (if its owner gave it up
    // or never owned it).
    if (f->abandoned) [[unlikely]] {
        f->abandoned = false;
        const bool owned_here =
            f->internal || f->freed_early || (f->flags & btl::des_flags::btl_ownership);
        f->freed_early = false;
        if (owned_here) fabric_.release(f);
        return;
    }
    if (why != nullptr) [[unlikely]] {
        if (f->internal && f->endpoint == nullptr) {  // a goodbye or hello
            fabric_.release(f);
            return;
        }
        const Rank peer = f->endpoint ? f->endpoint->peer() : any_rank;
        report_error(btl::error_flags::nonfatal, peer, why);
    }
    // A user's send is called back, and freed when the module owns it; an
    // internal one (sendi's copy, a hello) is freed.
    if (f->internal) {
        fabric_.release(f);
        return;
    }
    const std::uint32_t flags = f->flags;  // the callback may reuse the descriptor
    if (f->cbfunc != nullptr) f->cbfunc(this, f->endpoint, f, status);
    if (flags & btl::des_flags::btl_ownership) fabric_.release(f);
}

btl::Descriptor* OfiModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                  std::uint32_t flags) noexcept {
    if (!valid(endpoint)) [[unlikely]]
        return nullptr;
    OfiFrag* f = fabric_.take(size);
    if (f == nullptr) return nullptr;
    f->seg = {f->buffer + header_size, std::min(size, f->capacity)};
    btl::util::hand_out(*f, &f->seg, 1, flags, order);
    f->internal = false;
    f->endpoint = static_cast<OfiEndpoint*>(endpoint);
    return f;
}

Status OfiModule::free(btl::Descriptor* descriptor) noexcept {
    if (descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    auto* f = static_cast<OfiFrag*>(descriptor);
    if (f->posted && f->abandoned) {
        f->freed_early = true;  // the provider still has it
        return Status::success;
    }
    const bool done = fabric_.eager.owns(f) ? fabric_.eager.put(f) : fabric_.large.put_checked(f);
    return done ? Status::success : Status::bad_param;
}

btl::Descriptor* OfiModule::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                        std::uint8_t order, std::size_t reserve, std::size_t& size,
                                        std::uint32_t flags) noexcept {
    if (!valid(endpoint) || reserve > fabric_.large.capacity()) [[unlikely]]
        return nullptr;
    size = std::min(size, convertor.remaining());
    OfiFrag* f = fabric_.take(reserve + size);
    if (f == nullptr) return nullptr;
    std::byte* payload = f->buffer + header_size;
    size = convertor.pack(payload + reserve, std::min(size, f->capacity - reserve));
    f->seg = {payload, reserve + size};
    btl::util::hand_out(*f, &f->seg, 1, flags, order);
    f->internal = false;
    f->endpoint = static_cast<OfiEndpoint*>(endpoint);
    return f;
}

Status OfiModule::post_send(OfiFrag* f, OfiEndpoint* ep, btl::Tag tag, WireKind kind) noexcept {
    const WireHeader h = wire(*ep, tag, kind);
    std::memcpy(f->buffer, &h, sizeof h);
    f->endpoint = ep;
    const ssize_t rc = fi_send(fabric_.ep.get(), f->buffer, header_size + f->seg.len, f->desc,
                               ep->address, static_cast<OpContext*>(f));
    if (rc == 0) {
        ++sends_pending_;
        f->posted = true;
        return Status::success;
    }
    return rc == -FI_EAGAIN ? Status::out_of_resource : status_of_fi_error(static_cast<int>(-rc));
}

Status OfiModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                       btl::Tag tag) noexcept {
    if (!valid(endpoint) || descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    auto* f = static_cast<OfiFrag*>(descriptor);
    auto* ep = static_cast<OfiEndpoint*>(endpoint);
    if (ep->failed) [[unlikely]]
        return Status::peer_failed;
    // An injected send leaves nothing pending, yet its answer is coming: the
    // transport is polled on every pass again (IdlePacer).
    pacer_.wake();
    f->seg.len = descriptor->segments[0].len;
    if (f->seg.len > f->capacity) [[unlikely]]
        return Status::bad_param;
    const std::size_t len = header_size + f->seg.len;
    if (len > fabric_.inject_limit) {
        f->internal = false;
        return post_send(f, ep, tag);
    }
    // Small enough to inject: the provider copies it, so it completes here.
    const WireHeader h = wire(*ep, tag);
    std::memcpy(f->buffer, &h, sizeof h);
    const ssize_t rc = fi_inject(fabric_.ep.get(), f->buffer, len, ep->address);
    if (rc != 0) return rc == -FI_EAGAIN ? Status::out_of_resource : Status::error;
    const std::uint32_t flags = f->flags;
    if ((flags & btl::des_flags::send_always_callback) && f->cbfunc != nullptr)
        f->cbfunc(this, endpoint, f, Status::success);
    if (flags & btl::des_flags::btl_ownership) fabric_.release(f);
    return Status::completed;
}

Status OfiModule::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                        std::size_t header_size_in, std::size_t payload_size, std::uint8_t order,
                        std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    if (!valid(endpoint) ||
        !btl::sendi_arguments_valid(convertor, header, header_size_in, payload_size)) [[unlikely]]
        return Status::bad_param;
    auto* ep = static_cast<OfiEndpoint*>(endpoint);
    if (ep->failed) [[unlikely]]
        return Status::peer_failed;
    pacer_.wake();  // as in send()
    const std::size_t total = header_size_in + payload_size;
    const std::size_t start = convertor ? convertor->position() : 0;
    if (header_size + total <= fabric_.inject_limit) {
        std::byte* buf = inject_scratch_.data();
        const WireHeader h = wire(*ep, tag);
        std::memcpy(buf, &h, sizeof h);
        if (header_size_in > 0) std::memcpy(buf + header_size, header, header_size_in);
        if (payload_size > 0) convertor->pack(buf + header_size + header_size_in, payload_size);
        const ssize_t rc = fi_inject(fabric_.ep.get(), buf, header_size + total, ep->address);
        if (rc == 0) return Status::completed;
        if (convertor) convertor->seek(start);
        if (rc != -FI_EAGAIN) return Status::error;
    } else if (total <= config_.eager_limit) {
        OfiFrag* f = fabric_.take(total);
        if (f != nullptr) {
            std::byte* payload = f->buffer + header_size;
            if (header_size_in > 0) std::memcpy(payload, header, header_size_in);
            if (payload_size > 0) convertor->pack(payload + header_size_in, payload_size);
            f->seg = {payload, total};
            btl::util::hand_out(*f, &f->seg, 1, flags, order);
            f->internal = true;  // freed at completion, nobody is called back
            const Status s = post_send(f, ep, tag);
            if (s == Status::success) return Status::completed;
            if (convertor) convertor->seek(start);
            if (s != Status::out_of_resource) {
                fabric_.release(f);
                return s;
            }
            // Hand the fragment to the caller to fill and send later.
            f->internal = false;
            if (descriptor != nullptr)
                *descriptor = f;
            else
                fabric_.release(f);
            return Status::out_of_resource;
        }
    }
    if (descriptor != nullptr)
        *descriptor = btl::util::alloc_whole(*this, endpoint, order, total, flags);
    return Status::out_of_resource;
}

void OfiModule::dump(btl::Endpoint*, int verbosity) {
    log::write(
        "btl:ofi",
        fmt::format("{}: {} peers, eager {}/{} free, large {}/{} free, {} sends and {} "
                    "one-sided operations in flight, {} registrations ({} cached)",
                    name(), job_peers_ + outside_.dynamic_endpoints(), fabric_.eager.available(),
                    fabric_.eager.size(), fabric_.large.available(), fabric_.large.size(),
                    sends_pending_, one_sided_.pending(), one_sided_.registrations(),
                    fabric_.rcache.size()));
    if (verbosity > 50)
        log::write("btl:ofi",
                   fmt::format("  fabric {} domain {} mr_mode {:#x} inject {} B",
                               fabric_.info->fabric_attr->name, fabric_.info->domain_attr->name,
                               fabric_.mr_mode, fabric_.inject_limit));
}

Status OfiModule::finalize() {
    if (fabric_.ep)
        for (auto& e : by_rank_)
            if (e) peers_.say_goodbye(*e);
    // Peers outside the job hear that we left (a departure, not a failure).
    outside_.leave();
    // Their goodbyes leave before the endpoint closes (at most half a second).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (sends_pending_ > 0 && outside_.retiring() && std::chrono::steady_clock::now() < deadline)
        completions_.poll();
    outside_.retire_addresses(true);
    if (progress_handle_) progress_.remove(progress_handle_);
    progress_handle_ = {};
    if (check_handle_) progress_.remove(check_handle_);
    check_handle_ = {};
    if (sends_pending_ > 0 || one_sided_.pending() > 0)
        out_.verbose(1, "{}: finalize with {} sends and {} one-sided operations in flight", name(),
                     sends_pending_, one_sided_.pending());
    one_sided_.clear_registrations();
    fabric_.close();
    by_rank_.clear();
    job_peers_ = 0;
    return Status::success;
}

}  // namespace transit::ofi
