// libFuzzer target for unpack_key's decoder: a packed remote key comes from
// another process (through the application, so in any shape).  See
// remote_key.cmake.
#include <cstddef>
#include <cstdint>
#include <span>

#include "pml/remote_key.hpp"

namespace pml = transit::pml;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data), size);
    pml::RemoteKeyImpl key;
    if (pml::decode_key(in, key) != transit::Status::success) return 0;
    // Accepted: within the limits, and every input byte accounted for.
    if (key.entries.size() > pml::max_key_entries) __builtin_trap();
    std::size_t used = 4 + 4 + 8 + 8 + 8 + 4;
    for (const auto& e : key.entries) {
        if (e.handle.size() > transit::btl::max_registration_handle_size) __builtin_trap();
        used += 4 + 4 + e.handle.size();
        for (std::size_t next = 0; key.handle_for(e.component, e.handle.size(), next) != nullptr;) {
        }
    }
    if (used != size) __builtin_trap();
    return 0;
}
