// libFuzzer target for everything tcp parses from the network or the modex:
// the frame scanner and request/reply bodies (as a stream, the way a link's
// receive buffer is parsed), the handshake, and the published address blob.
// Built with clang++ -fsanitize=fuzzer; see tcp_wire.cmake.
#include <cstddef>
#include <cstdint>
#include <span>

#include "components/tcp/tcp_interfaces.hpp"
#include "components/tcp/tcp_wire.hpp"

namespace wire = transit::tcp::wire;

namespace {

void scan_stream(std::span<const std::byte> in) {
    const wire::Limits limits{.max_am = 4096, .max_rdma = 65536};
    while (!in.empty()) {
        wire::FrameHeader h;
        if (wire::scan_header(in, limits, h) != wire::ScanResult::ok) return;
        // A valid header promises at most the limits: never more than this.
        if (h.length > limits.max_rdma + wire::atomic_request_size) __builtin_trap();
        const std::size_t body = wire::body_size(h.type);
        if (body > h.length) __builtin_trap();
        in = in.subspan(wire::header_size);
        if (in.size() < body) return;
        switch (h.type) {
            case wire::FrameType::put:
            case wire::FrameType::get:
                (void)wire::decode_rdma_request(in.data());
                break;
            case wire::FrameType::atomic:
                (void)wire::decode_atomic_request(in.data());
                break;
            case wire::FrameType::reply:
                (void)wire::decode_reply(in.data());
                break;
            default:
                break;
        }
        if (in.size() < h.length) return;
        in = in.subspan(h.length);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    scan_stream(in);

    wire::Handshake h;
    if (wire::decode(in, h).empty()) {
        if (h.job_id.size() > wire::max_job_id) __builtin_trap();
        (void)wire::verify(h, "job", h.secret);
        // What decodes must encode back to the same bytes.
        const auto again = wire::encode(h);
        wire::Handshake h2;
        if (!wire::decode(again, h2).empty() || h2.rank != h.rank || h2.job_id != h.job_id)
            __builtin_trap();
    }

    try {
        const auto addrs = transit::tcp::decode_addresses(in);
        if (addrs.size() > 256) __builtin_trap();
        (void)transit::tcp::encode_addresses(addrs);
    } catch (const transit::tcp::InterfaceError&) {
    }
    return 0;
}
