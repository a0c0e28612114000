// The uct module: peers, the active-message path and progress.  The objects
// it owns have their own files (see uct_module.hpp).
#include "uct_module.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "transit/btl/util/descriptor_setup.hpp"
#include "transit/btl/util/progress_membership.hpp"

namespace transit::uct {
namespace {

// Statuses that mean the peer is gone, not that this one operation failed.
bool peer_lost(ucs_status_t s) noexcept {
    return s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_CONNECTION_RESET ||
           s == UCS_ERR_UNREACHABLE || s == UCS_ERR_REJECTED || s == UCS_ERR_CANCELED;
}

}  // namespace

UctModule::UctModule(btl::Component& component, const Resource& resource, const UctConfig& config,
                     rt::Runtime& runtime, ProgressEngine& progress, btl::AmTable& am_table,
                     std::shared_ptr<Regions> regions, const log::Stream& out)
    : btl::Module(component),
      resource_(resource),
      config_(config),
      runtime_(runtime),
      progress_(progress),
      am_table_(am_table),
      out_(out),
      self_(runtime.rank()),
      regions_(std::move(regions)) {
    uct_.open(&UctPeerWatch::error_cb, &peer_watch_, &UctReceiver::am_cb, &receiver_);
    one_sided_.open(uct_.md(), uct_.iface(), uct_.attr());
    atomics_.open(uct_.md(), uct_.attr(), one_sided_.rkey_len());
    uct_.build_address(one_sided_.second_iface(), one_sided_.rdma_attr(), one_sided_.rdma_name());
    choose_attributes();
    setup_pools();
    by_rank_.resize(runtime_.size());
    farewells_.setup(runtime_.size());
}

UctModule::~UctModule() {
    finalize();
}

void UctModule::choose_attributes() {
    const auto& am = uct_.attr().cap.am;
    max_message_ = am.max_bcopy;
    max_short_ = (uct_.attr().cap.flags & UCT_IFACE_FLAG_AM_SHORT) && am.max_short > 8
                     ? am.max_short - 8
                     : 0;
    // sendi's header + payload as three pieces of one am_short_iov.
    short_iov_ = am.max_iov >= 3;
    // Upper-layer payload per message; every process must agree, which holds
    // when they run the same transport with the same UCX configuration.
    std::size_t max_send = max_message_ - sizeof(WireHeader);
    if (config_.max_send_size > 0) max_send = std::min(max_send, config_.max_send_size);
    attr_.max_send_size = max_send;
    // Over tcp with its widened segments, 64 KiB of payload and the pml's
    // header go eagerly (as with the tcp btl), unless the user says otherwise.
    const std::size_t eager =
        resource_.tl_name == "tcp" && config_.left_default(btl::BaseParam::eager_limit)
            ? tcp_eager_limit
            : config_.eager_limit;
    attr_.eager_limit = std::min(eager, max_send);
    attr_.rndv_eager_limit = attr_.eager_limit;
    scratch_.resize(std::max<std::size_t>(max_short_, 64));

    const bool shm =
        resource_.dev_type == UCT_DEVICE_TYPE_SHM || resource_.dev_type == UCT_DEVICE_TYPE_SELF;
    const bool software = resource_.tl_name == "tcp";
    // Shared memory below vader (65535) and self; tcp above the tcp btl (0),
    // below hardware networks (the openib default, 1024).
    const std::uint32_t excl = shm ? shm_exclusivity : software ? 256 : btl::exclusivity_default;
    attr_.exclusivity =
        config_.left_default(btl::BaseParam::exclusivity) ? excl : config_.exclusivity;
    // UCT reports seconds; Transit's latency is relative: one unit per 0.5 us
    // puts posix at vader's 1 and UCT's tcp near the tcp btl's 100.
    const double seconds = uct_.attr().latency.c + uct_.attr().overhead;
    const auto lat = static_cast<std::uint32_t>(std::clamp(seconds / 0.5e-6, 1.0, 1e6));
    attr_.latency = config_.latency != 0 ? config_.latency : lat;
    const double bytes_per_s = uct_.attr().bandwidth.dedicated + uct_.attr().bandwidth.shared;
    const auto bw = static_cast<std::uint32_t>(std::clamp(bytes_per_s / 1e6, 1.0, 1e7));
    attr_.bandwidth = config_.bandwidth != 0 ? config_.bandwidth : bw;

    // Not flags::thread_safe: the UCT worker is created UCS_THREAD_MODE_SINGLE,
    // and the fragment free lists and pending queues are unlocked.
    attr_.flags = btl::flags::send | btl::flags::put | btl::flags::get | btl::flags::rdma_flush |
                  btl::flags::atomic_ops | btl::flags::atomic_fops | btl::flags::dynamic_peers;
    // Below btl_uct_rdma_min_size put/get go by active messages the target serves.
    if (one_sided_.native_put() && one_sided_.native_get() && one_sided_.native_min() == 0)
        attr_.flags |= btl::flags::rdma_without_target;
    // UCT's tcp reports a closed connection; on shared memory the module
    // watches its peers' processes (see Errors in the README).  Other
    // transports are left to the pml's keep-alive.
    if (resource_.tl_name == "tcp" || resource_.tl_name == "posix" || resource_.tl_name == "sysv")
        attr_.flags |= btl::flags::reports_peer_loss;
    // tcp: put is one zero-copy stream, get stays pieces served by the target.
    if (one_sided_.native_put() && !one_sided_.native_get()) attr_.flags |= btl::flags::prefer_put;
    attr_.reach = resource_.dev_type == UCT_DEVICE_TYPE_SELF ? btl::reach::own_process
                  : shm                                      ? btl::reach::node
                        : btl::reach::node | btl::reach::remote;
    using namespace btl::atomic_support;
    attr_.atomic_flags =
        add | and_ | or_ | xor_ | land | lor | lxor | swap | min | max | cswap | bits32 | global;
    // The plain handle, then the RDMA memory domain's key and the interface's
    // own (native atomics) where each is used.
    attr_.registration_handle_size =
        sizeof(PackedHandle) + one_sided_.handle_key_size() + atomics_.handle_key_size();
    attr_.put_limit = std::size_t{1} << 30;
    attr_.get_limit = std::size_t{1} << 30;
}

void UctModule::setup_pools() {
    // Fragments as large as tcp's widened segments are made as sends need
    // them, not all at setup: 128 of 66 KiB would be 8 MiB per module.
    const bool large = attr_.max_send_size > ring_slot_max;
    frags_.setup(
        {.initial = large ? std::min<std::size_t>(config_.free_list_max, 8) : config_.free_list_max,
         .max = config_.free_list_max,
         .grow_by = large ? 8u : 0u,
         .buffer_size = attr_.max_send_size,
         .headroom = sizeof(WireHeader)});
    // Data bytes per put/get piece: a message less the headers of a request or a reply.
    const std::size_t chunk =
        max_message_ - sizeof(WireHeader) - std::max(sizeof(RdmaRequest), sizeof(RdmaReply));
    ops_.setup(config_.max_rdma_ops, chunk);
    target_.setup(config_.max_rdma_ops, chunk);
    // Slots for the common size; larger messages (over tcp) wait beside them.
    receiver_.setup(config_.recv_ring,
                    std::min(std::max(max_message_, max_short_ + 8), ring_slot_max));
}

bool UctModule::valid(const btl::Endpoint* e) const noexcept {
    if (e == nullptr) return false;
    const Rank peer = e->peer();
    if (peer < by_rank_.size()) [[likely]]
        return by_rank_[peer].get() == e;
    return outside_.valid(e);
}

// --- peers -------------------------------------------------------------------

UctEndpoint* UctModule::connect(Rank peer, std::string* why) {
    std::vector<std::byte> blob;
    if (peer == self_) {
        blob = uct_.address();
    } else if (Status s = runtime_.modex_recv(peer, modex_key(), blob); s != Status::success) {
        if (why)
            *why = fmt::format("published no {} address ({})", resource_.tl_name, to_string(s));
        return nullptr;
    }
    AddressHeader h{};
    if (const char* refusal = read_address(blob, h)) {
        if (why) *why = fmt::format("its address ({} bytes) {}", blob.size(), refusal);
        return nullptr;
    }
    if (h.iface_len != uct_.attr().iface_addr_len ||
        (resource_.dev_type != UCT_DEVICE_TYPE_NET &&
         h.device_len != uct_.attr().device_addr_len)) {
        if (why)
            *why = fmt::format(
                "its address is malformed ({} bytes: device {}, interface {}; expected interface "
                "{})",
                blob.size(), h.device_len, h.iface_len, uct_.attr().iface_addr_len);
        return nullptr;
    }
    if (std::string refusal = uct_.mismatched_messages(h.largest_accepted, h.largest_sent);
        !refusal.empty()) {
        // A configuration mistake, the same for every peer: said once.
        if (!warned_mismatch_) {
            warned_mismatch_ = true;
            log::warn("{}: rank {} not reached: {}", name(), peer, refusal);
        }
        if (why) *why = std::move(refusal);
        return nullptr;
    }
    // UCT reads the addresses with their natural alignment (connect_native too).
    std::vector<std::uint64_t> aligned((blob.size() + 7) / 8 + 64, 0);
    std::memcpy(aligned.data(), blob.data(), blob.size());
    const auto* base = reinterpret_cast<const std::byte*>(aligned.data());
    uct_ep_h ep = uct_.create_ep({base + sizeof h, h.device_len},
                                 {base + sizeof h + h.device_len, h.iface_len}, why);
    if (ep == nullptr) return nullptr;
    if (peer >= by_rank_.size()) {
        // A server outside the job: no native RDMA (see the README).
        std::uint32_t ours = 0, theirs = 0;
        try {
            ours = outside_.new_channel();
            theirs = outside_.new_channel();
        } catch (...) {
            uct_ep_destroy(ep);
            if (why) *why = "no random numbers for its channels";
            return nullptr;
        }
        UctEndpoint* e = outside_.add(peer, ep, ours, theirs,
                                      resource_.dev_type != UCT_DEVICE_TYPE_NET ? h.pid : 0);
        if (e == nullptr && why) *why = "out of memory";
        return e;
    }
    by_rank_[peer] = std::make_unique<UctEndpoint>(peer, ep);
    UctEndpoint* e = by_rank_[peer].get();
    e->wire_source = self_;
    if (resource_.dev_type != UCT_DEVICE_TYPE_NET && peer != self_ && h.pid != 0)
        e->process = btl::util::ProcessWatch(static_cast<pid_t>(h.pid));
    if (one_sided_.native_put()) one_sided_.connect(e, h, base + sizeof h);
    return e;
}

Status UctModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                            btl::Reachability& reachable) {
    if (endpoints.size() < peers.size() || reachable.size() < peers.size())
        return Status::bad_param;
    const bool local_only = resource_.dev_type != UCT_DEVICE_TYPE_NET;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const Rank peer = peers[i];
        const bool dynamic = peer >= by_rank_.size();
        if (dynamic && !outside_.is_dynamic(peer)) continue;
        UctEndpoint* e = dynamic ? outside_.endpoint(peer) : by_rank_[peer].get();
        if (e == nullptr) {
            if (local_only && peer != self_ && !runtime_.on_this_node(peer)) continue;
            std::string why;
            try {
                e = dynamic ? outside_.connect_server(peer, &why) : connect(peer, &why);
            } catch (const std::exception& x) {
                why = x.what();
            }
            if (e == nullptr) {
                out_.verbose(10, "{}: {} {} not reachable: {}", name(), dynamic ? "peer" : "rank",
                             peer, why);
                continue;
            }
        }
        if (!e->added) {
            e->added = true;
            ++peer_count_;
        }
        // Added again after a goodbye: take it back, so losing us is an error again.
        if (!dynamic) farewells_.added(*e);
        endpoints[i] = e;
        reachable.set(i);
    }
    update_progress();
    return Status::success;
}

