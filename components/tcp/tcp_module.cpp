// The tcp module's operations: listening, peers, descriptors, the send path,
// finalize, and failing a link or an endpoint.
#include "tcp_module.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

namespace transit::tcp {

namespace {

std::string errno_text(int e) {
    return std::strerror(e);
}

unsigned interface_bandwidth(const Interface& i) {
    if (i.loopback) return 10000;
    std::ifstream f("/sys/class/net/" + i.name + "/speed");
    long mbit = 0;
    if (f >> mbit && mbit > 0) return static_cast<unsigned>(mbit / 8);
    return 1000;  // virtual NICs report no speed: assume a 10 Gb/s class link
}

void set_int_option(int fd, int level, int name, int value) noexcept {
    ::setsockopt(fd, level, name, &value, sizeof value);
}

// Socket options every data socket gets: small frames go out at once, and the
// buffers are fixed only when asked (0 leaves the kernel's autotuning on).
void tune_socket(int fd, const TcpParams& p) noexcept {
    set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    if (p.sndbuf > 0) set_int_option(fd, SOL_SOCKET, SO_SNDBUF, static_cast<int>(p.sndbuf));
    if (p.rcvbuf > 0) set_int_option(fd, SOL_SOCKET, SO_RCVBUF, static_cast<int>(p.rcvbuf));
}

// A peer outside the job (rt::DynamicPeers) that is not released.
bool is_dynamic(rt::Runtime& rt, Rank rank) noexcept {
    if (rank < rt.size()) return false;
    rt::DynamicPeers* d = rt.dynamic_peers();
    return d && d->is_dynamic(rank);
}

// Paths over the other interfaces than `first`, after its own: an interface
// whose pair looks right (a subnet both nodes have) may lead nowhere, and the
// peer is then reached by another.  Each still names the module's first
// remote address as its target, so the peer files the link under the module
// that address belongs to.  Among equal scores the faster interface first.
void add_other_paths(std::vector<AddressPair>& paths, std::span<const PeerAddress> remote,
                     const PairContext& ctx, const TcpComponent& tcp, const Interface& first) {
    const std::uint32_t meant = paths.front().remote_index;
    const std::size_t own = paths.size();
    for (const Interface& other : tcp.interfaces()) {
        if (other.name == first.name) continue;
        const unsigned speed = interface_bandwidth(other);
        for (AddressPair& p : rank_pairs(other, remote, ctx)) {
            p.score = p.score * 100000 + static_cast<int>(std::min(speed, 99999u));
            paths.push_back(std::move(p));
        }
    }
    std::stable_sort(paths.begin() + static_cast<std::ptrdiff_t>(own), paths.end(),
                     [](const AddressPair& a, const AddressPair& b) { return a.score > b.score; });
    for (AddressPair& p : paths)
        if (p.remote_index != meant) p.target = meant + 1;
}

}  // namespace

// --- construction ------------------------------------------------------------------

TcpModule::TcpModule(TcpComponent& component, Interface iface)
    : btl::Module(component),
      tcp_(component),
      iface_(std::move(iface)),
      // Requests are bounded by the op table, replies by the peers' op tables.
      control_(std::make_unique<FragPool>(0, 64, 0)),
      rdma_(*this, component, *control_, limits_),
      atomics_(*this, component, rdma_),
      wait_(component),
      receiver_(*this, component, rdma_, atomics_, limits_),
      connector_(*this, component, receiver_, pipe_) {
    const TcpParams& p = component.params();
    attr_.eager_limit = p.eager_limit;
    attr_.rndv_eager_limit = p.eager_limit;
    attr_.max_send_size = p.max_send_size;
    attr_.rdma_pipeline_send_length = p.max_rdma_size;
    attr_.rdma_pipeline_frag_size = p.max_rdma_size;
    attr_.min_rdma_pipeline_size = 0;
    attr_.exclusivity = p.exclusivity;
    attr_.latency = p.latency;
    attr_.bandwidth = p.bandwidth ? p.bandwidth : interface_bandwidth(iface_);
    // Not flags::thread_safe: the per-peer send queues, the fragment free lists
    // and the endpoints' connection state are unlocked (only the listener
    // thread's hand-over of accepted sockets is).
    attr_.flags = btl::flags::send | btl::flags::put | btl::flags::get | btl::flags::atomic_ops |
                  btl::flags::atomic_fops | btl::flags::dynamic_peers;
    // A dead peer's kernel closes its connections: the link's state says so.
    attr_.flags |= btl::flags::reports_peer_loss;
    attr_.reach = btl::reach::node | btl::reach::remote;
    namespace as = btl::atomic_support;
    attr_.atomic_flags = as::add | as::and_ | as::or_ | as::xor_ | as::land | as::lor | as::lxor |
                         as::swap | as::min | as::max | as::cswap | as::bits32;
    attr_.registration_handle_size = packed_registration_size;
    attr_.put_limit = p.max_rdma_size;
    attr_.get_limit = p.max_rdma_size;
    // The target moves the data itself, so local memory never needs registering.
    attr_.put_local_registration_threshold = std::numeric_limits<std::size_t>::max();
    attr_.get_local_registration_threshold = std::numeric_limits<std::size_t>::max();

    limits_.max_am = static_cast<std::uint32_t>(p.max_send_size);
    limits_.max_rdma = static_cast<std::uint32_t>(p.max_rdma_size);
    eager_ = std::make_unique<FragPool>(p.eager_limit, 32, p.free_list_max);
    max_ = std::make_unique<FragPool>(p.max_send_size, 4, p.free_list_max);
    endpoints_.resize(component.runtime().size());
}

TcpModule::~TcpModule() {
    if (!finalized_) finalize();
}

void TcpModule::listen() {
    const TcpParams& p = tcp_.params();
    std::string errors;
    for (const InterfaceAddress& a : iface_.addresses) {
        Fd s(::socket(a.address.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!s) {
            errors += " socket: " + errno_text(errno);
            continue;
        }
        set_int_option(s.get(), SOL_SOCKET, SO_REUSEADDR, 1);
        if (a.address.family == AF_INET6) set_int_option(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, 1);
        // Accepted sockets inherit the buffer sizes, which must be set before listen.
        tune_socket(s.get(), p);
        const unsigned first = p.port_min;
        const unsigned count = p.port_min == 0 ? 1 : std::max(1u, p.port_range);
        int bind_errno = 0;
        bool bound = false;
        for (unsigned k = 0; k < count && first + k <= 65535 && !bound; ++k) {
            sockaddr_storage ss;
            const socklen_t len = a.address.to_sockaddr(static_cast<std::uint16_t>(first + k), ss);
            bound = ::bind(s.get(), reinterpret_cast<sockaddr*>(&ss), len) == 0;
            if (!bound) bind_errno = errno;
            if (!bound && bind_errno != EADDRINUSE) break;
        }
        if (!bound || ::listen(s.get(), 128) != 0) {
            errors += " " + a.address.to_string() + ": " + errno_text(bound ? errno : bind_errno);
            continue;
        }
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&ss), &len);
        const std::uint16_t port = a.address.family == AF_INET
                                       ? ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port)
                                       : ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
        published_.push_back({a.address, a.prefix, iface_.loopback, port});
        tcp_.watch_listener(s.get(), this);
        listeners_.push_back(std::move(s));
    }
    if (listeners_.empty()) throw std::runtime_error("cannot listen:" + errors);
}

