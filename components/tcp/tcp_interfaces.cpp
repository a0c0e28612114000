#include "tcp_interfaces.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

namespace transit::tcp {

// --- IpAddress ------------------------------------------------------------------

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
    const std::string s(text);
    IpAddress a;
    if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
        a.family = AF_INET;
        return a;
    }
    if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
        a.family = AF_INET6;
        return a;
    }
    return std::nullopt;
}

IpAddress IpAddress::from_sockaddr(const sockaddr* sa) {
    IpAddress a;
    a.family = sa->sa_family;
    if (sa->sa_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
        std::memcpy(a.bytes.data(), &in->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
        std::memcpy(a.bytes.data(), &in6->sin6_addr, 16);
    }
    return a;
}

socklen_t IpAddress::to_sockaddr(std::uint16_t port, sockaddr_storage& out) const {
    std::memset(&out, 0, sizeof out);
    if (family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&out);
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        std::memcpy(&in->sin_addr, bytes.data(), 4);
        return sizeof(sockaddr_in);
    }
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, bytes.data(), 16);
    return sizeof(sockaddr_in6);
}

std::string IpAddress::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (family != AF_INET && family != AF_INET6) return "(none)";
    inet_ntop(family, bytes.data(), buf, sizeof buf);
    return buf;
}

bool IpAddress::is_loopback() const noexcept {
    if (family == AF_INET) return bytes[0] == 127;
    static constexpr std::array<std::uint8_t, 16> v6_loopback{0, 0, 0, 0, 0, 0, 0, 0,
                                                              0, 0, 0, 0, 0, 0, 0, 1};
    return family == AF_INET6 && bytes == v6_loopback;
}

bool IpAddress::is_link_local() const noexcept {
    if (family == AF_INET) return bytes[0] == 169 && bytes[1] == 254;
    return family == AF_INET6 && bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;
}

// --- Cidr -----------------------------------------------------------------------

bool Cidr::contains(const IpAddress& a) const noexcept {
    if (a.family != network.family) return false;
    unsigned bits = prefix;
    for (std::size_t i = 0; i < a.length() && bits > 0; ++i) {
        const unsigned take = bits < 8 ? bits : 8;
        const auto mask = static_cast<std::uint8_t>(0xff << (8 - take));
        if ((a.bytes[i] & mask) != (network.bytes[i] & mask)) return false;
        bits -= take;
    }
    return true;
}

std::string Cidr::to_string() const {
    return network.to_string() + "/" + std::to_string(prefix);
}

std::optional<Cidr> parse_cidr(std::string_view text) {
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    auto addr = IpAddress::parse(text.substr(0, slash));
    if (!addr) return std::nullopt;
    const std::string_view bits = text.substr(slash + 1);
    if (bits.empty() || bits.size() > 3) return std::nullopt;
    unsigned prefix = 0;
    for (char c : bits) {
        if (c < '0' || c > '9') return std::nullopt;
        prefix = prefix * 10 + static_cast<unsigned>(c - '0');
    }
    if (prefix > addr->length() * 8) return std::nullopt;
    return Cidr{*addr, prefix};
}

// --- discovery ------------------------------------------------------------------

namespace {

unsigned prefix_of(const sockaddr* mask) {
    if (mask == nullptr) return 0;
    const IpAddress m = IpAddress::from_sockaddr(mask);
    unsigned n = 0;
    for (std::size_t i = 0; i < m.length(); ++i) n += std::popcount(m.bytes[i]);
    return n;
}

struct IfaddrsDeleter {
    void operator()(ifaddrs* p) const noexcept { freeifaddrs(p); }
};

}  // namespace