Status UctModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    if (endpoints.size() < peers.size()) return Status::bad_param;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        btl::Endpoint* e = endpoints[i];
        if (e == nullptr || !valid(e)) continue;
        const Rank peer = e->peer();
        // Operations still waiting to be sent to this peer end here; those
        // already sent keep only the peer's rank and complete on the reply.
        ops_.forget(static_cast<const UctEndpoint*>(e));
        target_.forget(peer);
        auto* ue = static_cast<UctEndpoint*>(e);
        if (ue->added) --peer_count_;
        farewells_.say_goodbye(*ue);
        send_queue_.drop(*ue, Status::cancelled);
        if (ue->dynamic)
            outside_.remove(*ue);
        else
            by_rank_[peer].reset();
        endpoints[i] = nullptr;
    }
    attention_ = true;  // progress leaves the engine once the last work drains
    update_progress();
    return Status::success;
}

UctEndpoint* UctModule::peer_endpoint(Rank peer) noexcept {
    if (peer >= by_rank_.size()) return outside_.endpoint(peer);
    if (by_rank_[peer]) return by_rank_[peer].get();
    // A request from a peer not added yet (it added us first): connect to
    // answer it.  Once per peer, off the usual path.
    try {
        return connect(peer, nullptr);
    } catch (...) {
        return nullptr;
    }
}

