// btl/unix: the module's operations.  Everything after init follows the BTL
// hot-path rules: no heap allocation, no exception, no lock.  Descriptors, put/get
// slots and replies come from fixed pools; a message that finds its socket full
// waits in the connection's queue and progress() writes it later.
#include "unix_module.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace unix_btl {
namespace {

constexpr std::size_t header_size = sizeof(Header);
constexpr int max_events = 16;
constexpr int reads_per_connection = 16;  // bounded work per progress call

bool would_block(int err) {
    return err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS;
}

void* to_pointer(std::uint64_t address) {
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
}

}  // namespace

Connection::Connection() {
    free_replies.reserve(replies.size());
    for (Outgoing& r : replies) {
        r.owner = Outgoing::Owner::reply;
        free_replies.push_back(&r);
    }
}

void Connection::push(Outgoing* o) noexcept {
    o->next = nullptr;
    if (tail != nullptr)
        tail->next = o;
    else
        head = o;
    tail = o;
}

Outgoing* Connection::pop() noexcept {
    Outgoing* o = head;
    if (o == nullptr) return nullptr;
    head = o->next;
    if (head == nullptr) tail = nullptr;
    return o;
}

// --- setup -------------------------------------------------------------------

UnixModule::UnixModule(btl::Component& component, const Config& config, btl::InitContext& ctx,
                       Fd listener, std::vector<std::byte> address)
    : btl::Module(component),
      config_(config),
      runtime_(ctx.runtime),
      am_table_(ctx.am_table),
      engine_(ctx.progress),
      out_("btl:unix", config.verbose),
      listener_(std::move(listener)),
      address_(std::move(address)),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      receive_buffer_(header_size + config.max_send_size),
      frags_(config.free_list_max) {
    if (!epoll_) throw std::runtime_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // nullptr: the listening socket
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_.get(), &ev) != 0)
        throw std::runtime_error(fmt::format("epoll_ctl: {}", std::strerror(errno)));

    attr_.eager_limit = config.eager_limit;
    attr_.rndv_eager_limit = config.eager_limit;
    attr_.max_send_size = config.max_send_size;
    attr_.exclusivity = config.exclusivity;
    attr_.latency = 5;
    attr_.bandwidth = 5000;
    attr_.flags = btl::flags::send | btl::flags::put | btl::flags::get | btl::flags::rdma_flush;
    attr_.registration_handle_size = sizeof(PackedRegistration);
    // One put or get is one message; larger transfers are cut by the caller.
    attr_.put_limit = config.max_send_size;
    attr_.get_limit = config.max_send_size;

    free_frags_.reserve(frags_.size());
    for (Frag& f : frags_) {
        f.buffer.resize(config.max_send_size);
        f.out.owner = Outgoing::Owner::frag;
        f.out.frag = &f;
        free_frags_.push_back(&f);
    }
    free_ops_.reserve(ops_.size());
    for (std::size_t i = 0; i < ops_.size(); ++i) {
        ops_[i].out.owner = Outgoing::Owner::rdma;
        ops_[i].out.header.op = static_cast<std::uint32_t>(i);
        free_ops_.push_back(&ops_[i]);
    }
    // Registered for the module's lifetime: peers may write to us at any time.
    progress_handle_ = engine_.add(&UnixModule::progress_callback, this);
}

UnixModule::~UnixModule() {
    engine_.remove(progress_handle_);
}

