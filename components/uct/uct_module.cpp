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
    sender_.setup(uct_.attr());
    // Upper-layer payload per message; every process must agree, which holds
    // when they run the same transport with the same UCX configuration.
    std::size_t max_send = sender_.max_message() - sizeof(WireHeader);
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
    const std::size_t chunk = sender_.max_message() - sizeof(WireHeader) -
                              std::max(sizeof(RdmaRequest), sizeof(RdmaReply));
    ops_.setup(config_.max_rdma_ops, chunk);
    target_.setup(config_.max_rdma_ops, chunk);
    // Slots for the common size; larger messages (over tcp) wait beside them.
    receiver_.setup(
        config_.recv_ring,
        std::min(std::max(sender_.max_message(), sender_.max_short() + 8), ring_slot_max));
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
                unreached_.set(peer, std::move(why));
                continue;
            }
        }
        unreached_.clear(peer);
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

btl::Descriptor* UctModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                  std::uint32_t flags) noexcept {
    if (!valid(endpoint)) [[unlikely]]
        return nullptr;
    UctFrag* f = frags_.get();
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
    UctFrag* f = frags_.get();
    if (f == nullptr) return nullptr;
    std::byte* payload = f->buffer + sizeof(WireHeader);
    size = convertor.pack(payload + reserve, std::min(size, f->capacity - reserve));
    f->seg = {payload, reserve + size};
    btl::util::hand_out(*f, &f->seg, 1, flags, order);
    return f;
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
    // A send that completes at once leaves nothing in flight, yet its answer
    // is coming: the transport is polled on every pass again (IdlePacer).
    pacer_.wake();
    if (header_size != 0)
        return sender_.sendi_iov(endpoint, convertor, header, header_size, payload_size, order,
                                 flags, tag, descriptor);
    return sender_.sendi_raw(endpoint, convertor, payload_size, tag, descriptor, order, flags);
}

Status UctModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                       btl::Tag tag) noexcept {
    pacer_.wake();
    return sender_.send(endpoint, descriptor, tag);
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
    auto* m = static_cast<UctModule*>(self);
    const bool busy = m->in_flight();
    if (!m->pacer_.due(busy)) return 0;
    const int events = m->poll();
    m->pacer_.found(events, busy);
    return events;
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
                               resource_.md_name, sender_.max_short(), sender_.max_message(),
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
            one_sided_.fallbacks() + atomics_.fallbacks(), sender_.refused(),
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