std::vector<Interface> discover_interfaces() {
    ifaddrs* raw = nullptr;
    if (getifaddrs(&raw) != 0) return {};
    std::unique_ptr<ifaddrs, IfaddrsDeleter> list(raw);
    std::vector<Interface> out;
    for (ifaddrs* p = raw; p != nullptr; p = p->ifa_next) {
        if (p->ifa_addr == nullptr) continue;
        const int family = p->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        if ((p->ifa_flags & IFF_UP) == 0 || (p->ifa_flags & IFF_RUNNING) == 0) continue;
        const IpAddress addr = IpAddress::from_sockaddr(p->ifa_addr);
        if (family == AF_INET6 && addr.is_link_local()) continue;
        auto it = std::find_if(out.begin(), out.end(),
                               [&](const Interface& i) { return i.name == p->ifa_name; });
        if (it == out.end()) {
            Interface i;
            i.name = p->ifa_name;
            i.index = if_nametoindex(p->ifa_name);
            i.loopback = (p->ifa_flags & IFF_LOOPBACK) != 0;
            out.push_back(std::move(i));
            it = out.end() - 1;
        }
        it->addresses.push_back({addr, prefix_of(p->ifa_netmask)});
    }
    // IPv4 first inside each interface: it is what most clusters route.
    for (Interface& i : out)
        std::stable_sort(i.addresses.begin(), i.addresses.end(),
                         [](const InterfaceAddress& a, const InterfaceAddress& b) {
                             return a.address.family == AF_INET && b.address.family != AF_INET;
                         });
    return out;
}

std::vector<SkippedInterface> unusable_interfaces() {
    ifaddrs* raw = nullptr;
    if (getifaddrs(&raw) != 0) return {};
    std::unique_ptr<ifaddrs, IfaddrsDeleter> list(raw);
    struct Seen {
        std::string name;
        unsigned flags = 0;
        bool usable_address = false;
        bool link_local = false;
    };
    std::vector<Seen> seen;  // in the kernel's order
    for (ifaddrs* p = raw; p != nullptr; p = p->ifa_next) {
        auto it = std::find_if(seen.begin(), seen.end(),
                               [&](const Seen& s) { return s.name == p->ifa_name; });
        if (it == seen.end()) it = seen.insert(seen.end(), Seen{p->ifa_name, p->ifa_flags});
        if (p->ifa_addr == nullptr) continue;
        const int family = p->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) continue;
        if (family == AF_INET6 && IpAddress::from_sockaddr(p->ifa_addr).is_link_local())
            it->link_local = true;
        else
            it->usable_address = true;
    }
    std::vector<SkippedInterface> out;
    for (const Seen& s : seen) {
        if ((s.flags & IFF_UP) == 0)
            out.push_back({s.name, "down"});
        else if ((s.flags & IFF_RUNNING) == 0)
            out.push_back({s.name, "up but not running (no carrier)"});
        else if (!s.usable_address)
            out.push_back({s.name, s.link_local ? "only a link-local IPv6 address (tcp does not "
                                                  "use scoped addresses)"
                                                : "no IP address"});
    }
    return out;
}

// --- include / exclude ------------------------------------------------------------

namespace {

struct FilterEntry {
    std::string text;
    std::optional<Cidr> cidr;  // else an interface name
    bool matched = false;
    bool matches_name(const Interface& i) const { return !cidr && i.name == text; }
    bool matches_address(const InterfaceAddress& a) const {
        return cidr && cidr->contains(a.address);
    }
};

std::vector<FilterEntry> parse_entries(const std::vector<std::string>& list, const char* param) {
    std::vector<FilterEntry> out;
    for (const std::string& raw : list) {
        if (raw.empty()) continue;
        FilterEntry e{raw, std::nullopt, false};
        if (raw.find('/') != std::string::npos) {
            e.cidr = parse_cidr(raw);
            if (!e.cidr)
                throw InterfaceError(std::string(param) + ": '" + raw +
                                     "' is not a valid CIDR block (expected e.g. 10.0.0.0/8 "
                                     "or fd00::/64)");
        }
        out.push_back(std::move(e));
    }
    return out;
}

std::string describe_all(const std::vector<Interface>& all) {
    std::string s;
    for (const Interface& i : all) {
        if (!s.empty()) s += ", ";
        s += i.name;
        for (const InterfaceAddress& a : i.addresses)
            s += " " + a.address.to_string() + "/" + std::to_string(a.prefix);
    }
    return s.empty() ? "(none up)" : s;
}

void note(std::vector<std::string>* notes, std::string line) {
    if (notes) notes->push_back(std::move(line));
}

// Keeps, of one interface, what the list selects (include) or leaves (exclude).
Interface apply(const Interface& i, std::vector<FilterEntry>& entries, bool include) {
    Interface kept = i;
    kept.addresses.clear();
    bool by_name = false;
    for (FilterEntry& e : entries)
        if (e.matches_name(i)) e.matched = by_name = true;
    for (const InterfaceAddress& a : i.addresses) {
        bool hit = false;
        for (FilterEntry& e : entries)
            if (e.matches_address(a)) e.matched = hit = true;
        if (include ? (by_name || hit) : (!by_name && !hit)) kept.addresses.push_back(a);
    }
    return kept;
}

}  // namespace