// --- sends -------------------------------------------------------------------

std::size_t UctModule::pack_cb(void* dest, void* arg) noexcept {
    auto* g = static_cast<Gather*>(arg);
    auto* p = static_cast<std::byte*>(dest);
    std::memcpy(p, &g->wire, sizeof g->wire);
    p += sizeof g->wire;
    if (g->len1 > 0) std::memcpy(p, g->part1, g->len1);
    p += g->len1;
    if (g->len2 > 0) std::memcpy(p, g->part2, g->len2);
    p += g->len2;
    if (g->convertor_len > 0) g->convertor->pack(p, g->convertor_len);
    return g->total();
}

Status UctModule::from_ucs(ucs_status_t s, UctEndpoint* ep) noexcept {
    if (s == UCS_ERR_NO_RESOURCE) return Status::out_of_resource;
    if (peer_lost(s)) {
        if (ep != nullptr && !ep->failed) {
            ep->failed = true;
            peer_watch_.note_failure();
        }
        return Status::peer_failed;
    }
    if (s == UCS_ERR_INVALID_PARAM) return Status::bad_param;
    if (s == UCS_ERR_UNSUPPORTED) return Status::not_supported;
    return Status::error;
}

// cma reports a copy from or to a process that is dying as an I/O error, not
// as a lost peer, and does so once the process has dropped its memory, a
// moment before its exit can be seen (the process watch looks every 100 ms).
// So on such an error the exit is waited for, briefly (an error path: a copy
// the kernel denies costs it once, then that peer goes by active messages),
// and the loss, when it comes, is the operation's status.
Status UctModule::native_error(ucs_status_t s, UctEndpoint* ep) noexcept {
    const Status e = from_ucs(s, ep);
    if (e == Status::peer_failed || ep == nullptr || !ep->process.watching()) return e;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (!ep->process.exited()) {
        if (std::chrono::steady_clock::now() >= until) return e;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!ep->failed) {
        out_.verbose(1, "{}: rank {} (pid {}) exited", name(), ep->peer(), ep->process.pid());
        ep->failed = true;
        peer_watch_.note_failure();
    }
    return Status::peer_failed;
}

