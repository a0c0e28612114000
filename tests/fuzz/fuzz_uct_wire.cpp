// libFuzzer target for the uct registration handles a peer packs: the remote
// keys a handle carries (handle_rkey, what the initiator reads from a peer's
// key), and append_rkey over whatever a handle holds.  Header-only; see
// uct_wire.cmake.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "components/uct/uct_wire.hpp"

namespace uct = transit::uct;
namespace btl = transit::btl;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 6) return 0;
    // The first bytes pick the memory domain and key length looked for.
    const std::uint32_t md = data[0] & 1 ? uct::md_tag("cma") : uct::md_tag("posix");
    const std::size_t rkey_len = data[1];
    // A handle is always max_registration_handle_size bytes where it is read.
    std::array<std::byte, btl::max_registration_handle_size> handle{};
    std::memcpy(handle.data(), data + 2, std::min(size - 2, handle.size()));

    if (const std::byte* key = uct::handle_rkey(handle.data(), md, rkey_len)) {
        if (key < handle.data() + uct::native_handle_header ||
            key + rkey_len > handle.data() + handle.size())
            __builtin_trap();
    }

    // Appending a key keeps every earlier key findable, or leaves the handle as it was.
    const auto before = handle;
    const std::byte extra[16] = {std::byte{0x5a}};
    const std::uint32_t other = uct::md_tag("sysv");
    if (uct::append_rkey(handle, other, extra)) {
        const std::byte* key = uct::handle_rkey(handle.data(), other, sizeof extra);
        if (key == nullptr || std::memcmp(key, extra, sizeof extra) != 0) __builtin_trap();
    } else if (handle != before) {
        __builtin_trap();
    }

    // What pack_handle writes, handle_rkey finds.
    std::array<std::byte, btl::max_registration_handle_size> packed{};
    const std::span<const std::byte> rkey(reinterpret_cast<const std::byte*>(data),
                                          std::min(size, rkey_len));
    const uct::PackedHandle h{1, 0, 0x1000, 4096, 0, 0};
    if (uct::pack_handle(packed, h, md, rkey, true) != 0) {
        const std::byte* key = uct::handle_rkey(packed.data(), md, rkey.size());
        if (key == nullptr || (!rkey.empty() && std::memcmp(key, rkey.data(), rkey.size()) != 0))
            __builtin_trap();
    } else if (rkey.size() <= uct::max_rkey_len) {
        __builtin_trap();
    }
    return 0;
}
