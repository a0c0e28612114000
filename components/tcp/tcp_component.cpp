// The tcp component: parameters, open (interfaces), init (modules, listening
// sockets, modex), and the progress machinery shared by the modules.
#include "tcp_component.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "tcp_module.hpp"
#include "tcp_sigpipe.hpp"
#include "transit/params_bind.hpp"

namespace transit::tcp {

namespace {

using params::Type;

constexpr params::Field<TcpParams> param_table[] = {
    params::to<&TcpParams::if_include>(
        params::Decl{"if_include", Type::list, "",
                     "Interfaces tcp may use: names (eth0) or CIDR blocks (10.0.0.0/8, fd00::/64). "
                     "Cannot be combined with btl_tcp_if_exclude",
                     1}),
    params::to<&TcpParams::if_exclude>(
        params::Decl{"if_exclude", Type::list, "",
                     "Interfaces tcp must not use: names or CIDR blocks. Cannot be combined with "
                     "btl_tcp_if_include",
                     1}),
    params::to<&TcpParams::port_min>(params::Decl{
        "port_min", Type::unsigned_integer, "0",
        "First port tried for the listening sockets (0: any port the kernel chooses)", 2}
                                         .range(0, 65535)),
    params::to<&TcpParams::port_range>(
        params::Decl{"port_range", Type::unsigned_integer, "64511",
                     "Number of ports tried from btl_tcp_port_min upwards", 2}
            .range(0, 65536)),
    params::to<&TcpParams::links>(
        params::Decl{"links", Type::unsigned_integer, "1",
                     "Sockets per peer and interface; one-sided transfers are spread over them", 4}
            .range(1, 64)),
    params::to<&TcpParams::sndbuf>(
        params::Decl{"sndbuf", Type::size, "0", "Socket send buffer size (0: kernel autotuning)", 4}
            .range(0, INT32_MAX)),
    params::to<&TcpParams::rcvbuf>(params::Decl{
        "rcvbuf", Type::size, "0", "Socket receive buffer size (0: kernel autotuning)", 4}
                                       .range(0, INT32_MAX)),
    btl::inherit<TcpParams>(
        btl::BaseParam::eager_limit,
        {.default_value = "65600",
         .help = "Largest message sent eagerly, the pml's header included: the default "
                 "carries 64 KiB of payload eagerly (a rendezvous over tcp costs a round "
                 "trip more)",
         .max = 1 << 30}),
    btl::inherit<TcpParams>(btl::BaseParam::max_send_size, {.default_value = "128k", .min = 64}),
    params::to<&TcpParams::max_rdma_size>(
        params::Decl{"max_rdma_size", Type::size, "4M",
                     "Largest put or get carried in one request (the target streams it)", 4}
            .range(0, 1 << 30)),
    params::to<&TcpParams::splice_min>(
        params::Decl{"splice_min", Type::size, "0",
                     "Smallest put or get payload whose pages are lent to the socket (vmsplice "
                     "and splice) instead of copied into it: over loopback the receiver copies "
                     "straight from the sender's memory.  Unset: chosen per host by measuring "
                     "1 MiB transfers both ways once (kept in $XDG_CACHE_HOME/transit or "
                     "~/.cache/transit; btl_base_verbose=10 and transit_info --devices show the "
                     "choice).  0: always copy, nothing measured",
                     5}
            .range(0, 1 << 30)),
    params::to<&TcpParams::splice_max>(
        params::Decl{"splice_max", Type::size, "1M",
                     "Largest put or get payload whose pages are lent to the socket; larger "
                     "ones are copied.  A host that measured lending faster lends without "
                     "limit unless this is set.  0: no limit",
                     5}
            .range(0, 1 << 30)),
    params::to<&TcpParams::coalesce>(params::Decl{
        "coalesce", Type::boolean, "true",
        "Write a burst of small messages (sent with no progress call between them) in one "
        "system call at the next progress call; the first message of a burst leaves at once",
        5}),
    btl::inherit<TcpParams>(
        btl::BaseParam::free_list_max,
        {.default_value = "4096",
         .help = "Send fragments per size class before sends report out-of-resource"}),
    params::to<&TcpParams::max_rdma_ops>(
        params::Decl{"max_rdma_ops", Type::unsigned_integer, "1024",
                     "One-sided operations in flight per interface", 6}
            .range(1, 65535)),
    params::to<&TcpParams::connect_timeout>(
        params::Decl{"connect_timeout", Type::real, "10",
                     "Seconds a connection attempt and its handshake may take before it fails", 3}
            .real_range(0.001, 1e6)),
    params::to<&TcpParams::server_connect_timeout>(
        params::Decl{"server_connect_timeout", Type::real, "1",
                     "Seconds Context::connect waits for a server outside the job to accept the "
                     "connection (a server gone refuses it at once); connect fails with "
                     "'unreachable' after that.  0: connect on first use, not in connect",
                     4}
            .real_range(0, 1e6)),
    params::to<&TcpParams::refusals_logged>(
        params::Decl{"refusals_logged", Type::unsigned_integer, "5",
                     "Refused connections (strangers, garbage, timeouts) logged one by one per "
                     "btl_tcp_refusal_log_interval; the others are counted (btl_base_verbose=1 "
                     "logs each)",
                     5}
            .range(0, 1 << 20)),
    params::to<&TcpParams::refusal_log_interval>(params::Decl{
        "refusal_log_interval", Type::real, "60",
        "Seconds of the window in which btl_tcp_refusals_logged refusals are logged", 5}
                                                     .real_range(0.001, 1e6)),
    btl::inherit<TcpParams>(btl::BaseParam::exclusivity,
                            {.default_value = "0", .help = "Priority against other transports"}),
    btl::inherit<TcpParams>(btl::BaseParam::latency, {.default_value = "100"}),
    btl::inherit<TcpParams>(
        btl::BaseParam::bandwidth,
        {.default_value = "0",
         .help = "Bandwidth in MB/s used to weigh striping (0: from the interface speed)"}),
};

std::vector<std::string> drop_empty(std::vector<std::string> v) {
    std::erase_if(v, [](const std::string& s) { return s.empty(); });
    return v;
}

}  // namespace

TcpComponent::TcpComponent() = default;

TcpComponent::~TcpComponent() {
    stop_listener();
}

void TcpComponent::register_params(params::Registry& registry) {
    registry_ = &registry;
    params::add_all(registry, "btl", "tcp", param_table);
}

mca::OpenResult TcpComponent::open() {
    params::Registry& r = registry_ ? *registry_ : params::registry();
    params::bind(r, "btl", "tcp", param_table, params_);
    params_.if_include = drop_empty(std::move(params_.if_include));
    params_.if_exclude = drop_empty(std::move(params_.if_exclude));
    out_ = log::Stream("btl:tcp", btl::base_verbosity(r));

    // The registry checked the declared ranges; what follows spans parameters
    // or is a real number.
    if (params_.port_min + params_.port_range > 65536 + 65535)
        throw params::Error("btl_tcp_port_min + btl_tcp_port_range must be at most 131071");
    btl::require_eager_fits(r, "tcp");
    if (!(params_.connect_timeout > 0)) throw params::Error("btl_tcp_connect_timeout must be > 0");
    const double interval = params_.refusal_log_interval;
    if (!(interval > 0 && interval < 1e9))
        throw params::Error("btl_tcp_refusal_log_interval must be > 0 and < 1e9");
    // Both declared in range: the count fits, the interval is finite.
    const auto window = std::chrono::duration_cast<log::Limiter::Clock::duration>(
        std::chrono::duration<double>(interval));
    refusals_ = btl::util::RefusalLog("connections",
                                      static_cast<std::uint32_t>(params_.refusals_logged), window);
    rdma_refusals_ = btl::util::RefusalLog(
        "one-sided requests", static_cast<std::uint32_t>(params_.refusals_logged), window);

    std::vector<std::string> notes;
    // InterfaceError (both lists, a list matching nothing) propagates: a setting
    // the user got wrong is a failure with the reason, not a quiet decline.
    try {
        discovered_ = discover_interfaces();
        interfaces_ =
            filter_interfaces(discovered_, params_.if_include, params_.if_exclude, &notes);
    } catch (const InterfaceError& e) {
        // Under the default selection the framework drops a component whose
        // open fails with a line at btl_base_verbose only: the user set the
        // list, so the user is told tcp is not used, and why.
        log::error("btl:tcp: {}; tcp is not used", e.what());
        throw params::Error(e.what());
    }
    for (const std::string& n : notes) out_.verbose(20, "{}", n);
    if (interfaces_.empty()) return mca::OpenResult::decline("no usable IP interface is up");
    choose_splice_range(r);
    return mca::OpenResult::ok();
}

void TcpComponent::choose_splice_range(params::Registry& r) {
    // A value the user set wins; the host's measurement fills in the rest.
    const auto set_by_user = [&](params::Variable& v) -> std::optional<std::size_t> {
        if (v.source().origin == params::Origin::default_value) return std::nullopt;
        return static_cast<std::size_t>(v.as_unsigned());
    };
    splice_ = choose_splice(
        set_by_user(params::variable_of<&TcpParams::splice_min>(r, "btl", "tcp", param_table)),
        set_by_user(params::variable_of<&TcpParams::splice_max>(r, "btl", "tcp", param_table)),
        params_.splice_max);
    params_.splice_min = splice_.min;
    params_.splice_max = splice_.max;
    for (const std::string& n : splice_.notes) out_.verbose(10, "splice: {}", n);
    out_.verbose(10, "{}", splice_.describe());
}

std::vector<std::unique_ptr<btl::Module>> TcpComponent::init(btl::InitContext& ctx) {
    runtime_ = &ctx.runtime;
    progress_ = &ctx.progress;
    am_table_ = &ctx.am_table;
    std::vector<std::unique_ptr<btl::Module>> out;
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    listen_epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    accept_bell_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!epoll_ || !listen_epoll_ || !wake_ || !accept_bell_) {
        decline_reason_ = std::string("cannot create an epoll set: ") + std::strerror(errno);
        return out;
    }
    for (const Interface& i : interfaces_) {
        for (const InterfaceAddress& a : i.addresses) own_addresses_.push_back(a.address);
        has_loopback_ = has_loopback_ || i.loopback;
    }
    std::vector<PeerAddress> all;
    for (const Interface& i : interfaces_) {
        auto m = std::make_unique<TcpModule>(*this, i);
        try {
            m->listen();
        } catch (const std::exception& e) {
            out_.verbose(1, "interface {} not used: {}", i.name, e.what());
            continue;
        }
        for (const PeerAddress& a : m->published()) {
            all.push_back(a);
            address_owners_.push_back(m.get());
            out_.verbose(10, "{}: listening on {} port {}", m->name(), a.address.to_string(),
                         a.port);
        }
        modules_.push_back(m.get());
        out.push_back(std::move(m));
    }
    if (out.empty()) {
        decline_reason_ = "no interface could open a listening socket";
        return out;
    }
    const auto blob = encode_addresses(all);
    const Status s = runtime_->modex_send("btl.tcp.1", blob);
    if (!ok(s)) {
        decline_reason_ =
            std::string("publishing the addresses failed: ") + std::string(to_string(s));
        modules_.clear();
        address_owners_.clear();
        out.clear();
        return out;
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up eventfd
    ::epoll_ctl(listen_epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
    // In the progress set too, so a process asleep on it (wait_fd) wakes for
    // a new connection; poll() skips its events (no link), arm() drains it.
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, accept_bell_.get(), &ev);
    listener_ = std::thread([this] { listener_main(); });
    set_active(false);
    return out;
}

void TcpComponent::close() {
    stop_listener();
    report_unlogged_refusals(log::Limiter::Clock::time_point::max());
    if (progress_) {
        if (active_handle_) progress_->remove(active_handle_);
        if (idle_handle_) progress_->remove(idle_handle_);
    }
    active_handle_ = {};
    idle_handle_ = {};
    // Nothing may register a callback for a component that is going away.
    progress_ = nullptr;
    bury();
}

// --- sockets and progress ------------------------------------------------------

std::uint64_t TcpComponent::now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
           static_cast<std::uint64_t>(ts.tv_nsec);
}

