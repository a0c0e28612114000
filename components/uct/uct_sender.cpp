// The send side of a uct module (see uct_sender.hpp): sendi's paths, send of
// a descriptor, and transmit, the one active message the others go through.
#include "uct_sender.hpp"

#include <algorithm>
#include <cstring>

#include "transit/btl/util/descriptor_setup.hpp"
#include "uct_module.hpp"

namespace transit::uct {

void UctSender::setup(const uct_iface_attr_t& attr) {
    const auto& am = attr.cap.am;
    max_message_ = am.max_bcopy;
    max_short_ =
        (attr.cap.flags & UCT_IFACE_FLAG_AM_SHORT) && am.max_short > 8 ? am.max_short - 8 : 0;
    // sendi's header + payload as three pieces of one am_short_iov.
    short_iov_ = am.max_iov >= 3;
    scratch_.resize(std::max<std::size_t>(max_short_, 64));
}

std::size_t UctSender::pack_cb(void* dest, void* arg) noexcept {
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

// One message, completed when this returns (UCT copies it): completed, or
// nothing happened (out_of_resource, errors).
Status UctSender::transmit(UctEndpoint* ep, Gather& g) noexcept {
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
                return s == UCS_OK ? Status::completed : module_.from_ucs(s, ep);
            }
            data = p;
        }
        s = uct_ep_am_short(ep->ep, am_id, header, data, static_cast<unsigned>(payload));
        return s == UCS_OK ? Status::completed : module_.from_ucs(s, ep);
    }
    if (g.total() > max_message_) [[unlikely]]
        return Status::bad_param;
    const std::size_t start = g.convertor ? g.convertor->position() : 0;
    const ssize_t n = uct_ep_am_bcopy(ep->ep, am_id, &UctSender::pack_cb, &g, 0);
    if (n >= 0) return Status::completed;
    if (g.convertor) g.convertor->seek(start);
    return module_.from_ucs(static_cast<ucs_status_t>(n), ep);
}

void UctSender::finish_send(UctFrag* f, UctEndpoint* ep) noexcept {
    const std::uint32_t flags = f->flags;
    if ((flags & btl::des_flags::send_always_callback) && f->cbfunc != nullptr)
        f->cbfunc(&module_, ep, f, Status::success);
    if (flags & btl::des_flags::btl_ownership) frags_.put(f);
}

Status UctSender::send(btl::Endpoint* endpoint, btl::Descriptor* descriptor,
                       btl::Tag tag) noexcept {
    if (!module_.valid(endpoint) || descriptor == nullptr) [[unlikely]]
        return Status::bad_param;
    auto* f = static_cast<UctFrag*>(descriptor);
    if (!frags_.owns(f) || !f->in_use || descriptor->segments[0].len > f->capacity) [[unlikely]]
        return Status::bad_param;
    auto* ep = static_cast<UctEndpoint*>(endpoint);
    // Behind messages already waiting for the peer's FIFO: the queue first, in order.
    if (!ep->queued.empty() && (ep->failed || !send_queue_.send_queued(*ep))) [[unlikely]]
        return ep->failed ? Status::peer_failed : send_queue_.enqueue(ep, f, tag);
    Gather g{module_.wire(Kind::message, tag), descriptor->segments[0].addr,
             static_cast<std::size_t>(descriptor->segments[0].len)};
    const Status s = transmit(ep, g);
    if (s == Status::out_of_resource) return send_queue_.enqueue(ep, f, tag);
    if (s != Status::completed) return s;
    finish_send(f, ep);
    return Status::completed;
}

// What the short paths share: the source of a payload that fits one am_short
// (with `total` bytes after the wire header), or nullptr.
[[gnu::always_inline]] inline const void* UctSender::short_source(btl::Endpoint* endpoint,
                                                                  btl::Convertor* convertor,
                                                                  std::size_t total,
                                                                  std::size_t payload) noexcept {
    if (total > max_short_ || payload == 0 || convertor == nullptr || !module_.valid(endpoint) ||
        static_cast<UctEndpoint*>(endpoint)->failed ||
        !static_cast<UctEndpoint*>(endpoint)->queued.empty()) [[unlikely]]
        return nullptr;
    return convertor->contiguous_at(payload);
}