// --- peers -----------------------------------------------------------------------------

TcpEndpoint* TcpModule::endpoint_for(Rank rank) {
    // A peer outside the job is one connection: each would be another client.
    const bool dynamic = rank >= tcp_.runtime().size();
    auto& slot = dynamic ? dynamic_[rank] : endpoints_.at(rank);
    if (!slot) slot = std::make_unique<TcpEndpoint>(*this, rank, dynamic ? 1 : tcp_.params().links);
    return slot.get();
}

TcpEndpoint* TcpModule::existing_endpoint(Rank rank) const noexcept {
    if (rank < endpoints_.size()) return endpoints_[rank].get();
    auto it = dynamic_.find(rank);
    return it == dynamic_.end() ? nullptr : it->second.get();
}

Status TcpModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                            btl::Reachability& reachable) {
    const log::Stream& out = tcp_.out();
    rt::Runtime& rt = tcp_.runtime();
    try {
        for (std::size_t i = 0; i < peers.size(); ++i) {
            const Rank rank = peers[i];
            const bool dynamic = is_dynamic(rt, rank);
            if (rank == rt.rank() || (rank >= rt.size() && !dynamic)) continue;
            // A client that connected to this module: its link is the way.
            if (TcpEndpoint* known = dynamic ? existing_endpoint(rank) : nullptr;
                known && !known->deleted) {
                endpoints[i] = known;
                reachable.set(i);
                continue;
            }
            std::vector<std::byte> blob;
            if (!ok(rt.modex_recv(rank, "btl.tcp.1", blob))) {
                out.verbose(10, "{}: rank {} published no tcp address", name(), rank);
                continue;
            }
            std::vector<PeerAddress> remote;
            try {
                remote = decode_addresses(blob);
            } catch (const InterfaceError& e) {
                out.verbose(1, "{}: rank {}: {}", name(), rank, e.what());
                continue;
            }
            PairContext ctx;
            ctx.same_node = rt.on_this_node(rank);
            ctx.loopback_available =
                tcp_.has_loopback_module() &&
                std::any_of(remote.begin(), remote.end(), [](auto& a) { return a.loopback; });
            ctx.own_addresses = tcp_.own_addresses();
            std::vector<std::string> notes;
            std::vector<AddressPair> paths = rank_pairs(iface_, remote, ctx, &notes);
            for (const std::string& n : notes)
                out.verbose(20, "{} -> rank {}: {}", name(), rank, n);
            if (paths.empty()) {
                out.verbose(10, "{}: rank {} not reached from this interface", name(), rank);
                continue;
            }
            const AddressPair& first = paths.front();
            out.verbose(10, "{}: rank {} via {} -> {} port {}: {}", name(), rank,
                        first.local.address.to_string(), first.remote.address.to_string(),
                        first.remote.port, first.reason);
            add_other_paths(paths, remote, ctx, tcp_, iface_);
            for (std::size_t k = 1; k < paths.size(); ++k)
                out.verbose(20, "{}: rank {} path {}: {} -> {} port {}: {}", name(), rank, k + 1,
                            paths[k].local.address.to_string(), paths[k].remote.address.to_string(),
                            paths[k].remote.port, paths[k].reason);
            TcpEndpoint* ep = endpoint_for(rank);
            if (ep->deleted) revive(*ep);
            ep->paths = std::move(paths);
            if (dynamic) {
                if (const std::string why = connector_.connect_server(*ep); !why.empty()) {
                    // Another module may reach it: the bml says so if none does.
                    unreached_.set(rank, "the server is not there: " + why);
                    out.verbose(1, "{}: the server (peer {}) is not there: {}", name(), rank, why);
                    // Nothing of it is watched any more; freed after the
                    // current poll all the same, should one be running.
                    auto it = dynamic_.find(rank);
                    tcp_.defer_free(std::move(it->second));
                    dynamic_.erase(it);
                    continue;
                }
            }
            unreached_.clear(rank);
            endpoints[i] = ep;
            reachable.set(i);
        }
    } catch (const std::exception& e) {
        log::error("{}: add_procs: {}", name(), e.what());
        return Status::error;
    }
    return Status::success;
}

