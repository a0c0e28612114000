#include "tests/conformance/threads_echo.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace transit::conformance {
namespace {

std::uint64_t seed_of(std::uint64_t thread, std::uint64_t seq) noexcept {
    return (thread << 32) | seq;
}

}  // namespace

void ThreadsEcho::attach(btl::Module* module, btl::Endpoint* target) noexcept {
    module_ = module;
    target_ = target;
    const btl::Attributes& a = module->attributes();
    const std::size_t room = std::min(a.eager_limit, a.max_send_size);
    largest_ = room > wire_header_size ? std::min(room - wire_header_size, max_payload) : 0;
}

std::size_t ThreadsEcho::payload_size(std::uint32_t seq) const noexcept {
    const std::size_t sizes[] = {0, 1, 8, 64, largest_};
    return std::min(sizes[seq % 5], largest_);
}

bool ThreadsEcho::ping(std::uint32_t thread, std::uint32_t seq) {
    std::array<std::byte, max_payload> payload;
    const std::size_t n = payload_size(seq);
    for (std::size_t i = 0; i < n; ++i) payload[i] = pattern(seed_of(thread, seq), i);
    const WireHeader h{Kind::ping, seq, thread, 0, n, 0};
    // Every way of sending in turn, so the module's descriptor pools are shared too.
    const auto way = static_cast<Way>(seq % 3);
    return send(h, std::span<const std::byte>(payload.data(), n), way) != Status::out_of_resource;
}

// By `way`, falling back from sendi to the descriptor it returns or to
// alloc; out_of_resource when the module had no room (nothing sent).
Status ThreadsEcho::send(const WireHeader& h, std::span<const std::byte> payload, Way way) {
    btl::Convertor conv(payload.data(), payload.size());
    btl::Descriptor* d = nullptr;
    std::size_t taken = payload.size();
    if (way == Way::sendi) {
        const Status s =
            module_->sendi(target_, &conv, &h, wire_header_size, payload.size(), btl::no_order,
                           btl::des_flags::btl_ownership, tag_threads, &d);
        if (s == Status::completed) return s;
        if (s != Status::out_of_resource) {
            fail(fmt::format("sendi: {}", to_string(s)));
            return s;
        }
    } else if (way == Way::prepare_src) {
        d = module_->prepare_src(target_, conv, btl::no_order, wire_header_size, taken,
                                 btl::des_flags::btl_ownership);
        if (d == nullptr) return Status::out_of_resource;
        if (taken != payload.size()) {
            fail(fmt::format("prepare_src took {} of {} bytes", taken, payload.size()));
            module_->free(d);
            return Status::error;
        }
        std::memcpy(d->segments[0].addr, &h, wire_header_size);
    }
    if (d == nullptr)
        d = module_->alloc(target_, btl::no_order, wire_header_size + payload.size(),
                           btl::des_flags::btl_ownership);
    if (d == nullptr) return Status::out_of_resource;
    if (way != Way::prepare_src && !fill(*d, h, payload)) {
        module_->free(d);
        return Status::error;
    }
    d->flags |= btl::des_flags::btl_ownership;
    d->cbfunc = &ThreadsEcho::on_sent;
    d->cbdata = this;
    in_flight_.fetch_add(1);
    const Status s = module_->send(target_, d, tag_threads);
    if (s == Status::success) return s;
    in_flight_.fetch_sub(1);
    if (s == Status::completed) return s;
    module_->free(d);
    if (s != Status::out_of_resource) fail(fmt::format("send: {}", to_string(s)));
    return s;
}

// Header and payload into the descriptor's one segment.
bool ThreadsEcho::fill(btl::Descriptor& d, const WireHeader& h,
                       std::span<const std::byte> payload) {
    btl::Segment& seg = d.segments[0];
    if (seg.len < wire_header_size + payload.size()) {
        fail(fmt::format("a descriptor of {} bytes for {} + {}", seg.len, wire_header_size,
                         payload.size()));
        return false;
    }
    std::memcpy(seg.addr, &h, wire_header_size);
    if (!payload.empty())
        std::memcpy(static_cast<std::byte*>(seg.addr) + wire_header_size, payload.data(),
                    payload.size());
    seg.len = wire_header_size + payload.size();
    return true;
}

