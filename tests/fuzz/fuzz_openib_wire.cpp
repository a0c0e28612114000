// libFuzzer target for everything openib decodes from a peer: fragment
// headers and atomic bodies (from the RC queue pairs), connection messages
// (from the UD queue pair), the modex blob and packed registration handles.
// Built with clang++ -fsanitize=fuzzer; see openib_wire.cmake.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "components/openib/openib_wire.hpp"

namespace wire = transit::openib::wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    if (auto h = wire::decode_frag(in)) {
        const auto body = in.subspan(wire::FragHeader::size);
        if (h->type == wire::FragType::credit && !body.empty()) __builtin_trap();
        if (h->type == wire::FragType::atomic_request) (void)wire::decode_atomic_request(body);
        if (h->type == wire::FragType::atomic_reply) (void)wire::decode_atomic_reply(body);
    }
    if (auto m = wire::decode_cm(in)) {
        if (m->src.qpn == 0 || m->src.qpn > 0xffffff || m->src.mtu < 1 || m->src.mtu > 5)
            __builtin_trap();
        // A decoded message encodes back to the same bytes.
        std::byte again[wire::CmMessage::size];
        wire::encode(*m, again);
        for (std::size_t i = 0; i < wire::CmMessage::size; ++i)
            if (again[i] != in[i]) __builtin_trap();
    }
    std::vector<wire::PortAddress> ports;
    if (wire::decode_modex(in, ports) && ports.size() > wire::max_ports_in_modex) __builtin_trap();
    if (size >= wire::RemoteKey::size) {
        if (auto k = wire::decode_remote_key(in.data())) {
            if (k->length == 0 || k->address + k->length < k->address) __builtin_trap();
            (void)k->allows(k->address, k->length, k->access);
        }
    }
    return 0;
}
