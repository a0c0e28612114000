// What an ofi module reads from other processes, and how it reads it: the
// header in front of every active message, the packed registration handle a
// peer hands out (it comes back through the application as a remote handle),
// the peer's address from the modex (handed to fi_av_insert) and its process
// id.  Put, get and atomics are libfabric's own operations: the provider, not
// this module, decodes them at the target.
//
// Everything here reads only inside the span it is given and needs no
// libfabric; the fuzz target tests/fuzz/fuzz_ofi_wire.cpp runs it on arbitrary
// bytes.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "transit/btl/region_table.hpp"
#include "transit/btl/types.hpp"
#include "transit/status.hpp"

namespace transit::ofi {

// --- active messages ---------------------------------------------------------------

enum class WireKind : std::uint8_t {
    message = 0,  // for the tag's callback
    goodbye = 1,  // no payload: the sender is leaving; its exit is no failure
    hello = 2,    // no payload: the sender added us again; its goodbye is taken back
    join = 3,     // a client outside the job: JoinPayload, then its address
    welcome = 4,  // no payload: the server admitted the client
    refuse = 5,   // no payload: the server refused the client's join (tag: why)
};
// WireHeader::tag of a refuse: the client's token was wrong (0: another reason).
inline constexpr std::uint8_t refused_token = 1;
// WireHeader::flags
inline constexpr std::uint8_t from_dynamic = 0x1;  // source is a channel, not a job rank

struct WireHeader {
    std::uint8_t tag;
    std::uint8_t version;
    WireKind kind;
    std::uint8_t flags;
    // The sender's rank, to find its endpoint; with from_dynamic, the channel
    // the receiver knows a peer outside the job by (random, chosen by the side
    // that receives on it).
    Rank source;
};
static_assert(sizeof(WireHeader) == 8);
// 2: the kind (goodbye).  3: hello.  Both travel in order with the messages
// (FI_ORDER_SAS), so a hello is never taken before the goodbye it takes back.
// 4: join, welcome, refuse and channels for peers outside the job.
inline constexpr std::uint8_t wire_version = 4;

// What a received message is.
enum class Received : std::uint8_t {
    message,  // for the tag's callback: the body follows the header
    goodbye,
    hello,
    join,
    welcome,
    refuse,
    too_short,      // shorter than a header
    other_version,  // another wire version
    unknown_kind,
};

// Reads the header of the `length` bytes the provider says it received into
// `buffer` (never past the buffer, whatever the length says).
inline Received read_message(std::span<const std::byte> buffer, std::size_t length, WireHeader& h,
                             std::span<const std::byte>& body) noexcept {
    const std::span<const std::byte> message = buffer.first(std::min(length, buffer.size()));
    if (message.size() < sizeof h) [[unlikely]]
        return Received::too_short;
    std::memcpy(&h, message.data(), sizeof h);
    body = message.subspan(sizeof h);
    if (h.kind == WireKind::message && h.version == wire_version) [[likely]]
        return Received::message;
    if (h.version != wire_version) return Received::other_version;
    switch (h.kind) {
        case WireKind::goodbye:
            return Received::goodbye;
        case WireKind::hello:
            return Received::hello;
        case WireKind::join:
            return Received::join;
        case WireKind::welcome:
            return Received::welcome;
        case WireKind::refuse:
            return Received::refuse;
        case WireKind::message:
            break;
    }
    return Received::unknown_kind;
}

// --- peers outside the job -------------------------------------------------------------

// A client's first message to a server it reached by address: the listening
// context's token, the channels each side is to name the other by, what lets
// a server on its node watch its process, and its own libfabric address (the
// `address_size` bytes after this struct) for the server's replies.
struct JoinPayload {
    std::array<std::byte, 16> token;  // rt::Secret
    std::uint32_t to_server;          // the source of the client's messages to the server
    std::uint32_t to_client;          // the source of the server's messages to the client
    std::uint32_t pid;                // the client's process
    std::uint32_t rank;               // its rank in its own job (for logs)
    std::uint64_t node;               // name_hash of its node id
    std::uint64_t pid_ns;             // inode of its pid namespace (0: unknown)
    std::uint32_t address_size;
    std::uint32_t reserved;
};
static_assert(sizeof(JoinPayload) == 56);

// Reads a join's body: false unless it holds a payload and an address of
// 1..max_address_size bytes (`address` then views it, inside `body`).
inline bool read_join(std::span<const std::byte> body, JoinPayload& p,
                      std::span<const std::byte>& address) noexcept;

// --- registration handles ------------------------------------------------------------

// The packed (remote) form of a registration: what a peer copies and passes
// back as the remote handle.
struct PackedHandle {
    std::uint64_t key;      // the memory region's key
    std::uint64_t mr_base;  // start of the registered region (offset addressing)
    std::uint64_t base;     // the bounds the owner registered
    std::uint64_t len;
    std::uint32_t access;  // btl::reg_flags
    std::uint32_t magic;
    // Which provider's domain the key belongs to (name_hash of its name): each
    // provider's module registers a region on its own, and a key is only valid
    // in the domain that issued it.
    std::uint64_t provider;
};
static_assert(sizeof(PackedHandle) <= btl::max_registration_handle_size);
inline constexpr std::uint32_t handle_magic = 0x4f464931;  // "OFI1"

// Reads a handle that may have been copied to an unaligned place.
inline bool unpack(const btl::RegistrationHandle* h, PackedHandle& out) noexcept {
    if (h == nullptr) return false;
    std::memcpy(&out, static_cast<const void*>(h), sizeof out);
    return out.magic == handle_magic;
}

// Whether a peer's handle lets this module's provider (`provider`) reach
// [address, address + size) with `access`: success, bad_param (not an ofi
// handle, or outside its bounds), not_available (another provider's key) or
// access_denied.
inline Status remote_refusal(const btl::RegistrationHandle* handle, std::uint64_t provider,
                             std::uint64_t address, std::uint64_t size, std::uint32_t access,
                             PackedHandle& packed) noexcept {
    if (!unpack(handle, packed)) [[unlikely]]
        return Status::bad_param;
    if (packed.provider != provider) [[unlikely]]
        return Status::not_available;
    return btl::range_permits(packed.base, packed.len, packed.access, address, size, access);
}

// --- the modex ---------------------------------------------------------------------

// How the provider's addresses end (from fi_info's addr_format): at a length
// its format fixes (sockaddr_in, a NIC's own format), at a NUL (FI_ADDR_STR),
// or either way (FI_SOCKADDR: the family says).
enum class AddressForm : std::uint8_t { fixed, string, variable };

// Longer than any provider's address: a blob beyond it is refused.
inline constexpr std::size_t max_address_size = 4096;

// The bytes to hand fi_av_insert for a peer's address `blob`, when the
// provider's own addresses are `own_size` bytes long: the blob followed by
// zeros up to at least `own_size` and one byte more (the provider reads as
// many bytes as its own addresses have, or up to a NUL), so it never reads
// past them.  False, and `out` left empty, when the blob cannot be one of this
// provider's addresses: empty, longer than max_address_size, or (fixed) not
// exactly `own_size` bytes.
inline bool av_address(std::span<const std::byte> blob, std::size_t own_size, AddressForm form,
                       std::vector<std::byte>& out) {
    out.clear();
    if (blob.empty() || blob.size() > max_address_size) return false;
    if (form == AddressForm::fixed && blob.size() != own_size) return false;
    out.assign(std::max(blob.size() + 1, own_size), std::byte{0});
    std::copy(blob.begin(), blob.end(), out.begin());
    return true;
}

inline bool read_join(std::span<const std::byte> body, JoinPayload& p,
                      std::span<const std::byte>& address) noexcept {
    if (body.size() < sizeof p) return false;
    std::memcpy(&p, body.data(), sizeof p);
    const std::span<const std::byte> rest = body.subspan(sizeof p);
    if (p.address_size == 0 || p.address_size > max_address_size || p.address_size > rest.size())
        return false;
    address = rest.first(p.address_size);
    return true;
}

// A peer's process id (what it publishes under OfiModule::pid_key); false
// when the blob is not one.
inline bool read_pid(std::span<const std::byte> blob, std::uint32_t& pid) noexcept {
    if (blob.size() != sizeof pid) return false;
    std::memcpy(&pid, blob.data(), sizeof pid);
    return pid != 0 && pid <= 0x7fffffffu;  // a pid_t above 0
}

}  // namespace transit::ofi