std::unique_ptr<UnixEndpoint> UnixModule::connect_to(Rank peer,
                                                     std::span<const std::byte> address) {
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (address.empty() || address.size() > sizeof sa.sun_path)
        throw std::runtime_error(fmt::format("rank {} published a bad socket name", peer));
    std::memcpy(sa.sun_path, address.data(), address.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());

    auto ep = std::make_unique<UnixEndpoint>(peer);
    Connection& c = ep->conn;
    // Blocking connect (setup time); the listener accepts from its progress.
    c.fd = Fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!c.fd || ::connect(c.fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
        throw std::runtime_error(
            fmt::format("connecting to rank {}: {}", peer, std::strerror(errno)));
    // Room for a few full messages: one message is the most a write can take.
    const int sndbuf = static_cast<int>(4 * (header_size + config_.max_send_size));
    ::setsockopt(c.fd.get(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    const int fl = ::fcntl(c.fd.get(), F_GETFL);
    ::fcntl(c.fd.get(), F_SETFL, fl | O_NONBLOCK);
    c.peer = peer;
    c.endpoint = ep.get();

    Outgoing hello;
    hello.header.kind = Kind::hello;
    hello.header.rank = runtime_.rank();
    if (write(c, hello) != Status::success || !watch(c))
        throw std::runtime_error(fmt::format("greeting rank {}: {}", peer, std::strerror(errno)));
    out_.verbose(10, "connected to rank {}", peer);
    return ep;
}

void UnixModule::accept_new() noexcept {
    for (;;) {
        Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!fd) return;  // EAGAIN: no more waiting
        try {
            auto c = std::make_unique<Connection>();
            c->fd = std::move(fd);
            if (watch(*c)) accepted_.push_back(std::move(c));
        } catch (const std::bad_alloc&) {
            return;  // the peer sees its connection closed
        }
    }
}

bool UnixModule::watch(Connection& c) noexcept {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &c;
    return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), &ev) == 0;
}

Status UnixModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                             btl::Reachability& reachable) {
    if (endpoints.size() < peers.size() || reachable.size() < peers.size())
        return Status::bad_param;
    std::vector<std::byte> address;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const Rank peer = peers[i];
        // A UNIX socket only reaches this node; a peer without our modex key
        // did not load btl/unix.  Neither is an error: another btl may reach it.
        if (peer == runtime_.rank())
            address = address_;  // ourselves (loopback): no modex needed
        else if (!runtime_.on_this_node(peer) ||
                 runtime_.modex_recv(peer, "btl.unix.1", address) != Status::success)
            continue;
        auto& slot = endpoints_[peer];
        if (!slot) {
            try {
                slot = connect_to(peer, address);
            } catch (const std::exception& e) {
                // Published but unreachable: say so, and let another btl try.
                transit::log::warn("btl/unix: {}; rank {} is left to other transports", e.what(),
                                   peer);
                endpoints_.erase(peer);
                continue;
            }
        }
        endpoints[i] = slot.get();
        reachable.set(i);
        // Its own connection to us may have said hello before we knew the endpoint.
        for (auto& c : accepted_)
            if (c->peer == peer) c->endpoint = slot.get();
    }
    return Status::success;
}

Status UnixModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    if (endpoints.size() < peers.size()) return Status::bad_param;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        auto it = endpoints_.find(peers[i]);
        if (it == endpoints_.end() || endpoints[i] != it->second.get()) continue;
        for (auto& c : accepted_)
            if (c->endpoint == it->second.get()) c->endpoint = nullptr;
        // Closing the socket tells the peer; what was still queued is dropped.
        endpoints_.erase(it);
        endpoints[i] = nullptr;
    }
    return Status::success;
}

UnixEndpoint* UnixModule::usable(btl::Endpoint* endpoint) const noexcept {
    auto* ep = static_cast<UnixEndpoint*>(endpoint);
    return ep != nullptr && !ep->conn.broken ? ep : nullptr;
}

UnixEndpoint* UnixModule::find_endpoint(Rank peer) const noexcept {
    auto it = endpoints_.find(peer);
    return it == endpoints_.end() ? nullptr : it->second.get();
}

// --- descriptors -------------------------------------------------------------

Frag* UnixModule::take_frag(UnixEndpoint* ep, std::uint8_t order, std::uint32_t flags) noexcept {
    if (ep == nullptr || free_frags_.empty()) return nullptr;
    Frag* f = free_frags_.back();
    free_frags_.pop_back();
    f->in_pool = false;
    f->segments = &f->segment;
    f->segment_count = 1;
    f->flags = flags;
    f->order = order;
    f->cbfunc = nullptr;
    f->cbdata = nullptr;
    f->context = nullptr;
    return f;
}

btl::Descriptor* UnixModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                   std::uint32_t flags) noexcept {
    Frag* f = take_frag(usable(endpoint), order, flags);
    if (f == nullptr) return nullptr;
    f->segment = {f->buffer.data(), std::min(size, config_.max_send_size)};
    return f;
}