[[gnu::always_inline]] inline Status UctSender::short_sent(btl::Convertor* convertor,
                                                           std::size_t payload,
                                                           btl::Descriptor** descriptor) noexcept {
    convertor->skip(payload);
    if (descriptor != nullptr) *descriptor = nullptr;
    return Status::completed;
}

// No header: what is kept across UCT's call is fewer values (the fallback
// passes no header), so fewer registers are saved.
Status UctSender::sendi_raw(btl::Endpoint* endpoint, btl::Convertor* convertor,
                            std::size_t payload_size, btl::Tag tag, btl::Descriptor** descriptor,
                            std::uint8_t order, std::uint32_t flags) noexcept {
    if (const void* src = short_source(endpoint, convertor, payload_size, payload_size))
        [[likely]] {
        auto* ep = static_cast<UctEndpoint*>(endpoint);
        const ucs_status_t s =
            uct_ep_am_short(ep->ep, am_id, wire_word(UctModule::wire(Kind::message, tag, ep)), src,
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
Status UctSender::sendi_iov(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
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
            uct_ep_am_short(ep->ep, am_id, wire_word(UctModule::wire(Kind::message, tag, ep)), buf,
                            static_cast<unsigned>(total));
        if (s == UCS_OK) [[likely]]
            return short_sent(convertor, payload_size, descriptor);
        if (s == UCS_ERR_NO_RESOURCE)
            return take_in(endpoint, convertor, header, header_size, payload_size, order, tag,
                           descriptor);
    } else if (src != nullptr && header != nullptr && short_iov_) {
        // One 8-byte store, read back whole by UCT's copy (forwarded).
        const std::uint64_t word =
            wire_word(UctModule::wire(Kind::message, tag, static_cast<UctEndpoint*>(endpoint)));
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
Status UctSender::sendi_gather(btl::Endpoint* endpoint, btl::Convertor* convertor,
                               const void* header, std::size_t header_size,
                               std::size_t payload_size, std::uint8_t order, std::uint32_t flags,
                               btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    if (!module_.valid(endpoint) ||
        !btl::sendi_arguments_valid(convertor, header, header_size, payload_size)) [[unlikely]]
        return Status::bad_param;
    auto* ep = static_cast<UctEndpoint*>(endpoint);
    const std::size_t total = header_size + payload_size;
    if (total <= module_.attributes().max_send_size &&
        payload_size <= module_.attributes().eager_limit) {
        // Nothing overtakes the messages waiting for this peer's FIFO: they go first.
        if (!ep->queued.empty() && (ep->failed || !send_queue_.send_queued(*ep)))
            return ep->failed ? Status::peer_failed
                              : take_in(endpoint, convertor, header, header_size, payload_size,
                                        order, tag, descriptor);
        Gather g{module_.wire(Kind::message, tag), header, header_size};
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
        *descriptor = btl::util::alloc_whole(module_, endpoint, order, total, flags);
    return Status::out_of_resource;
}

// sendi when UCT has no room, or messages wait already: the message is copied
// into a send fragment at the back of the endpoint's queue and is taken
// (completed: the caller's buffer is free again and the queue goes in order,
// at the next send to that peer or progress pass; the tcp btl's sendi
// appends to a burst the same way).  With no fragment free, nothing happens
// (out_of_resource, no descriptor either: alloc would fail too).
Status UctSender::take_in(btl::Endpoint* endpoint, btl::Convertor* convertor, const void* header,
                          std::size_t header_size, std::size_t payload_size, std::uint8_t order,
                          btl::Tag tag, btl::Descriptor** descriptor) noexcept {
    if (descriptor != nullptr) *descriptor = nullptr;
    const std::size_t total = header_size + payload_size;
    UctFrag* f = frags_.get();
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
}  // namespace transit::uct