// One message, completed when this returns (UCT copies it): completed, or
// nothing happened (out_of_resource, errors).
Status UctModule::transmit(UctEndpoint* ep, Gather& g) noexcept {
    if (ep->failed) [[unlikely]]
        return Status::peer_failed;
    g.wire.source = ep->wire_source;
    const std::size_t payload = g.total() - sizeof(WireHeader);
    ucs_status_t s;
    if (payload <= max_short_) {
        std::uint64_t header;
        std::memcpy(&header, &g.wire, sizeof header);
        const void* data = g.part1;
        if (g.len2 > 0 || g.convertor_len > 0 || g.len1 == 0) {
            std::byte* p = scratch_.data();
            if (g.len1 > 0) std::memcpy(p, g.part1, g.len1);
            if (g.len2 > 0) std::memcpy(p + g.len1, g.part2, g.len2);
            if (g.convertor_len > 0) {
                const std::size_t start = g.convertor->position();
                g.convertor->pack(p + g.len1 + g.len2, g.convertor_len);
                s = uct_ep_am_short(ep->ep, am_id, header, p, static_cast<unsigned>(payload));
                if (s != UCS_OK) g.convertor->seek(start);
                return s == UCS_OK ? Status::completed : from_ucs(s, ep);
            }
            data = p;
        }
        s = uct_ep_am_short(ep->ep, am_id, header, data, static_cast<unsigned>(payload));
        return s == UCS_OK ? Status::completed : from_ucs(s, ep);
    }
    if (g.total() > max_message_) [[unlikely]]
        return Status::bad_param;
    const std::size_t start = g.convertor ? g.convertor->position() : 0;
    const ssize_t n = uct_ep_am_bcopy(ep->ep, am_id, &UctModule::pack_cb, &g, 0);
    if (n >= 0) return Status::completed;
    if (g.convertor) g.convertor->seek(start);
    return from_ucs(static_cast<ucs_status_t>(n), ep);
}