Status TcpModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    for (std::size_t i = 0; i < peers.size() && i < endpoints.size(); ++i) {
        auto* ep = static_cast<TcpEndpoint*>(endpoints[i]);
        if (ep == nullptr || &ep->module() != this) continue;
        say_goodbye(*ep);
        ep->failed = true;  // quietly: nobody is interested in this peer any more
        ep->deleted = true;
        for (std::size_t k = 0; k < ep->link_count(); ++k) {
            Link& l = ep->link(k);
            connector_.close_socket(l);
            while (Frag* f = l.queue.pop()) complete_frag(f, Status::cancelled);
        }
        rdma_.complete_ops(ep, Status::cancelled);
        // A peer outside the job never comes back (ids are not reused): its
        // endpoint goes, once no event of the current poll can name it.
        if (auto it = dynamic_.find(ep->peer()); it != dynamic_.end()) {
            tcp_.defer_free(std::move(it->second));
            dynamic_.erase(it);
        }
        endpoints[i] = nullptr;
    }
    return Status::success;
}

// A peer deleted and now added again: its links start over (idle, connected
// again by the first send or by the peer).
void TcpModule::revive(TcpEndpoint& ep) noexcept {
    ep.deleted = false;
    ep.failed = false;
    for (std::size_t k = 0; k < ep.link_count(); ++k) {
        Link& l = ep.link(k);
        connector_.close_socket(l);
        connector_.set_state(l, LinkState::idle);
        l.deadline_ns = 0;
    }
}

