// The fixture's messaging half: sending by each method, the frame queue that
// replies and out-of-resource fallbacks go through, and the receive callbacks
// that implement the service and collect replies.
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "tests/conformance/btl_test.hpp"

namespace transit::conformance {
namespace {

std::array<iovec, 3> three_pieces(std::span<const std::byte> data) {
    // Uneven pieces, so fragment borders fall inside pieces and between them.
    const std::size_t a = data.size() / 7;
    const std::size_t b = data.size() * 3 / 7;
    auto* p = const_cast<std::byte*>(data.data());
    return {iovec{p, a}, iovec{p + a, b - a}, iovec{p + b, data.size() - b}};
}

}  // namespace

const char* to_string(SendMethod m) {
    switch (m) {
        case SendMethod::alloc_send:
            return "alloc+send";
        case SendMethod::prepare_contiguous:
            return "prepare_src(contiguous)+send";
        case SendMethod::prepare_iovec:
            return "prepare_src(iovec)+send";
        case SendMethod::sendi:
            return "sendi";
        case SendMethod::sendi_iovec:
            return "sendi(iovec)";
    }
    return "?";
}

// --- sending -----------------------------------------------------------------

std::size_t BtlTest::fragment_payload(SendMethod method) const {
    std::size_t limit = attr().max_send_size;
    if (method == SendMethod::sendi || method == SendMethod::sendi_iovec)
        limit = std::min(limit, attr().eager_limit);
    return limit > wire_header_size ? limit - wire_header_size : 0;
}

Status BtlTest::send_descriptor(btl::Descriptor* d, btl::Tag tag) {
    d->flags |= btl::des_flags::btl_ownership;
    d->cbfunc = &BtlTest::on_sent;
    d->cbdata = this;
    const Status s = module_->send(target_, d, tag);
    switch (s) {
        case Status::completed:
            break;
        case Status::success:
            ++sends_pending_;
            break;
        case Status::out_of_resource:
            module_->free(d);
            break;  // still ours: nothing happened
        default:
            ADD_FAILURE() << "send: " << to_string(s);
            module_->free(d);
    }
    return s;
}

bool BtlTest::send_fragment(SendMethod method, btl::Tag tag, WireHeader h,
                            std::span<const std::byte> rest, std::size_t& taken) {
    const std::size_t chunk = std::min(rest.size(), fragment_payload(method));
    taken = rest.size();  // on a hard error the rest of the message is dropped
    auto fill_descriptor = [&](btl::Descriptor* d, std::size_t n) {
        btl::Segment& s = d->segments[0];
        std::memcpy(s.addr, &h, wire_header_size);
        if (n > 0) std::memcpy(static_cast<std::byte*>(s.addr) + wire_header_size, rest.data(), n);
        s.len = wire_header_size + n;
    };
    switch (method) {
        case SendMethod::alloc_send: {
            btl::Descriptor* d = module_->alloc(target_, btl::no_order, wire_header_size + chunk,
                                                btl::des_flags::btl_ownership);
            if (d == nullptr) return false;
            const std::size_t got = d->segments[0].len;
            EXPECT_LE(got, attr().max_send_size) << "alloc returned more than max_send_size";
            if (got < wire_header_size || (chunk > 0 && got == wire_header_size)) {
                ADD_FAILURE() << "alloc(" << wire_header_size + chunk << ") returned " << got
                              << " bytes";
                module_->free(d);
                return true;
            }
            const std::size_t n = std::min(chunk, got - wire_header_size);
            fill_descriptor(d, n);
            if (send_descriptor(d, tag) == Status::out_of_resource) return false;
            taken = n;
            return true;
        }
        case SendMethod::prepare_contiguous:
        case SendMethod::prepare_iovec: {
            std::array<iovec, 3> pieces = three_pieces(rest);
            btl::Convertor contiguous(rest.data(), rest.size());
            btl::Convertor scattered{std::span<const iovec>(pieces)};
            btl::Convertor& conv =
                method == SendMethod::prepare_contiguous ? contiguous : scattered;
            std::size_t size = chunk;
            btl::Descriptor* d =
                module_->prepare_src(target_, conv, btl::no_order, wire_header_size, size,
                                     btl::des_flags::btl_ownership);
            if (d == nullptr) return false;
            if (size > chunk || conv.position() != size || (chunk > 0 && size == 0) ||
                d->segment_count < 1 || d->segments[0].len < wire_header_size) {
                ADD_FAILURE() << to_string(method) << ": asked " << chunk << " bytes, took " << size
                              << ", convertor at " << conv.position() << ", " << d->segment_count
                              << " segment(s)";
                module_->free(d);
                return true;
            }
            std::memcpy(d->segments[0].addr, &h, wire_header_size);
            if (send_descriptor(d, tag) == Status::out_of_resource) return false;
            taken = size;
            return true;
        }
        case SendMethod::sendi:
        case SendMethod::sendi_iovec: {
            std::array<iovec, 3> pieces = three_pieces(rest.first(chunk));
            btl::Convertor contiguous(rest.data(), chunk);
            btl::Convertor scattered{std::span<const iovec>(pieces)};
            btl::Convertor& conv = method == SendMethod::sendi ? contiguous : scattered;
            btl::Descriptor* d = nullptr;
            const Status s = module_->sendi(target_, &conv, &h, wire_header_size, chunk,
                                            btl::no_order, btl::des_flags::btl_ownership, tag, &d);
            if (s == Status::completed) {
                EXPECT_EQ(d, nullptr) << "sendi completed and also returned a descriptor";
                taken = chunk;
                return true;
            }
            if (s != Status::out_of_resource) {
                ADD_FAILURE() << "sendi returned " << to_string(s)
                              << " (expected completed or out of resource)";
                return true;
            }
            if (d == nullptr) return false;
            if (d->segments[0].len < wire_header_size + chunk) {
                ADD_FAILURE() << "sendi's fallback descriptor has " << d->segments[0].len
                              << " bytes, needs " << wire_header_size + chunk;
                module_->free(d);
                return true;
            }
            fill_descriptor(d, chunk);
            if (send_descriptor(d, tag) == Status::out_of_resource) return false;
            taken = chunk;
            return true;
        }
    }
    return true;
}

void BtlTest::send_echo(SendMethod method, std::uint64_t msg, std::span<const std::byte> payload,
                        std::uint32_t seq) {
    if (fragment_payload(method) == 0) {
        ADD_FAILURE() << "the module's limits leave no room for the suite's " << wire_header_size
                      << "-byte header";
        return;
    }
    WireHeader h{Kind::echo, seq, msg, 0, payload.size(), 0};
    std::size_t pos = 0;
    do {
        h.offset = pos;
        const std::span<const std::byte> rest = payload.subspan(pos);
        std::size_t taken = 0;
        // Behind queued frames a direct send would overtake them: queue as well.
        if (!outbox_.empty() || !send_fragment(method, tag_request, h, rest, taken)) {
            taken = std::min(rest.size(), fragment_payload(SendMethod::alloc_send));
            queue_frame(tag_request, h, rest.first(taken));
            pump();
        }
        pos += taken;
    } while (pos < payload.size());
}

void BtlTest::queue_frame(btl::Tag tag, const WireHeader& h, std::span<const std::byte> payload) {
    Frame f{tag, std::vector<std::byte>(wire_header_size + payload.size())};
    std::memcpy(f.bytes.data(), &h, wire_header_size);
    if (!payload.empty())
        std::memcpy(f.bytes.data() + wire_header_size, payload.data(), payload.size());
    outbox_.push_back(std::move(f));
}

void BtlTest::post(btl::Tag tag, WireHeader h, std::span<const std::byte> payload) {
    const std::size_t room = fragment_payload(SendMethod::alloc_send);
    std::size_t pos = 0;
    do {
        const std::size_t n = std::min(room, payload.size() - pos);
        h.offset = pos;
        queue_frame(tag, h, payload.subspan(pos, n));
        pos += n;
    } while (pos < payload.size() && room > 0);
    pump();
}

// Sends queued frames in order.  Re-entrant: a frame delivered synchronously
// (self) runs a callback that may post and pump again, which is why a frame
// leaves the queue before it is sent.
void BtlTest::pump() {
    while (!outbox_.empty() && module_ != nullptr && target_ != nullptr) {
        Frame f = std::move(outbox_.front());
        outbox_.pop_front();
        btl::Descriptor* d =
            module_->alloc(target_, btl::no_order, f.bytes.size(), btl::des_flags::btl_ownership);
        if (d == nullptr) {
            outbox_.push_front(std::move(f));
            return;
        }
        if (d->segments[0].len < f.bytes.size()) {
            ADD_FAILURE() << "alloc(" << f.bytes.size() << ") returned " << d->segments[0].len
                          << " bytes (max_send_size " << attr().max_send_size << ")";
            module_->free(d);
            continue;
        }
        std::memcpy(d->segments[0].addr, f.bytes.data(), f.bytes.size());
        d->segments[0].len = f.bytes.size();
        if (send_descriptor(d, f.tag) == Status::out_of_resource) {
            outbox_.push_front(std::move(f));
            return;
        }
    }
}

void BtlTest::on_sent(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) {
    auto* t = static_cast<BtlTest*>(d->cbdata);
    if (--t->sends_pending_ < 0) {
        ++t->callback_errors_;
        ADD_FAILURE() << "completion callback for a send that completed inline";
    }
    if (!ok(s)) {
        ++t->callback_errors_;
        ADD_FAILURE() << "send completed with " << to_string(s);
    }
}

// --- receiving ---------------------------------------------------------------

void BtlTest::on_request(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* t = static_cast<BtlTest*>(self);
    WireHeader h;
    if (total_length(d) < wire_header_size) {
        ++t->callback_errors_;
        ADD_FAILURE() << "request of " << total_length(d) << " bytes: shorter than its header";
        return;
    }
    gather(d, 0, &h, wire_header_size);
    t->handle_request(h, d);
}

void BtlTest::on_reply(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* t = static_cast<BtlTest*>(self);
    WireHeader h;
    if (total_length(d) < wire_header_size) {
        ++t->callback_errors_;
        ADD_FAILURE() << "reply of " << total_length(d) << " bytes: shorter than its header";
        return;
    }
    gather(d, 0, &h, wire_header_size);
    t->handle_reply(h, d);
    if (t->progress_in_reply_) t->progress_.progress();
}

void BtlTest::on_chain(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* t = static_cast<BtlTest*>(self);
    WireHeader h;
    gather(d, 0, &h, wire_header_size);
    if (h.length == 0) {
        ++t->chains_done_;
        return;
    }
    // Sending from inside the receive callback: in loopback this recurses.
    --h.length;
    t->post(tag_chain, h, {});
}

void BtlTest::handle_request(const WireHeader& h, const btl::ReceiveDescriptor& d) {
    const std::size_t n = total_length(d) - wire_header_size;
    std::byte* region = region_start();
    auto inside = [&](std::uint64_t base, std::uint64_t len) {
        if (base <= region_bytes_ && len <= region_bytes_ - base) return true;
        ++callback_errors_;
        ADD_FAILURE() << "request outside the region: [" << base << ", +" << len << ")";
        return false;
    };
    const WireHeader ack{Kind::ack, 0, h.msg, 0, 0, 0};
    switch (h.kind) {
        case Kind::echo: {
            Frame f{tag_reply, std::vector<std::byte>(wire_header_size + n)};
            gather(d, 0, f.bytes.data(), f.bytes.size());
            outbox_.push_back(std::move(f));
            pump();
            return;
        }
        case Kind::read:
            if (!inside(h.base, h.length)) return;
            post(tag_reply, WireHeader{Kind::read_data, 0, h.msg, 0, h.length, h.base},
                 std::span<const std::byte>(region + h.base, h.length));
            return;
        case Kind::fill:
            if (!inside(h.base, h.length)) return;
            for (std::uint64_t i = 0; i < h.length; ++i) region[h.base + i] = pattern(h.seq, i);
            post(tag_reply, ack, {});
            return;
        case Kind::write: {
            if (!inside(h.base + h.offset, n)) return;
            gather(d, wire_header_size, region + h.base + h.offset, n);
            std::uint64_t& got = written_[h.msg];
            got += n;
            if (got == h.length) {
                written_.erase(h.msg);
                post(tag_reply, ack, {});
            }
            return;
        }
        case Kind::reregister:
            if (region_handle_ != nullptr &&
                rdma_->deregister_mem(region_handle_) != Status::success) {
                ++callback_errors_;
                ADD_FAILURE() << "deregister_mem of the region failed";
            }
            region_handle_ = rdma_ ? rdma_->register_mem(nullptr, region_start(), region_bytes_,
                                                         btl::reg_flags::access_any)
                                   : nullptr;
            send_hello();
            return;
        case Kind::bye:
            bye_ = true;
            post(tag_reply, ack, {});
            return;
        default:
            ++callback_errors_;
            ADD_FAILURE() << "unexpected request kind " << static_cast<int>(h.kind);
    }
}

void BtlTest::handle_reply(const WireHeader& h, const btl::ReceiveDescriptor& d) {
    const std::size_t n = total_length(d) - wire_header_size;
    switch (h.kind) {
        case Kind::echo:
        case Kind::read_data: {
            Reply& r = replies_[h.msg];
            if (!r.any) {
                r.data.resize(h.length);
                r.any = true;
            }
            if (h.kind == Kind::echo && h.offset == 0) echo_seqs_.push_back(h.seq);
            if (h.offset > r.data.size() || n > r.data.size() - h.offset) {
                ++callback_errors_;
                ADD_FAILURE() << "reply fragment [" << h.offset << ", +" << n
                              << ") outside its message of " << r.data.size() << " bytes";
                return;
            }
            gather(d, wire_header_size, r.data.data() + h.offset, n);
            r.received += n;
            return;
        }
        case Kind::ack:
            acks_.insert(h.msg);
            return;
        case Kind::hello: {
            RegionInfo info{};
            if (n < sizeof info) break;
            gather(d, wire_header_size, &info, sizeof info);
            if (info.handle_size > remote_handle_.size() || n < sizeof info + info.handle_size)
                break;
            gather(d, wire_header_size + sizeof info, remote_handle_.data(), info.handle_size);
            region_ = info;
            hello_ = true;
            return;
        }
        default:
            break;
    }
    ++callback_errors_;
    ADD_FAILURE() << "unexpected or malformed reply kind " << static_cast<int>(h.kind);
}

}  // namespace transit::conformance