std::vector<Interface> filter_interfaces(const std::vector<Interface>& all,
                                         const std::vector<std::string>& include,
                                         const std::vector<std::string>& exclude,
                                         std::vector<std::string>* notes) {
    auto inc = parse_entries(include, "btl_tcp_if_include");
    auto exc = parse_entries(exclude, "btl_tcp_if_exclude");
    if (!inc.empty() && !exc.empty())
        throw InterfaceError(
            "btl_tcp_if_include and btl_tcp_if_exclude are both set; use only one of them");
    const bool including = !inc.empty();
    auto& entries = including ? inc : exc;
    std::vector<Interface> out;
    for (const Interface& i : all) {
        Interface kept = entries.empty() ? i : apply(i, entries, including);
        if (kept.addresses.empty()) {
            note(notes, "interface " + i.name + " not used: " +
                            (including ? "not in btl_tcp_if_include" : "btl_tcp_if_exclude"));
            continue;
        }
        out.push_back(std::move(kept));
    }
    if (!entries.empty() && std::none_of(entries.begin(), entries.end(),
                                         [](const FilterEntry& e) { return e.matched; }))
        throw InterfaceError(
            std::string(including ? "btl_tcp_if_include" : "btl_tcp_if_exclude") +
            " matches no interface; the interfaces here are: " + describe_all(all));
    for (const FilterEntry& e : entries)
        if (!e.matched) note(notes, "'" + e.text + "' matches no interface");
    return out;
}

// --- modex blob -----------------------------------------------------------------

namespace {
constexpr std::uint32_t blob_version = 1;
constexpr std::size_t entry_size =
    24;  // family, prefix, loopback, pad, port u16, pad u16, addr[16]
constexpr std::size_t max_entries = 256;
}  // namespace

std::vector<std::byte> encode_addresses(std::span<const PeerAddress> addresses) {
    std::vector<std::byte> out(8 + entry_size * addresses.size());
    const auto count = static_cast<std::uint32_t>(addresses.size());
    std::memcpy(out.data(), &blob_version, 4);
    std::memcpy(out.data() + 4, &count, 4);
    std::byte* p = out.data() + 8;
    for (const PeerAddress& a : addresses) {
        p[0] = static_cast<std::byte>(a.address.family == AF_INET ? 4 : 6);
        p[1] = static_cast<std::byte>(a.prefix);
        p[2] = static_cast<std::byte>(a.loopback ? 1 : 0);
        std::memcpy(p + 4, &a.port, 2);
        std::memcpy(p + 8, a.address.bytes.data(), 16);
        p += entry_size;
    }
    return out;
}

std::vector<PeerAddress> decode_addresses(std::span<const std::byte> blob) {
    std::uint32_t version = 0;
    std::uint32_t count = 0;
    if (blob.size() < 8) throw InterfaceError("tcp address blob too short");
    std::memcpy(&version, blob.data(), 4);
    std::memcpy(&count, blob.data() + 4, 4);
    if (version != blob_version)
        throw InterfaceError("tcp address blob version " + std::to_string(version) + ", expected " +
                             std::to_string(blob_version));
    if (count > max_entries || blob.size() != 8 + entry_size * count)
        throw InterfaceError("tcp address blob has an impossible size");
    std::vector<PeerAddress> out;
    const std::byte* p = blob.data() + 8;
    for (std::uint32_t k = 0; k < count; ++k, p += entry_size) {
        PeerAddress a;
        const auto fam = static_cast<int>(p[0]);
        if (fam != 4 && fam != 6) throw InterfaceError("tcp address blob: bad family");
        a.address.family = fam == 4 ? AF_INET : AF_INET6;
        a.prefix = static_cast<unsigned>(p[1]);
        if (a.prefix > a.address.length() * 8) throw InterfaceError("tcp address blob: bad prefix");
        a.loopback = p[2] != std::byte{0};
        std::memcpy(&a.port, p + 4, 2);
        std::memcpy(a.address.bytes.data(), p + 8, 16);
        out.push_back(a);
    }
    return out;
}