bool TcpComponent::watch(Link& link, bool want_write) noexcept {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_write ? EPOLLOUT : 0u);
    ev.data.ptr = &link;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, link.fd.get(), &ev) != 0) return false;
    link.want_write = want_write;
    if (open_sockets_++ + held_ == 0) set_active(true);
    return true;
}

void TcpComponent::rewatch(Link& link, bool want_write) noexcept {
    epoll_event ev{};
    ev.events = EPOLLIN | (want_write ? EPOLLOUT : 0u);
    ev.data.ptr = &link;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, link.fd.get(), &ev);
    link.want_write = want_write;
}

void TcpComponent::unwatch(Link& link) noexcept {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, link.fd.get(), nullptr);
    if (--open_sockets_ + held_ == 0) set_active(false);
}

// Only ever one of the two callbacks is registered: the busy one polls epoll,
// the idle one only looks for sockets the listener thread accepted.
void TcpComponent::set_active(bool active) noexcept {
    if (!progress_) return;
    if (active) {
        if (idle_handle_) progress_->remove(idle_handle_);
        idle_handle_ = {};
        if (!active_handle_) active_handle_ = progress_->add(&progress_active, this);
    } else {
        if (active_handle_) progress_->remove(active_handle_);
        active_handle_ = {};
        if (!idle_handle_)
            idle_handle_ = progress_->add(&progress_idle, this, ProgressPriority::low);
    }
}

