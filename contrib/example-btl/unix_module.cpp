// btl/unix: the module's operations.  Everything after init follows the BTL
// hot-path rules: no heap allocation, no exception, no lock.  Descriptors come
// from a pool made at init, and a message is written whole or not at all.
#include "unix_module.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace unix_btl {
namespace {

constexpr std::size_t header_size = sizeof(Header);
constexpr int max_reads = 16;  // bounded work per progress call

}  // namespace

// --- setup -------------------------------------------------------------------

UnixModule::UnixModule(btl::Component& component, const Config& config, btl::InitContext& ctx,
                       Fd socket, std::vector<std::byte> address)
    : btl::Module(component),
      config_(config),
      runtime_(ctx.runtime),
      am_table_(ctx.am_table),
      engine_(ctx.progress),
      out_("btl:unix", config.verbose),
      socket_(std::move(socket)),
      address_(std::move(address)),
      endpoints_(ctx.runtime.size()),
      receive_buffer_(header_size + config.max_send_size),
      frags_(config.free_list_max) {
    attr_.eager_limit = config.eager_limit;
    attr_.rndv_eager_limit = config.eager_limit;
    attr_.max_send_size = config.max_send_size;
    attr_.exclusivity = config.exclusivity;
    attr_.latency = 5;
    attr_.bandwidth = 5000;
    // Not flags::thread_safe: its free fragment list is unlocked.
    attr_.flags = btl::flags::send;  // no put, get or atomics: no rdma(), no atomics()
    free_frags_.reserve(frags_.size());
    for (Frag& f : frags_) {
        f.buffer.resize(config.max_send_size);
        free_frags_.push_back(&f);
    }
    // Registered for the module's lifetime: peers may send to us at any time.
    progress_handle_ = engine_.add(&UnixModule::progress_callback, this);
}

UnixModule::~UnixModule() {
    engine_.remove(progress_handle_);
}

Status UnixModule::add_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints,
                             btl::Reachability& reachable) {
    if (endpoints.size() < peers.size() || reachable.size() < peers.size())
        return Status::bad_param;
    std::vector<std::byte> name;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        const Rank peer = peers[i];
        // A UNIX socket only reaches this node; a peer without our modex key
        // did not load btl/unix.  Neither is an error: another btl may reach it.
        if (peer >= endpoints_.size()) return Status::bad_param;
        if (peer == runtime_.rank())
            name = address_;  // ourselves (loopback): no modex needed
        else if (!runtime_.on_this_node(peer) ||
                 runtime_.modex_recv(peer, "btl.unix.1", name) != Status::success)
            continue;
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        if (name.empty() || name.size() > sizeof sa.sun_path) {
            transit::log::warn(
                "btl/unix: rank {} published a bad socket name; it is left to "
                "other transports",
                peer);
            continue;
        }
        std::memcpy(sa.sun_path, name.data(), name.size());
        const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
        auto& slot = endpoints_[peer];
        if (!slot) slot = std::make_unique<UnixEndpoint>(peer, sa, length);
        endpoints[i] = slot.get();
        reachable.set(i);
        out_.verbose(10, "rank {} is reached at its socket", peer);
    }
    return Status::success;
}

Status UnixModule::del_procs(std::span<const Rank> peers, std::span<btl::Endpoint*> endpoints) {
    if (endpoints.size() < peers.size()) return Status::bad_param;
    for (std::size_t i = 0; i < peers.size(); ++i) {
        if (peers[i] >= endpoints_.size() || endpoints[i] != endpoints_[peers[i]].get()) continue;
        endpoints_[peers[i]].reset();
        endpoints[i] = nullptr;
    }
    return Status::success;
}

// --- descriptors -------------------------------------------------------------

Frag* UnixModule::take_frag(btl::Endpoint* endpoint, std::uint8_t order,
                            std::uint32_t flags) noexcept {
    if (usable(endpoint) == nullptr || free_frags_.empty()) return nullptr;
    Frag* f = free_frags_.back();
    free_frags_.pop_back();
    f->in_pool = false;
    static_cast<btl::Descriptor&>(*f) = {
        .segments = &f->segment, .segment_count = 1, .flags = flags, .order = order};
    return f;
}

btl::Descriptor* UnixModule::alloc(btl::Endpoint* endpoint, std::uint8_t order, std::size_t size,
                                   std::uint32_t flags) noexcept {
    Frag* f = take_frag(endpoint, order, flags);
    if (f != nullptr) f->segment = {f->buffer.data(), std::min(size, config_.max_send_size)};
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
    Frag* f = take_frag(endpoint, order, flags);
    if (f == nullptr) return nullptr;
    // A copy: the caller's buffer may change before send() is called.
    size =
        convertor.pack(f->buffer.data() + reserve, std::min(size, config_.max_send_size - reserve));
    f->segment = {f->buffer.data(), reserve + size};
    return f;
}

