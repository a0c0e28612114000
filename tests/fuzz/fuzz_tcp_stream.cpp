// libFuzzer target for tcp's stream parser: a connection's bytes arrive in
// chunks of any size into a link's receive buffer, and next_frame() (what
// TcpReceiver::parse runs) finds each frame; put and reply data stream past the
// buffer as the module reads it.  The parser must never read outside the
// buffer, nor wait for a frame that cannot fit it.  See tcp_stream.cmake.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "components/tcp/tcp_wire.hpp"

namespace wire = transit::tcp::wire;

namespace {

// The module's buffer: room for the largest AM frame behind a fragment's
// headroom (64 bytes: header and the largest fixed body, rounded up).
constexpr wire::Limits limits{.max_am = 1024, .max_rdma = 4096};
constexpr std::size_t capacity = 64 + limits.max_am;

struct Link {
    std::unique_ptr<std::byte[]> buf = std::make_unique<std::byte[]>(capacity);
    std::size_t head = 0, tail = 0;
    std::size_t direct_left = 0;  // streamed data still to come
    bool failed = false;
};

// What handle_frame does with the bytes: step over the frame, or over the
// buffered part of a streamed one, the rest then read from the socket.
void handle(Link& l, const wire::FrameHeader& h) {
    const std::size_t avail = l.tail - l.head;
    const std::byte* body = l.buf.get() + l.head + wire::header_size;
    const auto streamed = [&](std::size_t fixed, std::uint64_t announced) {
        const std::size_t data_len = h.length - fixed;
        if (announced != data_len) {
            l.failed = true;
            return;
        }
        const std::size_t in_buf = std::min(avail - wire::header_size - fixed, data_len);
        l.head += wire::header_size + fixed + in_buf;
        if (in_buf < data_len) {
            l.direct_left = data_len - in_buf;
            l.head = l.tail = 0;
        }
    };
    switch (h.type) {
        case wire::FrameType::put:
            return streamed(wire::rdma_request_size, wire::decode_rdma_request(body).size);
        case wire::FrameType::reply:
            (void)wire::decode_reply(body);  // the module checks the length against its op
            return streamed(wire::reply_size, h.length - wire::reply_size);
        case wire::FrameType::get:
            (void)wire::decode_rdma_request(body);
            break;
        case wire::FrameType::atomic:
            (void)wire::decode_atomic_request(body);
            break;
        case wire::FrameType::am: {
            std::uint32_t sum = 0;
            for (std::size_t i = 0; i < h.length; ++i) sum += static_cast<std::uint8_t>(body[i]);
            (void)sum;
            break;
        }
        case wire::FrameType::goodbye:
            break;
    }
    l.head += wire::header_size + h.length;
}

void parse(Link& l) {
    while (!l.failed && l.direct_left == 0) {
        wire::FrameHeader h;
        const wire::ScanResult r =
            wire::next_frame({l.buf.get(), l.head, l.tail, capacity}, limits, h);
        if (r == wire::ScanResult::need_more) {
            // A full buffer that still needs more would never be read again.
            if (l.tail - l.head == capacity) __builtin_trap();
            break;
        }
        if (r != wire::ScanResult::ok) {
            l.failed = true;
            break;
        }
        handle(l, h);
        if (l.head > l.tail || l.tail > capacity) __builtin_trap();
    }
    if (l.head == l.tail) l.head = l.tail = 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::uint32_t rng = data[0] | 1u;  // chunk sizes, as recv() might return them
    std::span<const std::uint8_t> stream(data + 1, size - 1);
    Link l;
    while (!stream.empty() && !l.failed) {
        rng = rng * 1103515245u + 12345u;
        const std::size_t chunk = 1 + (rng >> 16) % 300;
        if (l.direct_left > 0) {
            const std::size_t n = std::min({chunk, l.direct_left, stream.size()});
            l.direct_left -= n;
            stream = stream.subspan(n);
            if (l.direct_left == 0) parse(l);
            continue;
        }
        if (l.tail == capacity) {  // as on_readable: move a partial frame to the front
            std::memmove(l.buf.get(), l.buf.get() + l.head, l.tail - l.head);
            l.tail -= l.head;
            l.head = 0;
        }
        const std::size_t n = std::min({chunk, capacity - l.tail, stream.size()});
        if (n == 0) __builtin_trap();  // no room to receive into: the link would stall
        std::memcpy(l.buf.get() + l.tail, stream.data(), n);
        l.tail += n;
        stream = stream.subspan(n);
        parse(l);
    }
    return 0;
}