void TcpModule::on_event(Link& l, std::uint32_t events) noexcept {
    // Events are hints: the socket calls below decide what really happened (an
    // event may even name a socket this link has replaced in the same batch).
    switch (l.state) {
        case LinkState::probing:
            if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) connector_.on_probe(l);
            break;
        case LinkState::hello_sent:
        case LinkState::accepting:
            if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) connector_.on_handshake_input(l);
            break;
        case LinkState::connected:
            if ((events & EPOLLOUT) && !l.queue.empty()) flush(l);
            if (l.state == LinkState::connected && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                receiver_.on_readable(l);
            break;
        default:
            break;
    }
}

// --- descriptors -----------------------------------------------------------------------

btl::Descriptor* TcpModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                  std::uint32_t flags) noexcept {
    FragPool& pool = size <= eager_->capacity() ? *eager_ : *max_;
    if (size > max_->capacity()) size = max_->capacity();
    Frag* f = pool.get();
    if (f == nullptr) return nullptr;
    f->kind = FragKind::user;
    f->segment = {f->payload(), size};
    f->segments = &f->segment;
    f->segment_count = 1;
    f->flags = flags;
    f->order = order;
    f->endpoint = static_cast<TcpEndpoint*>(endpoint);
    return f;
}

Status TcpModule::free(btl::Descriptor* descriptor) noexcept {
    auto* f = static_cast<Frag*>(descriptor);
    if (f == nullptr || f->queued) return Status::bad_param;
    f->pool->put(f);
    return Status::success;
}

btl::Descriptor* TcpModule::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                        std::uint8_t order, std::size_t reserve, std::size_t& size,
                                        std::uint32_t flags) noexcept {
    if (reserve > attr_.max_send_size) return nullptr;
    std::size_t want = std::min(size, convertor.remaining());
    want = std::min(want, attr_.max_send_size - reserve);
    auto* f = static_cast<Frag*>(alloc(endpoint, order, reserve + want, flags));
    if (f == nullptr) return nullptr;
    size = convertor.pack(f->payload() + reserve, want);
    f->segment.len = reserve + size;
    return f;
}

// --- sending ---------------------------------------------------------------------------

TcpModule::WriteResult TcpModule::write_frag(Link& l, Frag* f) noexcept {
    if (f->by_reference) {
        const WriteResult r = write_spliced(l, f);
        if (f->by_reference) return r;  // else the pipe was not there: copy
    }
    msghdr m{};
    m.msg_iov = f->iov + f->iov_index;
    m.msg_iovlen = static_cast<std::size_t>(f->iov_count - f->iov_index);
    const ssize_t n = ::sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return would_block(errno) ? WriteResult::partial : WriteResult::error;
    auto left = static_cast<std::size_t>(n);
    while (f->iov_index < f->iov_count) {
        iovec& v = f->iov[f->iov_index];
        if (left < v.iov_len) {
            v.iov_base = static_cast<char*>(v.iov_base) + left;
            v.iov_len -= left;
            return WriteResult::partial;
        }
        left -= v.iov_len;
        ++f->iov_index;
    }
    return WriteResult::done;
}