// --- sending -------------------------------------------------------------------

Status UnixModule::write(UnixEndpoint& ep, std::span<iovec> pieces, btl::Tag tag) noexcept {
    Header h{runtime_.rank(), tag};
    pieces[0] = {&h, header_size};
    msghdr msg{};
    msg.msg_name = &ep.address;
    msg.msg_namelen = ep.length;
    msg.msg_iov = pieces.data();
    msg.msg_iovlen = pieces.size();
    if (::sendmsg(socket_.get(), &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return Status::completed;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
        return Status::out_of_resource;  // the peer's socket is full
    // ECONNREFUSED: nobody has that socket open any more, the peer has left.
    ep.gone = true;
    report_error(btl::error_flags::fatal, ep.peer(), "btl/unix: the peer's socket is gone");
    return Status::peer_failed;
}

Status UnixModule::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                        btl::Tag tag) noexcept {
    UnixEndpoint* ep = usable(endpoint);
    auto* f = static_cast<Frag*>(descriptor);
    if (f == nullptr || f->in_pool || f->segment_count != 1) [[unlikely]]
        return Status::bad_param;
    if (ep == nullptr) [[unlikely]]
        return endpoint == nullptr ? Status::bad_param : Status::unreachable;
    std::array<iovec, 2> pieces{iovec{}, iovec{f->segment.addr, f->segment.len}};
    const Status s = write(*ep, pieces, tag);
    if (s != Status::completed) return s;  // nothing happened: the caller still owns f
    // Written: no callback unless asked for; then back to the pool if ours.
    const std::uint32_t flags = f->flags;
    if ((flags & btl::des_flags::send_always_callback) && f->cbfunc != nullptr)
        f->cbfunc(this, ep, f, Status::success);
    if (flags & btl::des_flags::btl_ownership) free(f);
    return Status::completed;
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
    // Straight from the caller's memory when the payload is contiguous.
    const void* payload = payload_size > 0 ? convertor->contiguous_at(payload_size) : nullptr;
    if (payload_size == 0 || payload != nullptr) {
        std::array<iovec, 3> pieces{iovec{}, iovec{const_cast<void*>(header), header_bytes},
                                    iovec{const_cast<void*>(payload), payload_size}};
        const Status s = write(*ep, pieces, tag);
        if (s == Status::completed && payload_size > 0) convertor->skip(payload_size);
        if (s != Status::out_of_resource) return s;
    }
    // Not now: hand back a descriptor for the caller to fill and send later.
    if (descriptor != nullptr) *descriptor = alloc(ep, order, total, flags);
    return Status::out_of_resource;
}

// --- receiving ---------------------------------------------------------------

int UnixModule::progress_callback(void* self) noexcept {
    return static_cast<UnixModule*>(self)->progress();
}

int UnixModule::progress() noexcept {
    // A callback that drives progress again would overwrite the message it is
    // reading: the nested call does nothing.
    if (in_progress_) return 0;
    in_progress_ = true;
    int events = 0;
    for (; events < max_reads; ++events) {
        // MSG_TRUNC makes recv return the message's real length, so a message
        // larger than our buffer is detected instead of silently cut.
        const ssize_t n = ::recv(socket_.get(), receive_buffer_.data(), receive_buffer_.size(),
                                 MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) break;  // EAGAIN: nothing (more) to read
        deliver(static_cast<std::size_t>(n));
    }
    in_progress_ = false;
    return events;
}

void UnixModule::deliver(std::size_t size) noexcept {
    Header h{};
    if (size >= header_size) std::memcpy(&h, receive_buffer_.data(), header_size);
    if (size < header_size || size > receive_buffer_.size() || h.rank >= endpoints_.size()) {
        report_error(btl::error_flags::nonfatal, transit::any_rank,
                     "btl/unix: a malformed message was dropped (is btl_unix_max_send_size the "
                     "same on every rank?)");
        return;
    }
    const btl::Segment segment{receive_buffer_.data() + header_size, size - header_size};
    // The sender's endpoint, when this process added it (the pml may not have).
    const btl::ReceiveDescriptor d{endpoints_[h.rank].get(), &segment, 1, h.tag};
    if (!am_table_.dispatch(this, d))
        report_error(btl::error_flags::nonfatal, h.rank,
                     "btl/unix: a message arrived for a tag with no callback");
}

}  // namespace unix_btl
