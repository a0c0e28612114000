// Which network interfaces tcp uses, and which address pair it picks to reach a
// peer.  The wrong interface on a multi-homed host is the classic TCP transport
// failure, so the choice is made by reachability and every decision carries a
// human-readable reason for btl_base_verbose.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <sys/socket.h>

namespace transit::tcp {

struct IpAddress {
    int family = 0;  // AF_INET or AF_INET6
    std::array<std::uint8_t, 16> bytes{};

    static std::optional<IpAddress> parse(std::string_view text);
    static IpAddress from_sockaddr(const sockaddr* sa);
    // A sockaddr for connect/bind, with `port` in host order.
    socklen_t to_sockaddr(std::uint16_t port, sockaddr_storage& out) const;
    std::string to_string() const;
    std::size_t length() const noexcept { return family == AF_INET ? 4 : 16; }
    bool is_loopback() const noexcept;
    bool is_link_local() const noexcept;
    bool operator==(const IpAddress&) const = default;
};

// An address block, "10.0.0.0/8" or "fd00::/64".
struct Cidr {
    IpAddress network;
    unsigned prefix = 0;
    bool contains(const IpAddress& a) const noexcept;
    std::string to_string() const;
};
std::optional<Cidr> parse_cidr(std::string_view text);

struct InterfaceAddress {
    IpAddress address;
    unsigned prefix = 0;
};

struct Interface {
    std::string name;
    unsigned index = 0;
    bool loopback = false;
    std::vector<InterfaceAddress> addresses;
};

// Up interfaces with their IPv4 and global IPv6 addresses (link-local IPv6
// needs a scope and is skipped), in the kernel's order.
std::vector<Interface> discover_interfaces();

// The interfaces discover_interfaces() leaves out, each with the reason (down,
// not running, no address tcp can use), for transit_info --devices.
struct SkippedInterface {
    std::string name;
    std::string reason;
};
std::vector<SkippedInterface> unusable_interfaces();

class InterfaceError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// Applies btl_tcp_if_include / btl_tcp_if_exclude.  Entries are interface names
// or CIDR blocks; a CIDR entry selects (or drops) single addresses.  Throws
// InterfaceError when both lists are set, an entry is neither a name nor a
// valid block, or a list matches nothing (naming the interfaces that exist).
// `notes` receives one line per decision, for verbose output.
std::vector<Interface> filter_interfaces(const std::vector<Interface>& all,
                                         const std::vector<std::string>& include,
                                         const std::vector<std::string>& exclude,
                                         std::vector<std::string>* notes = nullptr);

// --- addresses published through the modex -----------------------------------

struct PeerAddress {
    IpAddress address;
    unsigned prefix = 0;
    bool loopback = false;
    std::uint16_t port = 0;
};

// Serialised form: u32 version, u32 count, then 24 bytes per address.
std::vector<std::byte> encode_addresses(std::span<const PeerAddress> addresses);
// Throws InterfaceError for a blob that is not well formed.
std::vector<PeerAddress> decode_addresses(std::span<const std::byte> blob);

// --- choosing the pair -------------------------------------------------------

struct AddressPair {
    InterfaceAddress local;
    PeerAddress remote;
    int score = 0;  // higher is better
    std::string reason;
    std::uint32_t remote_index = 0;  // of `remote` in the peer's published addresses
    // The handshake's target (wire::Handshake::target): 0 when `remote` is the
    // address this path is for, else the index + 1 of that address.
    std::uint32_t target = 0;
};

// Which local address the kernel would use to reach `remote`, if it has a route.
std::optional<IpAddress> kernel_source_for(const IpAddress& remote);

struct PairContext {
    bool same_node = false;
    // This process has a loopback module, and the peer published a loopback
    // address: same-node traffic goes there, other interfaces leave the peer alone.
    bool loopback_available = false;
    // Every address of this process, on any interface (a remote peer showing
    // one of them is showing a private bridge such as docker0, not itself).
    std::span<const IpAddress> own_addresses;
};

// Every usable pair between `local` and the peer's addresses, best first (the
// kernel's order among equals); the reason for every rejected candidate goes
// to `notes`.
std::vector<AddressPair> rank_pairs(const Interface& local, std::span<const PeerAddress> remote,
                                    const PairContext& ctx,
                                    std::vector<std::string>* notes = nullptr);

// The best pair between `local` and the peer's addresses, or nullopt; the
// reason for every rejected candidate goes to `notes`.
std::optional<AddressPair> choose_pair(const Interface& local, std::span<const PeerAddress> remote,
                                       const PairContext& ctx,
                                       std::vector<std::string>* notes = nullptr);

}  // namespace transit::tcp