int TcpComponent::progress_idle(void* self) noexcept {
    auto* c = static_cast<TcpComponent*>(self);
    if (!c->accepted_pending_.load(std::memory_order_acquire)) return 0;
    c->adopt_accepted();
    return 1;
}

int TcpComponent::progress_active(void* self) noexcept {
    auto* c = static_cast<TcpComponent*>(self);
    if (c->accepted_pending_.load(std::memory_order_acquire)) c->adopt_accepted();
    return c->poll();
}

void TcpComponent::link_up(Link& link) noexcept {
    try {
        connected_.push_back(&link);
        link.listed = true;
    } catch (...) {
        // Without the entry the link is still served through epoll.
    }
}

void TcpComponent::link_down(Link& link) noexcept {
    if (link.listed) std::erase(connected_, &link);
    link.listed = false;
    link.burst_due = false;
}

void TcpComponent::flush_at_next_poll(Link& link) noexcept {
    if (!link.listed) return rewatch(link, true);  // only epoll would find it
    if (link.burst_due) return;
    link.burst_due = true;
    bursts_due_ = true;
}

void TcpComponent::flush_bursts() noexcept {
    bursts_due_ = false;  // bursts started by callbacks below wait for the next poll
    for (std::size_t i = 0; i < connected_.size();) {
        Link* l = connected_[i];
        if (l->burst_due) {
            l->burst_due = false;
            l->module->flush(*l);  // arms EPOLLOUT itself when the socket is full
        }
        // A link that failed in flush left the list: the next one took its place.
        if (i < connected_.size() && connected_[i] == l) ++i;
    }
}