btl::Descriptor* UctModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                  std::uint32_t flags) noexcept {
    if (!valid(endpoint)) [[unlikely]]
        return nullptr;
    UctFrag* f = take();
    if (f == nullptr) return nullptr;
    f->seg = {f->buffer + sizeof(WireHeader), std::min(size, f->capacity)};
    btl::util::hand_out(*f, &f->seg, 1, flags, order);
    return f;
}

Status UctModule::free(btl::Descriptor* descriptor) noexcept {
    if (descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    auto* f = static_cast<UctFrag*>(descriptor);
    return frags_.put_checked(f) ? Status::success : Status::bad_param;
}

btl::Descriptor* UctModule::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                        std::uint8_t order, std::size_t reserve, std::size_t& size,
                                        std::uint32_t flags) noexcept {
    if (!valid(endpoint) || reserve > attr_.max_send_size) [[unlikely]]
        return nullptr;
    UctFrag* f = take();
    if (f == nullptr) return nullptr;
    std::byte* payload = f->buffer + sizeof(WireHeader);
    size = convertor.pack(payload + reserve, std::min(size, f->capacity - reserve));
    f->seg = {payload, reserve + size};
    btl::util::hand_out(*f, &f->seg, 1, flags, order);
    return f;
}

void UctModule::finish_send(UctFrag* f, UctEndpoint* ep) noexcept {
    const std::uint32_t flags = f->flags;
    if ((flags & btl::des_flags::send_always_callback) && f->cbfunc != nullptr)
        f->cbfunc(this, ep, f, Status::success);
    if (flags & btl::des_flags::btl_ownership) frags_.put(f);
}

Status UctModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                       btl::Tag tag) noexcept {
    if (!valid(endpoint) || descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    auto* f = static_cast<UctFrag*>(descriptor);
    if (!frags_.owns(f) || !f->in_use || descriptor->segments[0].len > f->capacity) [[unlikely]]
        return Status::bad_param;
    auto* ep = static_cast<UctEndpoint*>(endpoint);
    // Behind messages already waiting for the peer's FIFO: the queue first, in order.
    if (!ep->queued.empty() && (ep->failed || !send_queue_.send_queued(*ep))) [[unlikely]]
        return ep->failed ? Status::peer_failed : send_queue_.enqueue(ep, f, tag);
    Gather g{wire(Kind::message, tag), descriptor->segments[0].addr,
             static_cast<std::size_t>(descriptor->segments[0].len)};
    const Status s = transmit(ep, g);
    if (s == Status::out_of_resource) return send_queue_.enqueue(ep, f, tag);
    if (s != Status::completed) return s;
    finish_send(f, ep);
    return Status::completed;
}

// What the short paths share: the source of a payload that fits one am_short
// (with `total` bytes after the wire header), or nullptr.
[[gnu::always_inline]] inline const void* UctModule::short_source(btl::Endpoint* endpoint,
                                                                  btl::Convertor* convertor,
                                                                  std::size_t total,
                                                                  std::size_t payload) noexcept {
    if (total > max_short_ || payload == 0 || convertor == nullptr || !valid(endpoint) ||
        static_cast<UctEndpoint*>(endpoint)->failed ||
        !static_cast<UctEndpoint*>(endpoint)->queued.empty()) [[unlikely]]
        return nullptr;
    return convertor->contiguous_at(payload);
}

[[gnu::always_inline]] inline Status UctModule::short_sent(btl::Convertor* convertor,
                                                           std::size_t payload,
                                                           btl::Descriptor** descriptor) noexcept {
    convertor->skip(payload);
    if (descriptor != nullptr) *descriptor = nullptr;
    return Status::completed;
}

// The fast path, kept small: a short message from the caller's memory when the
// payload is one piece and there is no header (the raw btl, small active
// messages): one am_short, its header composed in a register.  A header (the
// pml's match header) goes to sendi_iov(), everything else, failures included,
// to sendi_gather(); both are tail calls, so this frame stays small.
Status UctModule::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                        std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                        std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    // Two tail calls with this signature, so sendi has no frame of its own
    // (with the raw path here, its saved registers cost the pml's messages 31
    // instructions each before the header was even looked at).
    if (header_size != 0)
        return sendi_iov(endpoint, convertor, header, header_size, payload_size, order, flags, tag,
                         descriptor);
    return sendi_raw(endpoint, convertor, payload_size, tag, descriptor, order, flags);
}

