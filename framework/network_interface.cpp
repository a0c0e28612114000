#include "transit/btl/util/network_interface.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>

namespace transit::btl::util {
namespace {

// An IPv4 or IPv6 address as bytes (4 or 16 of them).
struct Bytes {
    int family = 0;
    std::array<std::uint8_t, 16> b{};
    bool operator==(const Bytes&) const = default;
};

std::optional<Bytes> from_sockaddr(const sockaddr* sa) {
    Bytes out;
    if (sa == nullptr) return std::nullopt;
    out.family = sa->sa_family;
    if (sa->sa_family == AF_INET)
        std::memcpy(out.b.data(), &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6)
        std::memcpy(out.b.data(), &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
    else
        return std::nullopt;
    return out;
}

struct Block {
    Bytes network;
    unsigned bits = 0;
    bool holds(const Bytes& a) const noexcept {
        if (a.family != network.family) return false;
        for (unsigned i = 0; i < bits; ++i) {
            const unsigned byte = i / 8, mask = 0x80u >> (i % 8);
            if ((a.b[byte] & mask) != (network.b[byte] & mask)) return false;
        }
        return true;
    }
};

// "10.1.0.0/16", "fd00::/64"; nothing for a plain name.
std::optional<Block> parse_block(const std::string& entry) {
    const auto slash = entry.find('/');
    if (slash == std::string::npos) return std::nullopt;
    Block block;
    const std::string host = entry.substr(0, slash);
    const std::string bits = entry.substr(slash + 1);
    const bool v6 = host.find(':') != std::string::npos;
    block.network.family = v6 ? AF_INET6 : AF_INET;
    const unsigned max_bits = v6 ? 128 : 32;
    bool valid =
        !bits.empty() && bits.size() <= 3 &&
        std::all_of(bits.begin(), bits.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        ::inet_pton(block.network.family, host.c_str(), block.network.b.data()) == 1;
    if (valid) {
        block.bits = static_cast<unsigned>(std::stoul(bits));
        valid = block.bits <= max_bits;
    }
    if (!valid)
        throw std::invalid_argument("'" + entry +
                                    "' is neither an interface name nor a CIDR block");
    return block;
}

// Each interface's addresses, by name.
std::map<std::string, std::vector<Bytes>> interface_addresses() {
    std::map<std::string, std::vector<Bytes>> out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next)
        if (auto a = from_sockaddr(i->ifa_addr)) out[i->ifa_name].push_back(*a);
    ::freeifaddrs(list);
    return out;
}

bool matches(const std::string& entry, const std::string& name, const std::vector<Bytes>& addrs) {
    const std::optional<Block> block = parse_block(entry);
    if (!block) return entry == name;
    return std::any_of(addrs.begin(), addrs.end(), [&](const Bytes& a) { return block->holds(a); });
}

bool selected(const std::string& name, const std::vector<Bytes>& addrs,
              const std::vector<std::string>& include, const std::vector<std::string>& exclude) {
    if (!include.empty() && !exclude.empty())
        throw std::invalid_argument("an interface include list and an exclude list are both set");
    auto listed = [&](const std::vector<std::string>& list) {
        return std::any_of(list.begin(), list.end(),
                           [&](const std::string& e) { return matches(e, name, addrs); });
    };
    return include.empty() ? !listed(exclude) : listed(include);
}

bool loopback(const Bytes& a) {
    if (a.family == AF_INET) return a.b[0] == 127;
    static constexpr std::array<std::uint8_t, 16> v6_loopback{0, 0, 0, 0, 0, 0, 0, 0,
                                                              0, 0, 0, 0, 0, 0, 0, 1};
    return a.b == v6_loopback;
}

// The addresses this node's hostname resolves to, loopback ones left out:
// Debian's /etc/hosts gives the hostname 127.0.1.1, which says nothing of
// where other nodes reach this one.
std::vector<Bytes> hostname_addresses(std::string& hostname) {
    std::vector<Bytes> out;
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) return out;
    hostname = buf.data();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(hostname.c_str(), nullptr, &hints, &res) != 0) return out;
    for (const addrinfo* r = res; r != nullptr; r = r->ai_next)
        if (auto a = from_sockaddr(r->ai_addr); a && !loopback(*a)) out.push_back(*a);
    ::freeaddrinfo(res);
    return out;
}

}  // namespace

bool interface_selected(const std::string& name, const std::vector<std::string>& include,
                        const std::vector<std::string>& exclude) {
    const auto all = interface_addresses();
    const auto it = all.find(name);
    return selected(name, it == all.end() ? std::vector<Bytes>{} : it->second, include, exclude);
}

std::optional<InterfaceChoice> choose_interface(std::span<const std::string> candidates,
                                                const std::vector<std::string>& include,
                                                const std::vector<std::string>& exclude,
                                                std::string& why) {
    const auto all = interface_addresses();
    static const std::vector<Bytes> none;
    auto addresses_of = [&](const std::string& name) -> const std::vector<Bytes>& {
        const auto it = all.find(name);
        return it == all.end() ? none : it->second;
    };
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < candidates.size(); ++i)
        if (selected(candidates[i], addresses_of(candidates[i]), include, exclude))
            kept.push_back(i);
    if (kept.empty()) {
        why = "no interface is left by the interface lists";
        return std::nullopt;
    }
    if (kept.size() == 1) return InterfaceChoice{kept.front(), "the only one selected"};
    std::string hostname;
    const std::vector<Bytes> own = hostname_addresses(hostname);
    for (std::size_t i : kept) {
        const std::vector<Bytes>& addrs = addresses_of(candidates[i]);
        if (std::any_of(addrs.begin(), addrs.end(), [&](const Bytes& a) {
                return std::find(own.begin(), own.end(), a) != own.end();
            }))
            return InterfaceChoice{i,
                                   "it holds the address of this node's name (" + hostname + ")"};
    }
    return InterfaceChoice{kept.front(),
                           "the library's first; none holds an address of this node's name (" +
                               (hostname.empty() ? std::string("unknown") : hostname) + ")"};
}

}  // namespace transit::btl::util