int TcpComponent::poll() noexcept {
    // Every payload lent in this pass shares one SIGPIPE guard.
    const SigpipeScope sigpipe;
    events_ = 0;
    ++poll_count_;
    if (bursts_due_) flush_bursts();
    // Fast path: every open socket is a connected link with nothing queued;
    // read them directly and ask epoll only now and then (for errors seen only
    // as events).  One system call per poll instead of two on the latency path.
    // Only there may a pass be skipped while this transport carries nothing
    // (IdlePacer): anything else is a connection, a handshake or a queued
    // write in progress.
    const std::size_t n_direct = connected_.size();
    bool direct = n_direct != 0 && n_direct <= max_direct_links && n_direct == open_sockets_;
    for (std::size_t i = 0; direct && i < n_direct; ++i) direct = !connected_[i]->want_write;
    if (direct && !pacer_.due(false)) return 0;
    if (direct && (++polls_ & 63) != 0) {
        for (std::size_t i = 0; i < connected_.size(); ++i) {
            Link* l = connected_[i];
            l->module->on_event(*l, EPOLLIN);
        }
        bury();
        pacer_.found(events_, false);
        return events_;
    }
    epoll_event events[32];
    const int n = ::epoll_wait(epoll_.get(), events, 32, 0);
    int bells = 0;
    for (int i = 0; i < n; ++i) {
        auto* link = static_cast<Link*>(events[i].data.ptr);
        if (link == nullptr) {  // the accept bell: accepted_pending_ says the same
            drain_accept_bell();
            ++bells;
            continue;
        }
        link->module->on_event(*link, events[i].events);
    }
    // Connection attempts and handshakes have deadlines; look at them ten times a second.
    const std::uint64_t now = now_ns();
    if (now >= next_timeout_check_) {
        next_timeout_check_ = now + 100'000'000ull;
        check_timeouts(now);
    }
    bury();
    const int found = events_ + (n > 0 ? n - bells : 0);
    pacer_.found(found, !direct);
    return found;
}

void TcpComponent::check_timeouts(std::uint64_t now) noexcept {
    for (TcpModule* m : modules_) m->connector().check_timeouts(now);
    report_unlogged_refusals(log::Limiter::Clock::now());
}

void TcpComponent::drain_accept_bell() noexcept {
    std::uint64_t rung = 0;
    if (::read(accept_bell_.get(), &rung, sizeof rung) < 0) {
        // EAGAIN: not rung since it was last drained.
    }
}