// No header: what is kept across UCT's call is fewer values (the fallback
// passes no header), so fewer registers are saved.
Status UctModule::sendi_raw(btl::Endpoint* endpoint, btl::Convertor* convertor,
                            std::size_t payload_size, btl::Tag tag, btl::Descriptor** descriptor,
                            std::uint8_t order, std::uint32_t flags) noexcept {
    if (const void* src = short_source(endpoint, convertor, payload_size, payload_size))
        [[likely]] {
        auto* ep = static_cast<UctEndpoint*>(endpoint);
        const ucs_status_t s =
            uct_ep_am_short(ep->ep, am_id, wire_word(wire(Kind::message, tag, ep)), src,
                            static_cast<unsigned>(payload_size));
        if (s == UCS_OK) [[likely]]
            return short_sent(convertor, payload_size, descriptor);
        // The FIFO is full: into the endpoint's queue (asking UCT again in
        // sendi_gather would only re-read the peer's tail).
        if (s == UCS_ERR_NO_RESOURCE)
            return take_in(endpoint, convertor, nullptr, 0, payload_size, order, tag, descriptor);
    }
    return sendi_gather(endpoint, convertor, nullptr, 0, payload_size, order, flags, tag,
                        descriptor);
}

constexpr std::size_t stack_gather_limit = 64;

// With a header: a small message is gathered on the stack and sent with
// am_short (UCT's iov variant costs more than the copy); a larger one goes as
// one am_short_iov of the wire header, the header and the payload, so nothing
// is gathered into a staging buffer first.
Status UctModule::sendi_iov(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                            std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                            std::uint32_t flags, btl::Tag tag,
                            btl::Descriptor** descriptor) noexcept {
    const std::size_t total = header_size + payload_size;
    const void* src = short_source(endpoint, convertor, total, payload_size);
    if (src != nullptr && header != nullptr && total <= stack_gather_limit) [[likely]] {
        alignas(8) std::byte buf[stack_gather_limit];
        copy_small(buf, header, header_size);  // uct_wire.hpp
        copy_small(buf + header_size, src, payload_size);
        const auto* ep = static_cast<UctEndpoint*>(endpoint);
        const ucs_status_t s =
            uct_ep_am_short(ep->ep, am_id, wire_word(wire(Kind::message, tag, ep)), buf,
                            static_cast<unsigned>(total));
        if (s == UCS_OK) [[likely]]
            return short_sent(convertor, payload_size, descriptor);
        if (s == UCS_ERR_NO_RESOURCE)
            return take_in(endpoint, convertor, header, header_size, payload_size, order, tag,
                           descriptor);
    } else if (src != nullptr && header != nullptr && short_iov_) {
        // One 8-byte store, read back whole by UCT's copy (forwarded).
        const std::uint64_t word =
            wire_word(wire(Kind::message, tag, static_cast<UctEndpoint*>(endpoint)));
        uct_iov_t iov[3] = {
            {const_cast<std::uint64_t*>(&word), sizeof word, UCT_MEM_HANDLE_NULL, 0, 1},
            {const_cast<void*>(header), header_size, UCT_MEM_HANDLE_NULL, 0, 1},
            {const_cast<void*>(src), payload_size, UCT_MEM_HANDLE_NULL, 0, 1}};
        const ucs_status_t s =
            uct_ep_am_short_iov(static_cast<UctEndpoint*>(endpoint)->ep, am_id, iov, 3);
        if (s == UCS_OK) [[likely]]
            return short_sent(convertor, payload_size, descriptor);
        if (s == UCS_ERR_NO_RESOURCE)
            return take_in(endpoint, convertor, header, header_size, payload_size, order, tag,
                           descriptor);
        if (s == UCS_ERR_UNSUPPORTED)
            short_iov_ = false;  // this transport gathers nothing itself: sendi_gather() does
    }
    return sendi_gather(endpoint, convertor, header, header_size, payload_size, order, flags, tag,
                        descriptor);
}