// The front (frame header and request or reply) is written as usual, marked
// as more to come; the payload goes through the module's pipe.
TcpModule::WriteResult TcpModule::write_spliced(Link& l, Frag* f) noexcept {
    if (f->iov_index == 0) {
        iovec& front = f->iov[0];
        const ssize_t n = ::send(l.fd.get(), front.iov_base, front.iov_len,
                                 MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
        if (n < 0) return would_block(errno) ? WriteResult::partial : WriteResult::error;
        front.iov_base = static_cast<char*>(front.iov_base) + n;
        front.iov_len -= static_cast<std::size_t>(n);
        if (front.iov_len > 0) return WriteResult::partial;
        f->iov_index = 1;
    }
    switch (pipe_.write(&l, l.fd.get(), f->iov[1])) {
        case SplicePipe::Result::done:
            f->iov_index = f->iov_count;
            return WriteResult::done;
        case SplicePipe::Result::partial:
            return WriteResult::partial;
        case SplicePipe::Result::error:
            return WriteResult::error;
        case SplicePipe::Result::unavailable:
            break;
    }
    f->by_reference = false;
    return WriteResult::partial;
}

Status TcpModule::enqueue(Link& l, Frag* f) noexcept {
    tcp_.sending();
    if (l.state == LinkState::connected && l.queue.empty()) {
        switch (write_frag(l, f)) {
            case WriteResult::done:
                return Status::completed;
            case WriteResult::partial:
                break;
            case WriteResult::error: {
                const int e = errno;
                fail_link(l, "send failed: " + errno_text(e));
                return Status::peer_failed;
            }
        }
        l.queue.push(f);
        f->queued = true;
        if (!l.want_write) tcp_.rewatch(l, true);
        return Status::success;
    }
    if (l.state == LinkState::closed) return Status::peer_failed;
    if (l.state == LinkState::idle) {
        const std::string why = connector_.start_connect(l);
        if (!why.empty()) {
            fail_endpoint(*l.endpoint, why);
            return Status::unreachable;
        }
    }
    l.queue.push(f);
    f->queued = true;
    return Status::success;
}

void TcpModule::send_control(Link& l, Frag* f) noexcept {
    f->kind = FragKind::control;
    f->endpoint = l.endpoint;
    const Status s = enqueue(l, f);
    if (s != Status::success) control_->put(f);  // written inline, or the link failed
}

void TcpModule::flush(Link& l) noexcept {
    while (Frag* f = l.queue.head) {
        switch (write_frag(l, f)) {
            case WriteResult::done:
                l.queue.pop();
                complete_frag(f, Status::success);
                if (l.state != LinkState::connected) return;
                continue;
            case WriteResult::partial:
                if (!l.want_write) tcp_.rewatch(l, true);
                return;
            case WriteResult::error: {
                const int e = errno;
                fail_link(l, "send failed: " + errno_text(e));
                return;
            }
        }
    }
    if (l.want_write && l.has_socket()) tcp_.rewatch(l, false);
}

void TcpModule::complete_frag(Frag* f, Status status) noexcept {
    f->queued = false;
    tcp_.count_event();
    if (f->kind == FragKind::control) {
        f->pool->put(f);
        return;
    }
    const bool owned = (f->flags & btl::des_flags::btl_ownership) != 0;
    if (f->cbfunc) f->cbfunc(this, f->endpoint, f, status);
    if (owned) f->pool->put(f);
}

Status TcpModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                       btl::Tag tag) noexcept {
    auto* ep = static_cast<TcpEndpoint*>(endpoint);
    auto* f = static_cast<Frag*>(descriptor);
    if (ep == nullptr || f == nullptr || f->segment.len > f->capacity) return Status::bad_param;
    if (ep->failed) return Status::peer_failed;
    const wire::FrameHeader h{wire::frame_magic, wire::FrameType::am, tag, 0,
                              static_cast<std::uint32_t>(f->segment.len)};
    wire::encode(h, f->payload() - wire::header_size);
    f->set_contiguous(wire::header_size, f->segment.len);
    f->endpoint = ep;
    f->kind = FragKind::user;
    const Status s = enqueue(ep->am_link(), f);
    if (s != Status::completed) return s;
    if ((f->flags & btl::des_flags::send_always_callback) && f->cbfunc)
        f->cbfunc(this, ep, f, Status::success);
    if (f->flags & btl::des_flags::btl_ownership) f->pool->put(f);
    return Status::completed;
}