btl::WaitObject::Armed TcpComponent::arm() noexcept {
    // Drained first, looked at after: the listener thread sets
    // accepted_pending_ before it rings, so a batch that comes between the two
    // is either seen here or rings the bell again.
    drain_accept_bell();
    if (accepted_pending_.load(std::memory_order_acquire) || bursts_due_)
        return btl::WaitObject::Armed::busy;
    return btl::WaitObject::Armed::armed;
}

// --- refusals ----------------------------------------------------------------------

// A stranger may connect thousands of times: the first few refusals of each
// window are logged with the address and the reason, the rest are counted.
void TcpComponent::refused(std::string_view where, std::string_view peer,
                           std::string_view reason) noexcept {
    report_unlogged_refusals(log::Limiter::Clock::now());
    refusals_.refused(out_, where, reason, "a connection from {}", peer);
}

// A peer holding the listen token may try keys: each wrong one is refused,
// the first few of each window logged, the rest counted.
void TcpComponent::rdma_refused(std::string_view where, const char* what, std::uint64_t address,
                                Rank peer, Status why) noexcept {
    report_unlogged_refusals(log::Limiter::Clock::now());
    rdma_refusals_.refused(out_, where, to_string(why), "{} at 0x{:x} from rank {}", what, address,
                           peer);
}

void TcpComponent::report_unlogged_refusals(log::Limiter::Clock::time_point now) noexcept {
    refusals_.report_unlogged("tcp", now);
    rdma_refusals_.report_unlogged("tcp", now);
}

void TcpComponent::hold(int delta) noexcept {
    const std::size_t before = open_sockets_ + held_;
    held_ = static_cast<std::size_t>(static_cast<long>(held_) + delta);
    const std::size_t after = open_sockets_ + held_;
    if ((before == 0) != (after == 0)) set_active(after != 0);
}

btl::RegistrationHandle* TcpComponent::register_mem(Rank peer, void* base, std::size_t size,
                                                    std::uint32_t access) {
    if (base == nullptr && size != 0) return nullptr;
    const auto [r, key] = registrations_.add();
    if (r == nullptr) return nullptr;
    r->packed = {key, reinterpret_cast<std::uint64_t>(base), size, access, peer};
    return reinterpret_cast<btl::RegistrationHandle*>(&r->packed);
}

Status TcpComponent::deregister_mem(btl::RegistrationHandle* handle) {
    if (handle == nullptr) return Status::bad_param;
    TcpRecord* r = registrations_.live(handle);
    if (r == nullptr) return Status::not_found;
    registrations_.remove(*r);
    return Status::success;
}

void TcpComponent::defer_free(std::unique_ptr<Link> link) noexcept {
    // A link may still be named by an event later in the current epoll batch.
    link->next_dead = std::move(graveyard_);
    graveyard_ = std::move(link);
}

void TcpComponent::defer_free(std::unique_ptr<TcpEndpoint> endpoint) noexcept {
    // Its links may still be named by events later in the current epoll batch,
    // or be the one whose frame is being handled.
    endpoint->next_dead = std::move(endpoint_graveyard_);
    endpoint_graveyard_ = std::move(endpoint);
}

// --- accepting -------------------------------------------------------------------