// sendi's general case: header and payload gathered into one message, or a
// descriptor handed back when the transport has no room.
Status UctModule::sendi_gather(btl::Endpoint* endpoint, btl::Convertor* convertor,
                               const void* header, std::size_t header_size,
                               std::size_t payload_size, std::uint8_t order, std::uint32_t flags,
                               btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    if (!valid(endpoint) ||
        !btl::sendi_arguments_valid(convertor, header, header_size, payload_size)) [[unlikely]]
        return Status::bad_param;
    auto* ep = static_cast<UctEndpoint*>(endpoint);
    const std::size_t total = header_size + payload_size;
    if (total <= attr_.max_send_size && payload_size <= attr_.eager_limit) {
        // Nothing overtakes the messages waiting for this peer's FIFO: they go first.
        if (!ep->queued.empty() && (ep->failed || !send_queue_.send_queued(*ep)))
            return ep->failed ? Status::peer_failed
                              : take_in(endpoint, convertor, header, header_size, payload_size,
                                        order, tag, descriptor);
        Gather g{wire(Kind::message, tag), header, header_size};
        g.convertor = payload_size > 0 ? convertor : nullptr;
        g.convertor_len = payload_size;
        const Status s = transmit(ep, g);
        if (s == Status::out_of_resource)
            return take_in(endpoint, convertor, header, header_size, payload_size, order, tag,
                           descriptor);
        return s;
    }
    ++sendi_refused_;
    if (descriptor != nullptr)
        *descriptor = btl::util::alloc_whole(*this, endpoint, order, total, flags);
    return Status::out_of_resource;
}

// sendi when UCT has no room, or messages wait already: the message is copied
// into a send fragment at the back of the endpoint's queue and is taken
// (completed: the caller's buffer is free again and the queue goes in order,
// at the next send to that peer or progress pass; the tcp btl's sendi
// appends to a burst the same way).  With no fragment free, nothing happens
// (out_of_resource, no descriptor either: alloc would fail too).
Status UctModule::take_in(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                          std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                          btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    const std::size_t total = header_size + payload_size;
    UctFrag* f = take();
    if (f == nullptr || total > f->capacity) [[unlikely]] {
        if (f != nullptr) frags_.put(f);
        ++sendi_refused_;
        return Status::out_of_resource;
    }
    std::byte* p = f->buffer + sizeof(WireHeader);
    if (header_size > 0) std::memcpy(p, header, header_size);
    if (payload_size > 0) convertor->pack(p + header_size, payload_size);
    f->seg = {p, total};
    btl::util::hand_out(*f, &f->seg, 1, btl::des_flags::btl_ownership, order);
    return send_queue_.enqueue(static_cast<UctEndpoint*>(endpoint), f, tag) == Status::success
               ? Status::completed
               : Status::out_of_resource;
}

// --- progress ----------------------------------------------------------------

void UctModule::update_progress() noexcept {
    const bool want = peer_count_ > 0 || ops_.pending() > 0 || target_.waiting() ||
                      receiver_.waiting() || outside_.keeps_progress();
    if (!btl::util::keep_registered(progress_, progress_handle_, want, &UctModule::progress_cb,
                                    this))
        report_error(btl::error_flags::fatal, any_rank, "cannot join the progress engine");
}

void UctModule::cancel_pending(UctEndpoint& e) noexcept {
    send_queue_.drop(e, Status::cancelled);
    ops_.end_ops(e.peer(), Status::cancelled);
}

void UctModule::progress_once() noexcept {
    poll();
    if (peer_watch_.failures()) peer_watch_.handle_failures();
}

int UctModule::progress_cb(void* self) noexcept {
    return static_cast<UctModule*>(self)->poll();
}

// The hot path is UCT's own progress; everything else waits behind one flag
// (and a tick every 1024 polls), so an idle poll costs little more than
// uct_worker_progress and a message is noticed sooner.  No store before UCT's
// progress: the re-entry guard is raised by the receiver's am_cb only
// around a delivery.
int UctModule::poll() noexcept {
    int events = 0;
    if (!receiver_.in_callback()) [[likely]]
        events += static_cast<int>(uct_.progress());
    ++polls_;
    if (attention_ || (polls_ & 1023) == 0) [[unlikely]]
        events += attend();
    return events;
}