Status TcpModule::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                        std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                        std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    auto* ep = static_cast<TcpEndpoint*>(endpoint);
    if (descriptor) *descriptor = nullptr;
    if (ep == nullptr) return Status::bad_param;
    if (ep->failed) return Status::peer_failed;
    const std::size_t total = header_size + payload_size;
    if (total > attr_.max_send_size) return Status::bad_param;
    Link& l = ep->am_link();
    const void* payload = nullptr;
    if (payload_size > 0) {
        if (convertor == nullptr) return Status::bad_param;
        payload = convertor->contiguous_at(payload_size);
    }
    const bool contiguous = payload_size == 0 || payload;
    if (l.state == LinkState::connected && contiguous && joins_burst(l, total) &&
        append_to_burst(l, tag, header, header_size, payload, payload_size)) {
        if (payload_size) convertor->skip(payload_size);
        return Status::completed;
    }
    if (l.state == LinkState::connected && l.queue.empty() && contiguous) {
        l.last_direct_poll = tcp_.poll_count();
        tcp_.sending();
        std::byte fh[wire::header_size];
        wire::encode(wire::FrameHeader{wire::frame_magic, wire::FrameType::am, tag, 0,
                                       static_cast<std::uint32_t>(total)},
                     fh);
        iovec iov[3] = {{fh, sizeof fh},
                        {const_cast<void*>(header), header_size},
                        {const_cast<void*>(payload), payload_size}};
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = payload_size ? 3 : 2;
        const ssize_t n = ::sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == static_cast<ssize_t>(sizeof fh + total)) {
            if (payload_size) convertor->skip(payload_size);
            return Status::completed;
        }
        if (n > 0) {
            // Part of the frame is on the wire: the rest must follow, whatever the
            // pool limit says, or the stream would be corrupt.
            FragPool& pool = total <= eager_->capacity() ? *eager_ : *max_;
            Frag* f = pool.get(true);
            if (f == nullptr) {
                fail_link(l, "out of memory in the middle of a frame");
                return Status::peer_failed;
            }
            std::memcpy(f->payload() - sizeof fh, fh, sizeof fh);
            if (header_size) std::memcpy(f->payload(), header, header_size);
            if (payload_size) std::memcpy(f->payload() + header_size, payload, payload_size);
            f->set_contiguous(sizeof fh, total);
            f->iov[0].iov_base = static_cast<char*>(f->iov[0].iov_base) + n;
            f->iov[0].iov_len -= static_cast<std::size_t>(n);
            f->kind = FragKind::control;
            f->endpoint = ep;
            f->queued = true;
            l.queue.push(f);
            if (!l.want_write) tcp_.rewatch(l, true);
            if (payload_size) convertor->skip(payload_size);
            return Status::completed;
        }
        if (n < 0 && !would_block(errno)) {
            const int e = errno;
            fail_link(l, "send failed: " + errno_text(e));
            return Status::peer_failed;
        }
    } else if (l.state == LinkState::idle) {
        const std::string why = connector_.start_connect(l);
        if (!why.empty()) {
            fail_endpoint(*ep, why);
            return Status::unreachable;
        }
    } else if (l.state == LinkState::closed) {
        return Status::peer_failed;
    }
    if (descriptor) *descriptor = alloc(ep, order, total, flags);
    return Status::out_of_resource;
}

// A small message sent while the link has queued data, or after another one in
// the same progress pass, is appended to a burst written at the next progress
// (one system call and one TCP segment for many messages instead of one each).
bool TcpModule::joins_burst(const Link& l, std::size_t total) const noexcept {
    return tcp_.params().coalesce && wire::header_size + total <= max_burst_frame &&
           (!l.queue.empty() || l.last_direct_poll == tcp_.poll_count());
}

bool TcpModule::append_to_burst(Link& l, btl::Tag tag, const void* header, std::size_t header_size,
                                const void* payload, std::size_t payload_size) noexcept {
    const std::size_t frame = wire::header_size + header_size + payload_size;
    Frag* f = l.queue.tail;
    if (f != nullptr && f->coalescing) {
        // The tail may be partly written already: its iovec ends where it ends.
        const auto* end = static_cast<std::byte*>(f->iov[0].iov_base) + f->iov[0].iov_len;
        if (end + frame > f->payload() + f->capacity) f = nullptr;
    } else {
        f = nullptr;
    }
    if (f == nullptr) {
        if (frame > eager_->capacity() || (f = eager_->get()) == nullptr) return false;
        f->kind = FragKind::control;  // back to the pool once written
        f->coalescing = true;
        f->endpoint = l.endpoint;
        f->set_contiguous(0, 0);
        f->queued = true;
        const bool first = l.queue.empty();
        l.queue.push(f);
        // A queue that already waits (EPOLLOUT or the next poll) takes it along.
        if (first && !l.want_write)
            tcp_.flush_at_next_poll(l);
        else if (!l.want_write && !l.burst_due)
            tcp_.rewatch(l, true);
    }
    auto* at = static_cast<std::byte*>(f->iov[0].iov_base) + f->iov[0].iov_len;
    wire::encode(wire::FrameHeader{wire::frame_magic, wire::FrameType::am, tag, 0,
                                   static_cast<std::uint32_t>(header_size + payload_size)},
                 at);
    if (header_size) std::memcpy(at + wire::header_size, header, header_size);
    if (payload_size) std::memcpy(at + wire::header_size + header_size, payload, payload_size);
    f->iov[0].iov_len += frame;
    ++coalesced_frames_;
    return true;
}