void ThreadsEcho::on_sent(btl::Module*, btl::Endpoint*, btl::Descriptor* d, Status s) {
    auto* e = static_cast<ThreadsEcho*>(d->cbdata);
    if (!ok(s)) e->fail(fmt::format("a send completed with {}", to_string(s)));
    if (e->in_flight_.fetch_sub(1) <= 0)
        e->fail("a send called back twice, or after completing inline");
}

void ThreadsEcho::on_message(btl::Module*, const btl::ReceiveDescriptor& d, void* self) {
    auto* e = static_cast<ThreadsEcho*>(self);
    const std::size_t n = total_length(d);
    if (n < wire_header_size || n - wire_header_size > max_payload) {
        e->fail(fmt::format("a message of {} bytes", n));
        return;
    }
    WireHeader h;
    gather(d, 0, &h, wire_header_size);
    if (h.kind == Kind::pong) {
        e->check_pong(h, d);
        return;
    }
    if (h.kind != Kind::ping) {
        e->fail(fmt::format("a message of kind {}", static_cast<std::uint32_t>(h.kind)));
        return;
    }
    Frame f(n);
    gather(d, 0, f.data(), n);
    h.kind = Kind::pong;
    std::memcpy(f.data(), &h, wire_header_size);
    e->answer(std::move(f));
}

// Behind pongs already waiting a pong waits too: it must not overtake them.
void ThreadsEcho::answer(Frame frame) {
    {
        std::lock_guard held(waiting_mutex_);
        if (!waiting_.empty()) {
            waiting_.push_back(std::move(frame));
            return;
        }
    }
    WireHeader h;
    std::memcpy(&h, frame.data(), wire_header_size);
    const auto payload = std::span<const std::byte>(frame).subspan(wire_header_size);
    if (send(h, payload, Way::sendi) != Status::out_of_resource) return;
    std::lock_guard held(waiting_mutex_);
    waiting_.push_back(std::move(frame));
}

void ThreadsEcho::pump() {
    if (module_ == nullptr) return;
    std::lock_guard held(waiting_mutex_);
    while (!waiting_.empty()) {
        const Frame& f = waiting_.front();
        WireHeader h;
        std::memcpy(&h, f.data(), wire_header_size);
        // Sent under the lock: in loopback it delivers at once, and the
        // receive callback answers pongs only, which never wait here.
        if (send(h, std::span<const std::byte>(f).subspan(wire_header_size), Way::sendi) ==
            Status::out_of_resource)
            return;
        waiting_.pop_front();
    }
}

bool ThreadsEcho::idle() const {
    std::lock_guard held(waiting_mutex_);
    return waiting_.empty() && in_flight_.load() == 0;
}

void ThreadsEcho::check_pong(const WireHeader& h, const btl::ReceiveDescriptor& d) {
    if (h.msg >= max_threads) {
        fail(fmt::format("a pong for thread {}", h.msg));
        return;
    }
    const auto thread = static_cast<std::uint32_t>(h.msg);
    const std::size_t n = total_length(d) - wire_header_size;
    std::array<std::byte, max_payload> payload;
    gather(d, wire_header_size, payload.data(), n);
    if (n != h.length || n != payload_size(h.seq))
        fail(fmt::format("pong {} of thread {}: {} bytes", h.seq, thread, n));
    for (std::size_t i = 0; i < n; ++i) {
        if (payload[i] != pattern(seed_of(thread, h.seq), i)) {
            fail(fmt::format("pong {} of thread {}: byte {} differs", h.seq, thread, i));
            break;
        }
    }
    // One thread's messages on one endpoint keep their order.
    const std::uint32_t expected = next_[thread].fetch_add(1, std::memory_order_acq_rel);
    if (h.seq != expected)
        fail(fmt::format("thread {}: pong {} came where {} was due", thread, h.seq, expected));
}

void ThreadsEcho::fail(const std::string& what) {
    errors_.fetch_add(1);
    ADD_FAILURE() << "concurrent messages: " << what;  // gtest takes failures from any thread
}

}  // namespace transit::conformance
