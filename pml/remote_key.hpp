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

inline constexpr std::uint32_t key_magic = 0x4b455932;  // "KEY2"
inline constexpr std::uint32_t max_key_entries = 64;

// A peer's region.
struct RemoteKeyImpl {
    // What names the region to its owner's pml (emulated operations): its
    // slot there and the registration's random secret.
    std::uint32_t region = 0;
    std::uint64_t secret = 0;
    std::uint64_t base = 0;
    std::uint64_t size = 0;
    struct Entry {
        std::uint32_t component;
        std::vector<std::byte> handle;
    };
    std::vector<Entry> entries;
    // The next handle for `component`, from entry `from` on (advanced past
    // it), of exactly the size that component's modules read (a shorter one
    // would be read past its end).  A component with several modules (ofi: one
    // per provider) has one handle for each: a module refuses another's with
    // not_available and the caller tries the next.
    const btl::RegistrationHandle* handle_for(std::uint32_t component, std::size_t size,
                                              std::size_t& from) const noexcept {
        while (from < entries.size()) {
            const Entry& e = entries[from++];
            if (e.component == component && e.handle.size() == size)
                return reinterpret_cast<const btl::RegistrationHandle*>(e.handle.data());
        }
        return nullptr;
    }
};

// Reads a packed key: magic, region slot, secret, base, size, entry count, then per entry the
// component hash, the handle length and the handle.  bad_param for anything
// else (short, long, over the limits); `out` is then unspecified.
Status decode_key(std::span<const std::byte> in, RemoteKeyImpl& out);

}  // namespace transit::pml