void TcpModule::dump(btl::Endpoint* endpoint, int verbosity) {
    btl::Module::dump(endpoint, verbosity);
    const log::Stream out(name(), verbosity);
    auto* ep = static_cast<TcpEndpoint*>(endpoint);
    if (ep == nullptr) return;
    for (std::size_t k = 0; k < ep->link_count(); ++k)
        out.verbose(1, "rank {} link {}: {} {}", ep->peer(), k, to_string(ep->link(k).state),
                    ep->link(k).peer_text);
    out.verbose(1, "rank {}: {} one-sided operations outstanding{}", ep->peer(), ep->outstanding,
                ep->failed ? ", failed" : "");
}

Status TcpModule::finalize() {
    if (finalized_) return Status::success;
    finalized_ = true;
    for_each_endpoint([&](TcpEndpoint& ep) {
        say_goodbye(ep);
        ep.failed = true;
        for (std::size_t k = 0; k < ep.link_count(); ++k) {
            Link& l = ep.link(k);
            connector_.close_socket(l);
            while (Frag* f = l.queue.pop()) complete_frag(f, Status::cancelled);
        }
    });
    rdma_.complete_ops(nullptr, Status::cancelled);
    connector_.close_all();
    tcp_.forget_module(this);
    listeners_.clear();
    return Status::success;
}

// --- failing ---------------------------------------------------------------------------

void TcpModule::fail_link(Link& l, const std::string& reason) noexcept {
    if (l.endpoint == nullptr) return connector_.drop_incoming(l, reason);
    TcpEndpoint& ep = *l.endpoint;
    connector_.close_socket(l);
    connector_.set_state(l, LinkState::closed);
    bool quiet = ep.goodbye && ep.outstanding == 0;
    for (std::size_t k = 0; k < ep.link_count(); ++k) quiet = quiet && ep.link(k).queue.empty();
    // A peer outside the job that said goodbye disconnected: a departure.
    if (ep.goodbye && is_dynamic(tcp_.runtime(), ep.peer()))
        return fail_endpoint(ep, "it disconnected", btl::error_flags::departed);
    if (quiet) {
        tcp_.out().verbose(20, "{}: rank {} closed link {} after saying goodbye", name(), ep.peer(),
                           l.index);
        return;
    }
    fail_endpoint(ep, reason);
}

void TcpModule::fail_endpoint(TcpEndpoint& ep, const std::string& reason,
                              std::uint32_t flags) noexcept {
    if (ep.failed) return;
    ep.failed = true;
    const std::string info =
        "tcp connection to rank " + std::to_string(ep.peer()) + " failed: " + reason;
    tcp_.out().verbose(1, "{}: {}", name(), info);
    for (std::size_t k = 0; k < ep.link_count(); ++k) {
        Link& l = ep.link(k);
        connector_.close_socket(l);
        connector_.set_state(l, LinkState::closed);
    }
    report_error(btl::error_flags::nonfatal | flags, ep.peer(), info.c_str());
    for (std::size_t k = 0; k < ep.link_count(); ++k)
        while (Frag* f = ep.link(k).queue.pop()) complete_frag(f, Status::peer_failed);
    rdma_.complete_ops(&ep, Status::peer_failed);
}

void TcpModule::say_goodbye(TcpEndpoint& ep) noexcept {
    if (ep.failed) return;
    for (std::size_t k = 0; k < ep.link_count(); ++k) {
        Link& l = ep.link(k);
        if (l.state != LinkState::connected) continue;
        Frag* f = control_->get(true);
        if (f == nullptr) continue;
        wire::encode(wire::FrameHeader{wire::frame_magic, wire::FrameType::goodbye, 0, 0, 0},
                     f->payload() - wire::header_size);
        f->set_contiguous(wire::header_size, 0);
        send_control(l, f);
        // Give what is queued a bounded chance to leave before the socket closes.
        for (int tries = 0; tries < 100 && l.state == LinkState::connected && !l.queue.empty();
             ++tries) {
            pollfd p{l.fd.get(), POLLOUT, 0};
            ::poll(&p, 1, 10);
            flush(l);
        }
    }
}

}  // namespace transit::tcp