// --- pair choice ------------------------------------------------------------------

std::optional<IpAddress> kernel_source_for(const IpAddress& remote) {
    const int fd = ::socket(remote.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    sockaddr_storage ss;
    const socklen_t len = remote.to_sockaddr(9, ss);  // any port: UDP connect sends nothing
    std::optional<IpAddress> out;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) {
        sockaddr_storage local{};
        socklen_t llen = sizeof local;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) == 0)
            out = IpAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&local));
    }
    ::close(fd);
    return out;
}

namespace {

// Scores one candidate; 0 with a reason when it cannot be used.
int score_pair(const Interface& local, const InterfaceAddress& la, const PeerAddress& ra,
               const PairContext& ctx, std::string& reason) {
    if (la.address.family != ra.address.family) {
        reason = "different address families";
        return 0;
    }
    if (ctx.same_node) {
        if (local.loopback && ra.loopback) {
            reason = "loopback, peer on the same node";
            return 40;
        }
        if (ctx.loopback_available) {
            reason = "peer on the same node: left to the loopback interface";
            return 0;
        }
    } else {
        if (local.loopback || ra.loopback) {
            reason = "loopback cannot reach another node";
            return 0;
        }
        if (std::find(ctx.own_addresses.begin(), ctx.own_addresses.end(), ra.address) !=
            ctx.own_addresses.end()) {
            reason = "peer on another node shows one of our own addresses (a private bridge?)";
            return 0;
        }
    }
    const Cidr ours{la.address, la.prefix};
    const Cidr theirs{ra.address, ra.prefix};
    const int family_bonus = la.address.family == AF_INET ? 1 : 0;
    if (ours.contains(ra.address) && theirs.contains(la.address)) {
        reason = "same subnet " + Cidr{la.address, la.prefix}.to_string();
        return 30 + family_bonus;
    }
    const auto src = kernel_source_for(ra.address);
    if (src && *src == la.address) {
        reason = "different subnets, the kernel routes to it from " + la.address.to_string();
        return 20 + family_bonus;
    }
    reason =
        src ? "the kernel reaches it from " + src->to_string() + ", not this address" : "no route";
    return 0;
}

}  // namespace

std::vector<AddressPair> rank_pairs(const Interface& local, std::span<const PeerAddress> remote,
                                    const PairContext& ctx, std::vector<std::string>* notes) {
    std::vector<AddressPair> out;
    for (const InterfaceAddress& la : local.addresses) {
        for (std::size_t k = 0; k < remote.size(); ++k) {
            const PeerAddress& ra = remote[k];
            std::string reason;
            const int score = score_pair(local, la, ra, ctx, reason);
            if (score == 0) {
                note(notes, la.address.to_string() + " -> " + ra.address.to_string() +
                                ": rejected, " + reason);
                continue;
            }
            out.push_back(
                AddressPair{la, ra, score, std::move(reason), static_cast<std::uint32_t>(k), 0});
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const AddressPair& a, const AddressPair& b) { return a.score > b.score; });
    return out;
}

std::optional<AddressPair> choose_pair(const Interface& local, std::span<const PeerAddress> remote,
                                       const PairContext& ctx, std::vector<std::string>* notes) {
    auto all = rank_pairs(local, remote, ctx, notes);
    if (all.empty()) return std::nullopt;
    return std::move(all.front());
}

}  // namespace transit::tcp