void TcpComponent::watch_listener(int fd, TcpModule* module) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = module;
    // The listener thread reads fd from the module only through this event.
    static_assert(sizeof(ev.data) >= sizeof(void*));
    std::lock_guard lock(accepted_lock_);
    if (::epoll_ctl(listen_epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
        throw std::runtime_error(std::string("epoll_ctl: ") + std::strerror(errno));
    listen_fds_.emplace_back(fd, module);
}

void TcpComponent::forget_module(TcpModule* module) {
    std::replace(address_owners_.begin(), address_owners_.end(), module,
                 static_cast<TcpModule*>(nullptr));
    {
        std::lock_guard lock(accepted_lock_);
        for (auto it = listen_fds_.begin(); it != listen_fds_.end();) {
            if (it->second == module) {
                ::epoll_ctl(listen_epoll_.get(), EPOLL_CTL_DEL, it->first, nullptr);
                it = listen_fds_.erase(it);
            } else {
                ++it;
            }
        }
        std::erase_if(accepted_, [&](Accepted& a) {
            if (a.module != module) return false;
            ::close(a.fd);
            return true;
        });
    }
    std::erase(modules_, module);
}

void TcpComponent::listener_main() {
    epoll_event events[16];
    for (;;) {
        const int timeout_ms = accept_paused_ ? accept_retry_ms : -1;
        const int n = ::epoll_wait(listen_epoll_.get(), events, 16, timeout_ms);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return;
        if (n == 0) {  // the pause is over: try again
            std::lock_guard lock(accepted_lock_);
            arm_listeners(true);
            continue;
        }
        for (int i = 0; i < n; ++i) {
            if (events[i].data.ptr == nullptr) return;  // woken to stop
            accept_from(static_cast<TcpModule*>(events[i].data.ptr));
        }
    }
}

void TcpComponent::accept_from(TcpModule* module) {
    std::lock_guard lock(accepted_lock_);
    for (const auto& [fd, m] : listen_fds_) {
        if (m != module) continue;
        for (;;) {
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            const int c =
                ::accept4(fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (c < 0) {
                const int e = errno;
                if (e == EAGAIN || e == EWOULDBLOCK) {
                    accepting_again();
                    break;
                }
                // A connection reset before it was accepted: take the next one.
                if (e == ECONNABORTED || e == EINTR || e == EPROTO || e == EPERM) continue;
                cannot_accept(e);
                return;
            }
            accepted_.push_back(
                {c, m, IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss)).to_string()});
            accepted_pending_.store(true, std::memory_order_release);
            const std::uint64_t one = 1;
            if (::write(accept_bell_.get(), &one, sizeof one) < 0) {
                // The counter is full: it is readable, which is all a sleeper needs.
            }
        }
    }
}

// Out of descriptors (or kernel memory), the listening sockets stay readable
// and accept fails at once: waiting in epoll_wait for them would spin.  They
// are taken out of the wait for a while; the connections wait in the backlog
// and are accepted once descriptors are free again.
void TcpComponent::cannot_accept(int error) {
    if (!accept_paused_) arm_listeners(false);
    if (exhausted_since_ != std::chrono::steady_clock::time_point{}) return;
    exhausted_since_ = std::chrono::steady_clock::now();
    exhaustion_logged_ = exhaustion_log_.admit(exhausted_since_);
    if (!exhaustion_logged_) return;
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    try {
        log::warn(
            "tcp: cannot accept connections: {} (descriptor limit {}, ulimit -n); retrying "
            "every {} ms, waiting connections are accepted when descriptors are free",
            std::strerror(error), lim.rlim_cur, accept_retry_ms);
    } catch (...) {
        // Out of memory too: the pause matters, not the line.
    }
}

void TcpComponent::accepting_again() {
    if (exhausted_since_ == std::chrono::steady_clock::time_point{}) return;
    const std::chrono::duration<double> paused =
        std::chrono::steady_clock::now() - exhausted_since_;
    exhausted_since_ = {};
    if (!exhaustion_logged_) return;
    try {
        log::warn("tcp: accepting connections again after {:.1f} s", paused.count());
    } catch (...) {
        // As above.
    }
}

// With accepted_lock_ held: it guards listen_fds_.
void TcpComponent::arm_listeners(bool armed) {
    accept_paused_ = !armed;
    for (const auto& [fd, m] : listen_fds_) {
        epoll_event ev{};
        ev.events = armed ? std::uint32_t{EPOLLIN} : 0u;
        ev.data.ptr = m;
        ::epoll_ctl(listen_epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
    }
}

void TcpComponent::adopt_accepted() noexcept {
    std::vector<Accepted> batch;
    {
        std::lock_guard lock(accepted_lock_);
        batch.swap(accepted_);
        accepted_pending_.store(false, std::memory_order_relaxed);
    }
    for (Accepted& a : batch) a.module->connector().on_accepted(a.fd, std::move(a.peer));
}

void TcpComponent::stop_listener() noexcept {
    if (listener_.joinable()) {
        const std::uint64_t one = 1;
        if (::write(wake_.get(), &one, sizeof one) < 0) {
            // The thread cannot be woken; leave it: it holds no resources we free.
            listener_.detach();
        } else {
            listener_.join();
        }
    }
    std::lock_guard lock(accepted_lock_);
    for (Accepted& a : accepted_) ::close(a.fd);
    accepted_.clear();
}

}  // namespace transit::tcp

extern "C" __attribute__((visibility("default")))
const transit_component_descriptor transit_btl_tcp_component =
    transit::mca::make_descriptor<transit::tcp::TcpComponent>("btl", transit::btl_interface_version,
                                                              "tcp", {1, 0, 0});
