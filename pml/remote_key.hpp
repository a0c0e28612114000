// A peer's registered region as this process holds it, and the packed form
// the peer sends it in (read by unpack_key, so it comes from another process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "transit/btl/types.hpp"
#include "transit/status.hpp"

namespace transit::pml {

inline constexpr std::uint32_t key_magic = 0x4b455931;  // "KEY1"
inline constexpr std::uint32_t max_key_entries = 64;

// A peer's region.
struct RemoteKeyImpl {
    std::uint64_t base = 0;
    std::uint64_t size = 0;
    struct Entry {
        std::uint32_t component;
        std::vector<std::byte> handle;
    };
    std::vector<Entry> entries;
    // The handle for `component`, if the key has one of exactly the size that
    // component's modules read (a shorter one would be read past its end).
    const btl::RegistrationHandle* handle_for(std::uint32_t component,
                                              std::size_t size) const noexcept {
        for (const Entry& e : entries)
            if (e.component == component && e.handle.size() == size)
                return reinterpret_cast<const btl::RegistrationHandle*>(e.handle.data());
        return nullptr;
    }
};

// Reads a packed key: magic, base, size, entry count, then per entry the
// component hash, the handle length and the handle.  bad_param for anything
// else (short, long, over the limits); `out` is then unspecified.
Status decode_key(std::span<const std::byte> in, RemoteKeyImpl& out);

}  // namespace transit::pml