Status UnixModule::free(btl::Descriptor* descriptor) noexcept {
    auto* f = static_cast<Frag*>(descriptor);
    if (f == nullptr || f->in_pool) [[unlikely]]
        return Status::bad_param;  // double free
    f->in_pool = true;
    free_frags_.push_back(f);
    return Status::success;
}

btl::Descriptor* UnixModule::prepare_src(btl::Endpoint* endpoint, btl::Convertor& convertor,
                                         std::uint8_t order, std::size_t reserve, std::size_t& size,
                                         std::uint32_t flags) noexcept {
    if (reserve > config_.max_send_size) return nullptr;
    Frag* f = take_frag(usable(endpoint), order, flags);
    if (f == nullptr) return nullptr;
    // Always a copy: the data must stay valid until the message is written,
    // which may be after the caller's buffer changed.
    size =
        convertor.pack(f->buffer.data() + reserve, std::min(size, config_.max_send_size - reserve));
    f->segment = {f->buffer.data(), reserve + size};
    return f;
}

// --- sending -------------------------------------------------------------------

Status UnixModule::write(Connection& c, const Outgoing& o) noexcept {
    iovec iov[2] = {{const_cast<Header*>(&o.header), header_size},
                    {const_cast<void*>(o.payload), o.payload_size}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = o.payload_size > 0 ? 2 : 1;
    if (::sendmsg(c.fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return Status::success;
    if (would_block(errno)) return Status::out_of_resource;
    return Status::peer_failed;
}

Status UnixModule::start(Connection& c, Outgoing& o) noexcept {
    if (c.broken) return Status::unreachable;
    if (c.head == nullptr) {
        const Status s = write(c, o);
        if (s == Status::success) return Status::completed;
        if (s != Status::out_of_resource) {
            lost(c);
            return s;
        }
    }
    c.push(&o);  // behind what waits, so messages stay in order
    return Status::success;
}

void UnixModule::drain(Connection& c) noexcept {
    while (c.head != nullptr && !c.broken) {
        const Status s = write(c, *c.head);
        if (s == Status::out_of_resource) return;  // the socket is still full
        Outgoing* o = c.pop();
        written(c, *o, s);
        if (s != Status::success) lost(c);
    }
}

// A queued message left (or failed to).
void UnixModule::written(Connection& c, Outgoing& o, Status status) noexcept {
    switch (o.owner) {
        case Outgoing::Owner::frag:
            frag_done(*o.frag, c.endpoint, status);
            break;
        case Outgoing::Owner::rdma:
            if (status != Status::success) complete(ops_[o.header.op], status);
            break;  // else the reply completes it
        case Outgoing::Owner::reply:
            c.free_replies.push_back(&o);
            break;
    }
}

// The completion of a send that did not complete inline: the callback always
// comes, then the module frees the descriptor if it owns it.
void UnixModule::frag_done(Frag& f, UnixEndpoint* endpoint, Status status) noexcept {
    const bool owned = f.flags & btl::des_flags::btl_ownership;
    if (f.cbfunc != nullptr) f.cbfunc(this, endpoint, &f, status);
    if (owned) free(&f);
}

Status UnixModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                        btl::Tag tag) noexcept {
    UnixEndpoint* ep = usable(endpoint);
    auto* f = static_cast<Frag*>(descriptor);
    if (f == nullptr || f->in_pool || f->segment_count != 1) [[unlikely]]
        return Status::bad_param;
    if (ep == nullptr) [[unlikely]]
        return endpoint == nullptr ? Status::bad_param : Status::unreachable;
    f->out.header = Header{};
    f->out.header.kind = Kind::am;
    f->out.header.tag = tag;
    f->out.payload = f->segments[0].addr;
    f->out.payload_size = f->segments[0].len;
    const std::uint32_t flags = f->flags;  // the callback may free f
    const Status s = start(ep->conn, f->out);
    if (s == Status::completed) {
        // Written already: the contract says no callback, unless asked for.
        if ((flags & btl::des_flags::send_always_callback) && f->cbfunc != nullptr)
            f->cbfunc(this, ep, f, Status::success);
        if (flags & btl::des_flags::btl_ownership) free(f);
    }
    return s;
}

Status UnixModule::sendi(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                         std::size_t header_bytes, std::size_t payload_size, std::uint8_t order,
                         std::uint32_t flags, btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    UnixEndpoint* ep = usable(endpoint);
    if (!btl::sendi_arguments_valid(convertor, header, header_bytes, payload_size)) [[unlikely]]
        return Status::bad_param;
    if (ep == nullptr) return endpoint == nullptr ? Status::bad_param : Status::unreachable;
    const std::size_t total = header_bytes + payload_size;
    if (total > config_.max_send_size) return Status::out_of_resource;

    // Immediate: one sendmsg straight from the caller's memory, when nothing
    // waits in the queue and the payload is contiguous.
    const void* payload = payload_size > 0 ? convertor->contiguous_at(payload_size) : nullptr;
    if (ep->conn.head == nullptr && (payload_size == 0 || payload != nullptr)) {
        Header h{};
        h.kind = Kind::am;
        h.tag = tag;
        iovec iov[3] = {{&h, header_size},
                        {const_cast<void*>(header), header_bytes},
                        {const_cast<void*>(payload), payload_size}};
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = 3;
        if (::sendmsg(ep->conn.fd.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) {
            if (payload_size > 0) convertor->skip(payload_size);
            return Status::completed;
        }
        if (!would_block(errno)) {
            lost(ep->conn);
            return Status::peer_failed;
        }
    }
    // Not now: hand back a descriptor for the caller to fill and send later.
    if (descriptor != nullptr) *descriptor = alloc(ep, order, total, flags);
    return Status::out_of_resource;
}

// --- put and get ---------------------------------------------------------------

RdmaOp* UnixModule::take_op(UnixEndpoint* ep) noexcept {
    if (free_ops_.empty()) return nullptr;
    RdmaOp* op = free_ops_.back();
    free_ops_.pop_back();
    op->endpoint = ep;
    return op;  // busy once its request is on its way
}

void UnixModule::complete(RdmaOp& op, Status status) noexcept {
    if (!op.busy) return;
    // Released before the callback, which may start the next operation.
    op.busy = false;
    free_ops_.push_back(&op);
    if (op.cbfunc != nullptr)
        op.cbfunc(this, op.endpoint, op.local, op.local_handle, op.context, op.cbdata, status);
}

Status UnixModule::start_rdma(btl::Endpoint* endpoint, Kind kind, void* local,
                              std::uint64_t remote_address, btl::RegistrationHandle* local_handle,
                              const btl::RegistrationHandle* remote_handle, std::size_t size,
                              btl::RdmaCompletionFn cbfunc, void* cbcontext,
                              void* cbdata) noexcept {
    UnixEndpoint* ep = usable(endpoint);
    if (endpoint == nullptr || remote_handle == nullptr || (size > 0 && local == nullptr) ||
        size > config_.max_send_size) [[unlikely]]
        return Status::bad_param;
    if (ep == nullptr) return Status::unreachable;
    RdmaOp* op = take_op(ep);
    if (op == nullptr) return Status::out_of_resource;  // max_rdma_in_flight reached
    PackedRegistration remote;
    std::memcpy(&remote, remote_handle, sizeof remote);  // may be unaligned: a copy
    op->local = local;
    op->size = size;
    op->local_handle = local_handle;
    op->cbfunc = cbfunc;
    op->context = cbcontext;
    op->cbdata = cbdata;
    Header& h = op->out.header;
    h.kind = kind;
    h.key = remote.id;
    h.address = remote_address;
    h.length = size;
    op->out.payload = kind == Kind::put ? local : nullptr;
    op->out.payload_size = kind == Kind::put ? size : 0;
    const Status s = start(ep->conn, op->out);
    if (!transit::ok(s)) {
        free_ops_.push_back(op);
        return s;
    }
    op->busy = true;
    return Status::success;  // the target's reply completes it, from progress
}

Status UnixModule::put(btl::Endpoint* endpoint, void* local_address, std::uint64_t remote_address,
                       btl::RegistrationHandle* local_handle,
                       const btl::RegistrationHandle* remote_handle, std::size_t size, int, int,
                       btl::RdmaCompletionFn cbfunc, void* cbcontext, void* cbdata) noexcept {
    return start_rdma(endpoint, Kind::put, local_address, remote_address, local_handle,
                      remote_handle, size, cbfunc, cbcontext, cbdata);
}

Status UnixModule::get(btl::Endpoint* endpoint, void* local_address, std::uint64_t remote_address,
                       btl::RegistrationHandle* local_handle,
                       const btl::RegistrationHandle* remote_handle, std::size_t size, int, int,
                       btl::RdmaCompletionFn cbfunc, void* cbcontext, void* cbdata) noexcept {
    return start_rdma(endpoint, Kind::get, local_address, remote_address, local_handle,
                      remote_handle, size, cbfunc, cbcontext, cbdata);
}

Status UnixModule::flush(btl::Endpoint* endpoint) {
    if (in_progress_) return Status::error;  // from a callback: progress cannot run here
    auto pending = [&] {
        return std::any_of(ops_.begin(), ops_.end(), [&](const RdmaOp& op) {
            return op.busy && (endpoint == nullptr || op.endpoint == endpoint);
        });
    };
    while (pending()) progress();  // a lost peer completes its operations with an error
    return Status::success;
}

// --- registration ------------------------------------------------------------

btl::RegistrationHandle* UnixModule::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                  std::uint32_t flags) {
    if (base == nullptr && size > 0) return nullptr;
    const std::uint64_t id = next_key_++;
    Registration& r = registrations_[id];
    r.packed = {id, reinterpret_cast<std::uintptr_t>(base), size};
    r.access = flags;
    return reinterpret_cast<btl::RegistrationHandle*>(&r.packed);
}

Status UnixModule::deregister_mem(btl::RegistrationHandle* handle) {
    if (handle == nullptr) return Status::bad_param;
    PackedRegistration p;
    std::memcpy(&p, handle, sizeof p);
    return registrations_.erase(p.id) == 1 ? Status::success : Status::not_found;
}

// The target's check of a peer's request against its own registrations.
Status UnixModule::check_access(std::uint64_t key, std::uint64_t address, std::size_t size,
                                std::uint32_t access) const noexcept {
    auto it = registrations_.find(key);
    if (it == registrations_.end()) return Status::not_found;
    const Registration& r = it->second;
    if ((r.access & access) != access) return Status::access_denied;
    if (address < r.packed.base || size > r.packed.size ||
        address - r.packed.base > r.packed.size - size)
        return Status::bad_param;
    return Status::success;
}

// --- progress and receiving ---------------------------------------------------

int UnixModule::progress_callback(void* self) noexcept {
    return static_cast<UnixModule*>(self)->progress();
}

int UnixModule::progress() noexcept {
    // A callback that drives progress again would overwrite the message it is
    // reading: the nested call does nothing.
    if (in_progress_) return 0;
    in_progress_ = true;
    int events = 0;
    epoll_event ev[max_events];
    const int n = ::epoll_wait(epoll_.get(), ev, max_events, 0);
    for (int i = 0; i < n; ++i) {
        if (ev[i].data.ptr == nullptr)
            accept_new();
        else
            events += read_from(*static_cast<Connection*>(ev[i].data.ptr));
    }
    for (auto& [rank, ep] : endpoints_) drain(ep->conn);
    for (auto& c : accepted_) drain(*c);
    // Connections the peers closed.
    std::erase_if(accepted_, [](const std::unique_ptr<Connection>& c) { return c->broken; });
    in_progress_ = false;
    return events;
}

int UnixModule::read_from(Connection& c) noexcept {
    int events = 0;
    for (int i = 0; i < reads_per_connection && !c.broken; ++i) {
        // MSG_TRUNC makes recv return the message's real length, so a message
        // larger than our buffer is detected instead of silently cut.
        const ssize_t n = ::recv(c.fd.get(), receive_buffer_.data(), receive_buffer_.size(),
                                 MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && would_block(errno)) break;
        if (n <= 0) {  // 0: the peer closed; < 0: the connection failed
            lost(c);
            break;
        }
        const auto size = static_cast<std::size_t>(n);
        if (size < header_size || size > receive_buffer_.size()) {
            report_error(btl::error_flags::fatal, c.peer,
                         "btl/unix: malformed message (is btl_unix_max_send_size the same on "
                         "every rank?)");
            lost(c);
            break;
        }
        Header h;
        std::memcpy(&h, receive_buffer_.data(), header_size);
        handle(c, h, std::span(receive_buffer_).subspan(header_size, size - header_size));
        ++events;
    }
    return events;
}

void UnixModule::handle(Connection& c, const Header& h, std::span<std::byte> payload) noexcept {
    switch (h.kind) {
        case Kind::hello:
            c.peer = h.rank;
            c.endpoint = find_endpoint(h.rank);
            return;
        case Kind::am: {
            const btl::Segment segment{payload.data(), payload.size()};
            const btl::ReceiveDescriptor received{c.endpoint, &segment, 1, h.tag};
            if (!am_table_.dispatch(this, received))
                report_error(btl::error_flags::nonfatal, c.peer,
                             "btl/unix: a message arrived for a tag with no callback");
            return;
        }
        case Kind::put: {
            const Status s =
                check_access(h.key, h.address, payload.size(), btl::reg_flags::remote_write);
            if (s == Status::success && !payload.empty())
                std::memcpy(to_pointer(h.address), payload.data(), payload.size());
            reply(c, Kind::put_ack, h.op, s, nullptr, 0);
            return;
        }
        case Kind::get: {
            const Status s = check_access(h.key, h.address, h.length, btl::reg_flags::remote_read);
            const bool ok = s == Status::success;
            // The bytes are read when the reply is written: until then they may
            // still change, as with a real RDMA read.
            reply(c, Kind::get_reply, h.op, s, ok ? to_pointer(h.address) : nullptr,
                  ok ? h.length : 0);
            return;
        }
        case Kind::put_ack:
        case Kind::get_reply: {
            if (h.op >= ops_.size() || !ops_[h.op].busy) break;
            RdmaOp& op = ops_[h.op];
            Status s = static_cast<Status>(h.status);
            if (h.kind == Kind::get_reply && s == Status::success) {
                if (payload.size() != op.size)
                    s = Status::protocol_error;
                else if (!payload.empty())
                    std::memcpy(op.local, payload.data(), payload.size());
            }
            complete(op, s);
            return;
        }
    }
    report_error(btl::error_flags::fatal, c.peer, "btl/unix: unexpected message");
    lost(c);
}

void UnixModule::reply(Connection& c, Kind kind, std::uint32_t op, Status status, const void* data,
                       std::size_t size) noexcept {
    if (c.free_replies.empty()) {
        // Only a peer that breaks the protocol gets here (more requests than
        // max_rdma_in_flight): refuse it rather than drop a reply silently.
        report_error(btl::error_flags::fatal, c.peer, "btl/unix: too many requests in flight");
        lost(c);
        return;
    }
    Outgoing* r = c.free_replies.back();
    c.free_replies.pop_back();
    r->header = Header{};
    r->header.kind = kind;
    r->header.op = op;
    r->header.status = static_cast<std::int32_t>(status);
    r->payload = data;
    r->payload_size = size;
    if (start(c, *r) != Status::success) c.free_replies.push_back(r);  // written, or lost
}

// The connection failed or the peer closed it.  For our own connection to a
// peer that is an error to report; a peer closing its connection to us is the
// normal end of a job.
void UnixModule::lost(Connection& c) noexcept {
    if (c.broken) return;
    c.broken = true;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    const bool ours = c.endpoint != nullptr && &c.endpoint->conn == &c;
    bool pending = c.head != nullptr;
    while (Outgoing* o = c.pop()) written(c, *o, Status::peer_failed);
    if (!ours) return;
    for (RdmaOp& op : ops_) {
        if (!op.busy || op.endpoint != c.endpoint) continue;
        pending = true;
        complete(op, Status::peer_failed);
    }
    // A peer that finished its job closes its side: an error only if we were
    // still waiting for it.  Later sends to it report unreachable either way.
    if (pending)
        report_error(btl::error_flags::fatal, c.peer, "btl/unix: connection to the peer lost");
    else
        out_.verbose(10, "rank {} closed its connection", c.peer);
}

}  // namespace unix_btl