int UctModule::attend() noexcept {
    attention_ = false;
    int events = 0;
    // Endpoints deleted since: nothing up the stack names them at depth 1.
    struct Depth {
        int& d;
        explicit Depth(int& x) : d(++x) {}
        ~Depth() { --d; }
    } depth(attend_depth_);
    if (attend_depth_ == 1 && !receiver_.in_callback() && !outside_.endpoints().empty())
        outside_.reap();
    if (target_.waiting()) events += target_.retry();
    if (ops_.waiting()) events += ops_.retry();
    if (ops_.done_due()) events += ops_.finish_native();
    if (send_queue_.queued() > 0) events += send_queue_.retry();
    if (send_queue_.done_due()) events += send_queue_.finish();
    if (ops_.flushes_due()) events += ops_.retry_flushes();
    if (resource_.dev_type != UCT_DEVICE_TYPE_NET &&
        ((polls_ & 1023) == 0 || (outside_.watching() && (polls_ & 15) == 0)))
        peer_watch_.check_local_peers();
    if (outside_.has_joining()) outside_.check_joining();
    if (outside_.awaiting_welcomes() && (polls_ & 15) == 0) outside_.check_welcomes();
    if (peer_watch_.failures()) peer_watch_.handle_failures();
    if (receiver_.dropped()) receiver_.report_dropped();
    if (receiver_.waiting()) events += receiver_.deliver();
    if (peer_count_ == 0) update_progress();
    // Callbacks above may have queued more; the flag follows the real state.
    attention_ = attention_ || needs_attention();
    return events;
}

bool UctModule::needs_attention() const noexcept {
    return target_.waiting() || ops_.waiting() || ops_.done_due() || send_queue_.pending() ||
           ops_.flushes_due() || peer_watch_.failures() || receiver_.dropped() ||
           receiver_.waiting() || peer_count_ == 0 || outside_.needs_attention();
}

// --- the rest ----------------------------------------------------------------

void UctModule::dump(btl::Endpoint*, int verbosity) {
    log::write(
        "btl:uct",
        fmt::format("{}: {} peers, fragments {}/{} free, {} one-sided operations in "
                    "flight, {} replies waiting, ring {} slots ({} queued, grown {} times), "
                    "{} registrations; native put/get {} ({} operations, {} fell back "
                    "to active messages), native atomics {} ({} operations)",
                    name(), peer_count_, frags_.available(), frags_.size(), ops_.pending(),
                    target_.replies_in_use(), receiver_.ring().capacity(),
                    receiver_.ring().queued(), receiver_.ring().grown(), regions_->live_count(),
                    one_sided_.native_put()
                        ? one_sided_.rdma_name() + (one_sided_.native_get() ? "" : " (put only)")
                        : std::string("off"),
                    one_sided_.native_ops(), one_sided_.fallbacks() + atomics_.fallbacks(),
                    atomics_.native() ? "on" : "off", atomics_.native_amos()));
    if (verbosity > 50)
        log::write("btl:uct",
                   fmt::format("  md {} am_short {} am_bcopy {} latency {:.0f} ns overhead {:.0f} "
                               "ns, exclusivity {} latency {} bandwidth {} MB/s",
                               resource_.md_name, max_short_, max_message_,
                               uct_.attr().latency.c * 1e9, uct_.attr().overhead * 1e9,
                               attr_.exclusivity, attr_.latency, attr_.bandwidth));
}

Status UctModule::finalize() {
    if (progress_handle_) progress_.remove(progress_handle_);
    progress_handle_ = {};
    if (uct_.is_open())
        out_.verbose(
            10,
            "{}: {} native put/get, {} native atomics, {} fell back to active messages; "
            "sendi refused {}, {} sends waited for the peer's FIFO ({} tries found no room)",
            name(), one_sided_.native_ops(), atomics_.native_amos(),
            one_sided_.fallbacks() + atomics_.fallbacks(), sendi_refused_,
            send_queue_.sends_queued(), send_queue_.queue_retries());
    if (ops_.pending() > 0)
        out_.verbose(1, "{}: finalize with {} one-sided operations in flight", name(),
                     ops_.pending());
    for (auto& e : by_rank_)
        if (e) farewells_.say_goodbye(*e);
    for (auto& e : outside_.endpoints())
        if (!e->deleted) farewells_.say_goodbye(*e);
    // Whatever still waits for a FIFO cannot go now: its descriptors go back
    // to the pool without callbacks (the upper layer is closing).
    std::size_t unsent = send_queue_.queued();
    for (auto& e : by_rank_)
        if (e) send_queue_.drop(*e, Status::cancelled);
    for (auto& e : outside_.endpoints()) send_queue_.drop(*e, Status::cancelled);
    if (unsent > 0) out_.verbose(1, "{}: finalize with {} messages unsent", name(), unsent);
    send_queue_.discard_done();
    // Endpoints before the interfaces, registrations before their memory
    // domain, the interfaces before the worker.
    by_rank_.clear();
    outside_.close();
    peer_count_ = 0;
    one_sided_.release_registrations();
    atomics_.free_allocations();
    one_sided_.close();
    uct_.close();
    return Status::success;
}

}  // namespace transit::uct
