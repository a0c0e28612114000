// The connection state machine of a tcp module: connecting over the best
// path first, accepting, the handshake, timeouts, closing a link's socket.
#include "tcp_connector.hpp"

#include <algorithm>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include "tcp_component.hpp"
#include "tcp_module.hpp"
#include "tcp_receiver.hpp"
#include "tcp_splice.hpp"

namespace transit::tcp {

namespace {

// How long a path may go unanswered before the next is started alongside:
// far above a LAN's round trip, far below ARP's give-up (about 3 s).
constexpr std::uint64_t path_stagger_ns = 100'000'000;

std::uint64_t timeout_ns(const TcpParams& p) {
    return static_cast<std::uint64_t>(p.connect_timeout * 1e9);
}

void set_nodelay(int fd) noexcept {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

TcpConnector::TcpConnector(TcpModule& module, TcpComponent& tcp, TcpReceiver& receiver,
                           SplicePipe& pipe)
    : module_(module),
      tcp_(tcp),
      receiver_(receiver),
      pipe_(pipe),
      rbuf_size_(std::max<std::size_t>(256 * 1024, Frag::headroom + tcp.params().max_send_size)) {}

void TcpConnector::close_all() noexcept {
    closed_ = true;
    for (auto& l : incoming_) close_socket(*l);
    incoming_.clear();
    while (!probes_.empty()) retire_probe(*probes_.back());
}

void TcpConnector::set_state(Link& l, LinkState s) noexcept {
    if (l.state == LinkState::await_incoming) tcp_.hold(-1);
    if (s == LinkState::await_incoming) tcp_.hold(+1);
    if (l.state == LinkState::connected && s != LinkState::connected) tcp_.link_down(l);
    if (l.state != LinkState::connected && s == LinkState::connected) tcp_.link_up(l);
    l.state = s;
}

// Paths are tried best first.  One that has not connected within
// path_stagger_ns gets the next one started alongside (the first TCP
// connection to complete wins, the others are closed): an address in a
// subnet both nodes have but that is not joined answers nothing for seconds
// (ARP, then "No route to host"), and a peer reached over another interface
// should not wait for that.
std::string TcpConnector::start_connect(Link& l) noexcept {
    TcpEndpoint& ep = *l.endpoint;
    if (ep.paths.empty())
        return "rank " + std::to_string(ep.peer()) + " has no address reachable from " +
               module_.name();
    l.next_path = 0;
    l.path_errors.clear();
    set_state(l, LinkState::connecting);
    l.deadline_ns = TcpComponent::now_ns() + timeout_ns(tcp_.params());
    if (launch_next_path(l)) return {};
    set_state(l, LinkState::idle);
    l.deadline_ns = 0;
    return l.path_errors;
}

bool TcpConnector::launch_next_path(Link& l) noexcept {
    TcpEndpoint& ep = *l.endpoint;
    while (l.next_path < ep.paths.size()) {
        const AddressPair& path = ep.paths[l.next_path++];
        std::string why = open_probe(l, path);
        if (why.empty()) {
            l.stagger_ns =
                l.next_path < ep.paths.size() ? TcpComponent::now_ns() + path_stagger_ns : 0;
            return true;
        }
        tcp_.out().verbose(10, "{}: rank {} link {}: {}", module_.name(), ep.peer(), l.index, why);
        l.path_errors += (l.path_errors.empty() ? "" : "; ") + why;
    }
    l.stagger_ns = 0;
    return false;
}

std::string TcpConnector::open_probe(Link& l, const AddressPair& path) noexcept {
    const IpAddress& local = path.local.address;
    const PeerAddress& remote = path.remote;
    const std::string text = remote.address.to_string() + " port " + std::to_string(remote.port);
    try {
        Fd s(::socket(local.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!s) return std::string("socket: ") + std::strerror(errno);
        set_nodelay(s.get());
        const TcpParams& p = tcp_.params();
        if (p.sndbuf > 0) {
            const int v = static_cast<int>(p.sndbuf);
            ::setsockopt(s.get(), SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
        }
        if (p.rcvbuf > 0) {
            const int v = static_cast<int>(p.rcvbuf);
            ::setsockopt(s.get(), SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
        }
        // Bound to the path's local address, so the traffic leaves by its interface.
        sockaddr_storage ss;
        socklen_t len = local.to_sockaddr(0, ss);
        if (::bind(s.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
            return "bind to " + local.to_string() + ": " + std::strerror(errno);
        len = remote.address.to_sockaddr(remote.port, ss);
        if (::connect(s.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 && errno != EINPROGRESS)
            return "connect to " + text + " from " + local.to_string() + ": " +
                   std::strerror(errno);
        auto probe = std::make_unique<Link>();
        probe->module = &module_;
        probe->index = l.index;
        probe->state = LinkState::probing;
        probe->probe_for = &l;
        probe->target = path.target;
        probe->peer_text = text;
        probe->path_errors = local.to_string();  // for its messages
        probe->fd = std::move(s);
        if (!tcp_.watch(*probe, true)) return std::string("epoll: ") + std::strerror(errno);
        tcp_.out().verbose(20, "{}: connecting link {} to rank {} at {} from {}", module_.name(),
                           l.index, l.endpoint->peer(), text, local.to_string());
        probes_.push_back(std::move(probe));
        return {};
    } catch (...) {
        return "out of memory";
    }
}

void TcpConnector::on_probe(Link& probe) noexcept {
    if (probe.state != LinkState::probing) return;  // closed earlier in this batch
    Link& l = *probe.probe_for;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(probe.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == EINPROGRESS || err == EALREADY) return;
    if (err != 0) {
        const std::string why = "connect to " + probe.peer_text + " from " + probe.path_errors +
                                ": " + std::strerror(err);
        retire_probe(probe);
        return path_failed(l, why);
    }
    // The first path to connect: the link takes its socket, the others go.
    tcp_.unwatch(probe);
    l.fd = std::move(probe.fd);
    l.peer_text = probe.peer_text;
    l.target = probe.target;
    retire_probe(probe);
    cancel_probes(l);
    l.stagger_ns = 0;
    if (!tcp_.watch(l, true))
        return module_.fail_link(l, std::string("epoll: ") + std::strerror(errno));
    if (!l.path_errors.empty())
        tcp_.out().verbose(10, "{}: rank {} link {} reached at {} (paths that failed: {})",
                           module_.name(), l.endpoint->peer(), l.index, l.peer_text, l.path_errors);
    on_connected(l);
}

void TcpConnector::path_failed(Link& l, const std::string& why) noexcept {
    // An address that does not answer is not a peer that failed: it is said
    // at verbose level, and only the last path's failure fails the link.
    tcp_.out().verbose(10, "{}: rank {} link {}: {}", module_.name(), l.endpoint->peer(), l.index,
                       why);
    try {
        l.path_errors += (l.path_errors.empty() ? "" : "; ") + why;
    } catch (...) {
        // Out of memory: the message says less.
    }
    if (l.state != LinkState::connecting || has_probes(l) || launch_next_path(l)) return;
    if (l.waited) {
        set_state(l, LinkState::idle);  // connect_server says why
        return;
    }
    module_.fail_link(
        l, "no path to rank " + std::to_string(l.endpoint->peer()) + " answered: " + l.path_errors);
}

bool TcpConnector::has_probes(const Link& l) const noexcept {
    return std::any_of(probes_.begin(), probes_.end(),
                       [&](const auto& p) { return p->probe_for == &l; });
}

void TcpConnector::retire_probe(Link& probe) noexcept {
    if (probe.has_socket()) {
        tcp_.unwatch(probe);
        probe.fd.reset();
    }
    probe.state = LinkState::closed;
    for (auto it = probes_.begin(); it != probes_.end(); ++it) {
        if (it->get() != &probe) continue;
        // An event of the current epoll batch may still name it.
        tcp_.defer_free(std::move(*it));
        probes_.erase(it);
        return;
    }
}

void TcpConnector::cancel_probes(Link& l) noexcept {
    for (std::size_t i = 0; i < probes_.size();) {
        if (probes_[i]->probe_for == &l)
            retire_probe(*probes_[i]);  // erases it
        else
            ++i;
    }
}

// Context::connect names a server by its address: a server gone refuses the
// connection at once, and connect says so (naming the address) rather than
// the first operation.  Every path is tried at once (the caller waits), the
// first TCP connection to complete is kept.  Only that connection and the
// server's first answer are waited for (bounded); the join handshake goes on
// from progress, so connect stays bounded work.
std::string TcpConnector::connect_server(TcpEndpoint& ep) noexcept {
    const double limit = tcp_.params().server_connect_timeout;
    Link& l = ep.link(0);
    if (!(limit > 0) || l.state != LinkState::idle) return {};
    l.waited = true;
    if (std::string why = start_connect(l); !why.empty()) {
        l.waited = false;
        return why;
    }
    while (launch_next_path(l)) {
    }
    const auto ms = static_cast<int>(std::ceil(limit * 1000));
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    std::vector<pollfd> fds;
    std::vector<Link*> which;
    while (l.state == LinkState::connecting && has_probes(l)) {
        fds.clear();
        which.clear();
        for (const auto& p : probes_)
            if (p->probe_for == &l) {
                fds.push_back({p->fd.get(), POLLOUT, 0});
                which.push_back(p.get());
            }
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now())
                .count();
        if (left <= 0) break;
        const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left));
        if (ready < 0 && errno != EINTR) break;
        for (std::size_t k = 0; ready > 0 && k < fds.size(); ++k)
            if (fds[k].revents != 0) on_probe(*which[k]);  // a retired one is skipped
    }
    l.waited = false;
    std::string why;
    if (l.state == LinkState::hello_sent) {
        why = check_server_answer(l, until);
        if (why.empty()) return {};
    } else if (l.state == LinkState::connecting) {
        why = "no answer from the server's addresses within " + std::to_string(ms) +
              " ms (btl_tcp_server_connect_timeout)" +
              (l.path_errors.empty() ? "" : "; " + l.path_errors);
    } else if (l.state == LinkState::idle) {
        why = l.path_errors;
    } else {
        return {};  // on_connected failed it, and said why
    }
    close_socket(l);
    set_state(l, LinkState::idle);
    return why;
}

// A server that is gone may leave its port to another process (a listener
// that took the port, or this very socket connected to itself): the TCP
// connection then succeeds, and only the handshake's answer shows that no
// Transit server is there.  The answer is peeked at, not read: progress takes
// it as always.  "" when it admits us, refuses the token (the first
// operation says access_denied) or is not in before `until` (a server busy
// elsewhere answers from its progress later).
std::string TcpConnector::check_server_answer(
    Link& l, std::chrono::steady_clock::time_point until) noexcept {
    std::array<std::byte, wire::handshake_size> in;
    for (;;) {
        const auto left =
            std::chrono::ceil<std::chrono::milliseconds>(until - std::chrono::steady_clock::now())
                .count();
        if (left <= 0) return {};
        pollfd p{l.fd.get(), POLLIN | POLLRDHUP, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return {};
        const ssize_t n = ::recv(l.fd.get(), in.data(), in.size(), MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n < 0) return "connect to " + l.peer_text + ": " + std::strerror(errno);
        const auto got = static_cast<std::size_t>(n);
        std::uint64_t magic = 0;
        if (got >= sizeof magic) std::memcpy(&magic, in.data(), sizeof magic);
        if (got >= sizeof magic && magic != wire::handshake_magic)
            return "the process at " + l.peer_text + " is not a Transit server";
        if (got < in.size() && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return "the process at " + l.peer_text + " closed the connection unanswered";
        if (got < in.size()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the rest is on its way
            continue;
        }
        wire::Handshake h;
        const std::string bad = wire::decode(in, h);
        if (!bad.empty())
            return "the process at " + l.peer_text + " is not a Transit server (" + bad + ")";
        if (h.kind != wire::HandshakeKind::welcome && h.kind != wire::HandshakeKind::refused)
            return "the process at " + l.peer_text + " did not answer as a Transit server";
        return {};
    }
}

void TcpConnector::on_connected(Link& l) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(l.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
        module_.fail_link(l, "connect to " + l.peer_text + ": " + std::strerror(err));
        return;
    }
    // A server outside the job is asked to admit us by its token.
    const rt::Secret* token = server_token(*l.endpoint);
    if (!send_handshake(l, token ? wire::HandshakeKind::join : wire::HandshakeKind::hello, token)) {
        module_.fail_link(l, "cannot send the handshake to " + l.peer_text);
        return;
    }
    set_state(l, LinkState::hello_sent);
    tcp_.rewatch(l, false);
}

const rt::Secret* TcpConnector::server_token(const TcpEndpoint& ep) const noexcept {
    if (ep.peer() < tcp_.runtime().size()) return nullptr;
    rt::DynamicPeers* d = tcp_.runtime().dynamic_peers();
    return d ? d->token_for(ep.peer()) : nullptr;
}

bool TcpConnector::send_handshake(Link& l, wire::HandshakeKind kind, const rt::Secret* token,
                                  Rank as) noexcept {
    rt::Runtime& rt = tcp_.runtime();
    wire::Handshake h;
    h.kind = kind;
    h.rank = as == any_rank ? rt.rank() : as;
    h.link = l.index;
    h.job_id = rt.job_id();
    h.secret = token ? *token : rt.job_secret();
    h.target = l.target;
    const auto bytes = wire::encode(h);
    // A fresh socket always has room for 104 bytes; anything else is a failure.
    return ::send(l.fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) ==
           static_cast<ssize_t>(bytes.size());
}

void TcpConnector::on_accepted(int fd, std::string peer) noexcept {
    auto l = std::make_unique<Link>();
    l->module = &module_;
    l->fd = Fd(fd);
    l->peer_text = std::move(peer);
    l->state = LinkState::accepting;
    l->deadline_ns = TcpComponent::now_ns() + timeout_ns(tcp_.params());
    set_nodelay(fd);
    if (closed_ || !tcp_.watch(*l, false)) return;  // Fd closes the socket
    tcp_.out().verbose(20, "{}: accepted a connection from {}", module_.name(), l->peer_text);
    incoming_.push_back(std::move(l));
}

void TcpConnector::on_handshake_input(Link& l) noexcept {
    const ssize_t n =
        ::recv(l.fd.get(), l.hs_in.data() + l.hs_got, l.hs_in.size() - l.hs_got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    const bool incoming = l.state == LinkState::accepting;
    if (n == 0 && incoming && l.hs_got == 0) {
        // Closed before a byte: a connector that tried several paths at once
        // and kept another one.  Nothing was refused.
        tcp_.out().verbose(20, "{}: {} closed without a handshake", module_.name(), l.peer_text);
        close_socket(l);
        set_state(l, LinkState::closed);
        return retire_incoming(l);
    }
    if (n <= 0) {
        const std::string why = n == 0 ? "closed during the handshake"
                                       : std::string("handshake: ") + std::strerror(errno);
        if (incoming)
            drop_incoming(l, why);
        else
            module_.fail_link(l, why);
        return;
    }
    l.hs_got += static_cast<std::size_t>(n);
    // Refuse a stranger's garbage as soon as its first bytes show it, not at the timeout.
    if (l.hs_got >= 8 && l.hs_got < l.hs_in.size()) {
        std::uint64_t magic;
        std::memcpy(&magic, l.hs_in.data(), sizeof magic);
        if (magic != wire::handshake_magic) {
            if (incoming)
                drop_incoming(l, "bad handshake magic");
            else
                module_.fail_link(l, "bad handshake magic from " + l.peer_text);
        }
        return;
    }
    if (l.hs_got < l.hs_in.size()) return;
    l.hs_got = 0;
    wire::Handshake h;
    const std::string bad = wire::decode(l.hs_in, h);
    if (!bad.empty()) {
        if (incoming)
            drop_incoming(l, bad);
        else
            module_.fail_link(l, "handshake from " + l.peer_text + ": " + bad);
        return;
    }
    if (incoming)
        handle_hello(l, h);
    else
        handle_answer(l, h);
}

void TcpConnector::handle_hello(Link& in, const wire::Handshake& h) noexcept {
    rt::Runtime& rt = tcp_.runtime();
    if (h.target != 0) {
        TcpModule* owner = tcp_.module_of_address(h.target - 1);
        if (owner == nullptr)
            return drop_incoming(in, "names an address this process does not listen on");
        if (owner != &module_) {
            for (auto it = incoming_.begin(); it != incoming_.end(); ++it) {
                if (it->get() != &in) continue;
                std::unique_ptr<Link> moved = std::move(*it);
                incoming_.erase(it);
                return owner->connector().take_incoming(std::move(moved), h);
            }
            return;
        }
    }
    if (h.kind == wire::HandshakeKind::join) return handle_join(in, h);
    if (h.kind != wire::HandshakeKind::hello) return drop_incoming(in, "expected a hello");
    const std::string bad = wire::verify(h, rt.job_id(), rt.job_secret());
    if (!bad.empty()) return drop_incoming(in, bad);
    if (h.rank >= rt.size() || h.rank == rt.rank())
        return drop_incoming(in, "claims impossible rank " + std::to_string(h.rank));
    if (h.link >= tcp_.params().links)
        return drop_incoming(in, "asks for link " + std::to_string(h.link) +
                                     " (btl_tcp_links differs between ranks?)");
    TcpEndpoint* ep = nullptr;
    try {
        ep = module_.endpoint_for(h.rank);
    } catch (...) {
        return drop_incoming(in, "out of memory");
    }
    Link& l = ep->link(h.link);
    // A link we still hold as connected may be one the peer has closed (it
    // said goodbye, deleted us and now adds us again): what it still holds,
    // the goodbye and the end, is read first, or the new connection would be
    // taken for a simultaneous connect and refused while the peer waits for
    // ours until its timeout.
    for (int i = 0; i < 16 && !ep->failed && l.state == LinkState::connected; ++i)
        receiver_.on_readable(l);
    if (ep->failed) return drop_incoming(in, "rank " + std::to_string(h.rank) + " already failed");
    const bool ours_pending = l.state == LinkState::connecting || l.state == LinkState::hello_sent;
    // Simultaneous connects: the connection opened by the lower rank is kept.
    if (l.state == LinkState::connected || (ours_pending && h.rank > rt.rank())) {
        send_handshake(in, wire::HandshakeKind::reject);
        tcp_.out().verbose(20, "{}: rank {} link {}: our own connection wins", module_.name(),
                           h.rank, h.link);
        close_socket(in);
        set_state(in, LinkState::closed);
        return retire_incoming(in);
    }
    close_socket(l);  // and the paths it was still trying
    // The accepted socket moves into the endpoint's link.
    l.fd = std::move(in.fd);
    l.peer_text = in.peer_text;
    in.state = LinkState::closed;
    tcp_.rewatch(l, false);
    retire_incoming(in);
    if (!send_handshake(l, wire::HandshakeKind::accept)) {
        module_.fail_link(l, "cannot answer the handshake of " + l.peer_text);
        return;
    }
    become_connected(l);
}

void TcpConnector::take_incoming(std::unique_ptr<Link> link, const wire::Handshake& h) noexcept {
    Link& in = *link;
    in.module = &module_;  // its epoll events come here now
    try {
        incoming_.push_back(std::move(link));
    } catch (...) {
        // Out of memory: the connection is dropped (an event of this batch
        // may still name the link, so it is freed after the poll).
        tcp_.unwatch(in);
        in.fd.reset();
        in.state = LinkState::closed;
        tcp_.defer_free(std::move(link));
        return;
    }
    tcp_.out().verbose(20, "{}: the connection from {} is for this interface's address",
                       module_.name(), in.peer_text);
    handle_hello(in, h);
}

// A client outside the job: admitted with the listening context's token, it
// gets a new peer id and this socket is its one link.
void TcpConnector::handle_join(Link& in, const wire::Handshake& h) noexcept {
    rt::DynamicPeers* d = tcp_.runtime().dynamic_peers();
    const std::string who =
        "a client (rank " + std::to_string(h.rank) + " of job '" + h.job_id + "')";
    if (!d || !d->token_matches(h.secret)) {
        // The client is told before the close, so its operations can say
        // why (access_denied); the answer carries no secret.
        static constexpr rt::Secret none{};
        (void)send_handshake(in, wire::HandshakeKind::refused, &none);
        return drop_incoming(in, who + " without this context's access token");
    }
    if (h.link != 0) return drop_incoming(in, who + " asks for link " + std::to_string(h.link));
    const Rank id = d->admit();
    if (id == any_rank) return drop_incoming(in, "no peer id left for " + who);
    TcpEndpoint* ep = nullptr;
    try {
        ep = module_.endpoint_for(id);
    } catch (...) {
        return drop_incoming(in, "out of memory");
    }
    Link& l = ep->link(0);
    l.fd = std::move(in.fd);
    l.peer_text = in.peer_text;
    in.state = LinkState::closed;
    tcp_.rewatch(l, false);
    retire_incoming(in);
    if (!send_handshake(l, wire::HandshakeKind::welcome, &h.secret, id)) {
        module_.fail_link(l, "cannot answer the handshake of " + l.peer_text);
        return;
    }
    tcp_.out().verbose(10, "{}: {} joined as peer {}", module_.name(), who, id);
    become_connected(l);
}

void TcpConnector::handle_answer(Link& l, const wire::Handshake& h) noexcept {
    TcpEndpoint& ep = *l.endpoint;
    if (const rt::Secret* token = server_token(ep)) {
        if (h.kind == wire::HandshakeKind::refused)
            return module_.fail_endpoint(ep, "the server refused the token",
                                         btl::error_flags::refused);
        if (h.kind != wire::HandshakeKind::welcome || h.secret != *token || h.link != l.index)
            return module_.fail_link(l, "the server at " + l.peer_text + " did not admit us");
        return become_connected(l);
    }
    if (h.kind == wire::HandshakeKind::reject) {
        // The peer is connecting to us at the same time and its connection wins.
        tcp_.out().verbose(20, "{}: rank {} link {}: waiting for the peer's connection",
                           module_.name(), ep.peer(), l.index);
        close_socket(l);
        set_state(l, LinkState::await_incoming);
        return;
    }
    std::string bad = wire::verify(h, tcp_.runtime().job_id(), tcp_.runtime().job_secret());
    if (bad.empty() && h.kind != wire::HandshakeKind::accept) bad = "expected an accept";
    if (bad.empty() && (h.rank != ep.peer() || h.link != l.index))
        bad = "answered as rank " + std::to_string(h.rank) + " link " + std::to_string(h.link);
    if (!bad.empty()) {
        module_.fail_link(l, "handshake answer from " + l.peer_text + " refused: " + bad);
        return;
    }
    become_connected(l);
}

void TcpConnector::become_connected(Link& l) noexcept {
    set_state(l, LinkState::connected);
    l.deadline_ns = 0;
    // A peer that said goodbye and now connects, or accepts our connection,
    // has added us again (deleted or finalized, it refuses and never
    // connects): its goodbye no longer holds.  Its goodbye came on the old
    // link, closed before this one was taken (a link still connected makes
    // the peer's new connection lose), so it cannot come after this.
    l.endpoint->goodbye = false;
    if (!l.rbuf) {
        l.rbuf.reset(new (std::nothrow) std::byte[rbuf_size_]);
        if (!l.rbuf) return module_.fail_link(l, "out of memory for the receive buffer");
        l.rcap = rbuf_size_;
    }
    l.rhead = l.rtail = 0;
    tcp_.out().verbose(10, "{}: connected to rank {} (link {}, {})", module_.name(),
                       l.endpoint->peer(), l.index, l.peer_text);
    if (!l.queue.empty()) module_.flush(l);
}

void TcpConnector::check_timeouts(std::uint64_t now) noexcept {
    // Failing one only marks it (the pml releases peers from its own
    // progress), so no endpoint goes while these are walked.
    module_.for_each_endpoint([&](TcpEndpoint& ep) {
        if (ep.failed) return;
        for (std::size_t k = 0; k < ep.link_count(); ++k) {
            Link& l = ep.link(k);
            const bool waiting = l.state == LinkState::connecting ||
                                 l.state == LinkState::hello_sent ||
                                 l.state == LinkState::await_incoming;
            if (waiting && l.deadline_ns != 0 && now >= l.deadline_ns) {
                module_.fail_link(l, "connection to rank " + std::to_string(ep.peer()) + " (" +
                                         (l.has_socket() ? l.peer_text : "no path answered") +
                                         ") timed out in state " + to_string(l.state) +
                                         (l.path_errors.empty() ? "" : "; " + l.path_errors));
                break;  // the endpoint failed: its other links are closed too
            }
            if (l.state == LinkState::connecting && l.stagger_ns != 0 && now >= l.stagger_ns) {
                tcp_.out().verbose(10,
                                   "{}: rank {} link {}: no answer yet, trying the next path too",
                                   module_.name(), ep.peer(), l.index);
                launch_next_path(l);
            }
        }
    });
    for (std::size_t i = 0; i < incoming_.size();) {
        Link& l = *incoming_[i];
        if (now >= l.deadline_ns) {
            drop_incoming(l, "no handshake before the timeout");  // removes it from incoming_
            continue;
        }
        ++i;
    }
}

// --- closing and failing ---------------------------------------------------------------

void TcpConnector::close_socket(Link& l) noexcept {
    cancel_probes(l);
    l.stagger_ns = 0;
    if (!l.has_socket()) return;
    tcp_.link_down(l);
    tcp_.unwatch(l);
    l.fd.reset();
    l.want_write = false;
    l.hs_got = 0;
    l.rhead = l.rtail = 0;
    l.direct_left = 0;
    l.direct_dst = nullptr;
    l.direct_after = DirectAfter::none;
    l.short_reads = 0;
    pipe_.release(&l);
}

void TcpConnector::retire_incoming(Link& l) noexcept {
    for (auto it = incoming_.begin(); it != incoming_.end(); ++it) {
        if (it->get() != &l) continue;
        tcp_.defer_free(std::move(*it));
        incoming_.erase(it);
        return;
    }
}

void TcpConnector::drop_incoming(Link& l, const std::string& reason) noexcept {
    tcp_.refused(module_.name(), l.peer_text, reason);
    close_socket(l);
    set_state(l, LinkState::closed);
    retire_incoming(l);
}

}  // namespace transit::tcp
