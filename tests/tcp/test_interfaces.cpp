// Interface selection and address pair choice for tcp.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "components/tcp/tcp_interfaces.hpp"

using namespace transit::tcp;

namespace {

IpAddress ip(const char* text) {
    auto a = IpAddress::parse(text);
    EXPECT_TRUE(a.has_value()) << text;
    return a.value_or(IpAddress{});
}

Interface iface(const char* name, std::initializer_list<std::pair<const char*, unsigned>> addrs,
                bool loopback = false) {
    Interface i;
    i.name = name;
    i.loopback = loopback;
    for (auto [a, p] : addrs) i.addresses.push_back({ip(a), p});
    return i;
}

// A multi-homed host: loopback, a cluster NIC with two addresses, a docker bridge.
std::vector<Interface> host() {
    return {iface("lo", {{"127.0.0.1", 8}, {"::1", 128}}, true),
            iface("eth0", {{"10.1.2.3", 16}, {"192.168.7.3", 24}, {"fd00::3", 64}}),
            iface("docker0", {{"172.17.0.1", 16}})};
}

std::vector<std::string> names(const std::vector<Interface>& v) {
    std::vector<std::string> out;
    for (const auto& i : v) out.push_back(i.name);
    return out;
}

PeerAddress peer(const char* a, unsigned prefix, bool loopback = false) {
    return {ip(a), prefix, loopback, 4000};
}

}  // namespace

TEST(TcpInterfaces, ParsesAddressesAndCidrs) {
    EXPECT_EQ(ip("10.0.0.1").family, AF_INET);
    EXPECT_EQ(ip("fd00::1").family, AF_INET6);
    EXPECT_FALSE(IpAddress::parse("eth0"));
    EXPECT_FALSE(IpAddress::parse("10.0.0.256"));

    auto c = parse_cidr("10.1.0.0/16");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->prefix, 16u);
    EXPECT_FALSE(parse_cidr("10.1.0.0"));
    EXPECT_FALSE(parse_cidr("10.1.0.0/33"));
    EXPECT_FALSE(parse_cidr("10.1.0.0/"));
    EXPECT_FALSE(parse_cidr("10.1.0.0/1x"));
    EXPECT_FALSE(parse_cidr("fd00::/129"));
    EXPECT_TRUE(parse_cidr("fd00::/128"));
    EXPECT_TRUE(parse_cidr("0.0.0.0/0"));
}

TEST(TcpInterfaces, CidrContains) {
    auto c = *parse_cidr("10.1.0.0/16");
    EXPECT_TRUE(c.contains(ip("10.1.255.7")));
    EXPECT_FALSE(c.contains(ip("10.2.0.1")));
    EXPECT_FALSE(c.contains(ip("fd00::1")));
    auto odd = *parse_cidr("192.168.4.0/22");
    EXPECT_TRUE(odd.contains(ip("192.168.7.255")));
    EXPECT_FALSE(odd.contains(ip("192.168.8.0")));
    EXPECT_TRUE(parse_cidr("0.0.0.0/0")->contains(ip("8.8.8.8")));
    auto v6 = *parse_cidr("fd00::/64");
    EXPECT_TRUE(v6.contains(ip("fd00::abcd")));
    EXPECT_FALSE(v6.contains(ip("fd00:0:0:1::1")));
}

TEST(TcpInterfaces, LoopbackAndLinkLocal) {
    EXPECT_TRUE(ip("127.0.0.5").is_loopback());
    EXPECT_TRUE(ip("::1").is_loopback());
    EXPECT_FALSE(ip("10.0.0.1").is_loopback());
    EXPECT_TRUE(ip("fe80::1").is_link_local());
    EXPECT_TRUE(ip("169.254.3.3").is_link_local());
}

TEST(TcpInterfaces, NoListsKeepsEverything) {
    EXPECT_EQ(names(filter_interfaces(host(), {}, {})),
              (std::vector<std::string>{"lo", "eth0", "docker0"}));
}

TEST(TcpInterfaces, IncludeByName) {
    auto v = filter_interfaces(host(), {"eth0"}, {});
    ASSERT_EQ(names(v), std::vector<std::string>{"eth0"});
    EXPECT_EQ(v[0].addresses.size(), 3u);
}

TEST(TcpInterfaces, IncludeByCidrKeepsOnlyMatchingAddresses) {
    auto v = filter_interfaces(host(), {"192.168.0.0/16"}, {});
    ASSERT_EQ(names(v), std::vector<std::string>{"eth0"});
    ASSERT_EQ(v[0].addresses.size(), 1u);
    EXPECT_EQ(v[0].addresses[0].address, ip("192.168.7.3"));
}

TEST(TcpInterfaces, ExcludeByNameAndCidr) {
    EXPECT_EQ(names(filter_interfaces(host(), {}, {"docker0", "lo"})),
              std::vector<std::string>{"eth0"});
    auto v = filter_interfaces(host(), {}, {"172.16.0.0/12", "10.0.0.0/8"});
    ASSERT_EQ(names(v), (std::vector<std::string>{"lo", "eth0"}));
    EXPECT_EQ(v[1].addresses.size(), 2u);  // 192.168.7.3 and fd00::3 remain
}

TEST(TcpInterfaces, BothListsIsAnError) {
    EXPECT_THROW(filter_interfaces(host(), {"eth0"}, {"lo"}), InterfaceError);
}

TEST(TcpInterfaces, ListMatchingNothingNamesTheInterfaces) {
    try {
        filter_interfaces(host(), {"eth9"}, {});
        FAIL() << "no error";
    } catch (const InterfaceError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("btl_tcp_if_include"), std::string::npos) << what;
        EXPECT_NE(what.find("eth0"), std::string::npos) << what;
        EXPECT_NE(what.find("docker0"), std::string::npos) << what;
    }
    EXPECT_THROW(filter_interfaces(host(), {}, {"10.99.0.0/16"}), InterfaceError);
}

TEST(TcpInterfaces, BadCidrIsAnError) {
    try {
        filter_interfaces(host(), {"10.0.0.0/40"}, {});
        FAIL() << "no error";
    } catch (const InterfaceError& e) {
        EXPECT_NE(std::string(e.what()).find("10.0.0.0/40"), std::string::npos);
    }
}

TEST(TcpInterfaces, PartialMatchIsANoteNotAnError) {
    std::vector<std::string> notes;
    auto v = filter_interfaces(host(), {"eth0", "ib0"}, {}, &notes);
    EXPECT_EQ(names(v), std::vector<std::string>{"eth0"});
    bool noted = false;
    for (auto& n : notes) noted |= n.find("ib0") != std::string::npos;
    EXPECT_TRUE(noted);
}

TEST(TcpInterfaces, DiscoversLoopback) {
    auto all = discover_interfaces();
    bool lo = false;
    for (auto& i : all)
        if (i.loopback)
            for (auto& a : i.addresses) lo |= a.address == ip("127.0.0.1");
    EXPECT_TRUE(lo);
}

// transit_info --devices accounts for every interface of the machine: each
// one the kernel lists is either discovered (usable) or left out with a
// reason, never both, never neither.
TEST(TcpInterfaces, EveryInterfaceIsUsableOrLeftOutWithAReason) {
    const auto usable = discover_interfaces();
    const auto skipped = unusable_interfaces();
    int seen = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net")) {
        const std::string name = entry.path().filename().string();
        ++seen;
        const bool in_usable = std::any_of(usable.begin(), usable.end(),
                                           [&](const Interface& i) { return i.name == name; });
        const auto it = std::find_if(skipped.begin(), skipped.end(),
                                     [&](const SkippedInterface& i) { return i.name == name; });
        EXPECT_NE(in_usable, it != skipped.end()) << name;
        if (it != skipped.end()) {
            EXPECT_FALSE(it->reason.empty()) << name;
        }
    }
    EXPECT_GT(seen, 0);
}

TEST(TcpInterfaces, AddressBlobRoundTrip) {
    std::vector<PeerAddress> in = {peer("127.0.0.1", 8, true), peer("fd00::3", 64)};
    in[1].port = 65535;
    auto out = decode_addresses(encode_addresses(in));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].address, in[0].address);
    EXPECT_TRUE(out[0].loopback);
    EXPECT_EQ(out[1].address, in[1].address);
    EXPECT_EQ(out[1].prefix, 64u);
    EXPECT_EQ(out[1].port, 65535);
}

TEST(TcpInterfaces, MalformedAddressBlobRefused) {
    auto blob = encode_addresses(std::vector<PeerAddress>{peer("10.0.0.1", 8)});
    EXPECT_THROW(decode_addresses(std::span(blob).first(blob.size() - 1)), InterfaceError);
    auto bad_count = blob;
    bad_count[4] = std::byte{0xff};
    EXPECT_THROW(decode_addresses(bad_count), InterfaceError);
    auto bad_family = blob;
    bad_family[8] = std::byte{5};
    EXPECT_THROW(decode_addresses(bad_family), InterfaceError);
    auto bad_prefix = blob;
    bad_prefix[9] = std::byte{33};
    EXPECT_THROW(decode_addresses(bad_prefix), InterfaceError);
    EXPECT_THROW(decode_addresses({}), InterfaceError);
}

TEST(TcpInterfaces, SameNodePeerUsesLoopbackOnly) {
    auto h = host();
    std::vector<PeerAddress> remote = {peer("127.0.0.1", 8, true), peer("10.1.2.3", 16)};
    PairContext ctx{.same_node = true, .loopback_available = true, .own_addresses = {}};
    auto lo = choose_pair(h[0], remote, ctx);
    ASSERT_TRUE(lo);
    EXPECT_EQ(lo->remote.address, ip("127.0.0.1"));
    EXPECT_NE(lo->reason.find("loopback"), std::string::npos);
    std::vector<std::string> notes;
    EXPECT_FALSE(choose_pair(h[1], remote, ctx, &notes));
    EXPECT_FALSE(notes.empty());
}

TEST(TcpInterfaces, SameNodeWithoutLoopbackUsesTheNic) {
    auto h = host();
    std::vector<PeerAddress> remote = {peer("10.1.2.3", 16)};
    PairContext ctx{.same_node = true, .loopback_available = false, .own_addresses = {}};
    auto p = choose_pair(h[1], remote, ctx);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->local.address, ip("10.1.2.3"));
}

TEST(TcpInterfaces, RemotePeerPrefersSameSubnetNeverLoopback) {
    auto h = host();
    // The peer has a loopback, a NIC address in our second subnet, and a docker
    // bridge with the very address ours has.
    std::vector<PeerAddress> remote = {peer("127.0.0.1", 8, true), peer("192.168.7.9", 24),
                                       peer("172.17.0.1", 16)};
    std::vector<IpAddress> own = {ip("127.0.0.1"), ip("10.1.2.3"), ip("192.168.7.3"),
                                  ip("172.17.0.1")};
    PairContext ctx{.same_node = false, .loopback_available = true, .own_addresses = own};
    EXPECT_FALSE(choose_pair(h[0], remote, ctx));
    auto eth = choose_pair(h[1], remote, ctx);
    ASSERT_TRUE(eth);
    EXPECT_EQ(eth->local.address, ip("192.168.7.3"));
    EXPECT_EQ(eth->remote.address, ip("192.168.7.9"));
    EXPECT_NE(eth->reason.find("same subnet"), std::string::npos) << eth->reason;
    std::vector<std::string> notes;
    EXPECT_FALSE(choose_pair(h[2], remote, ctx, &notes));
    bool bridge = false;
    for (auto& n : notes) bridge |= n.find("bridge") != std::string::npos;
    EXPECT_TRUE(bridge);
}

TEST(TcpInterfaces, PrefersIpv4OnATie) {
    Interface dual = iface("eth0", {{"fd00::3", 64}, {"10.0.0.3", 24}});
    std::vector<PeerAddress> remote = {peer("fd00::4", 64), peer("10.0.0.4", 24)};
    PairContext ctx{.same_node = false, .loopback_available = false, .own_addresses = {}};
    auto p = choose_pair(dual, remote, ctx);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->remote.address.family, AF_INET);
}

// Every usable pair, best first, each naming the peer address's index in its
// blob (the handshake's target when another path is taken).
TEST(TcpInterfaces, RankPairsListsEveryPathBestFirst) {
    Interface dual = iface("eth0", {{"fd00::3", 64}, {"10.0.0.3", 24}});
    std::vector<PeerAddress> remote = {peer("127.0.0.1", 8, true), peer("fd00::4", 64),
                                       peer("10.0.0.4", 24)};
    PairContext ctx{.same_node = false, .loopback_available = false, .own_addresses = {}};
    std::vector<std::string> notes;
    auto all = rank_pairs(dual, remote, ctx, &notes);
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].remote.address, ip("10.0.0.4"));
    EXPECT_EQ(all[0].remote_index, 2u);
    EXPECT_EQ(all[1].remote.address, ip("fd00::4"));
    EXPECT_EQ(all[1].remote_index, 1u);
    EXPECT_GE(all[0].score, all[1].score);
    EXPECT_EQ(all[0].target, 0u);
    EXPECT_FALSE(notes.empty());  // loopback and the cross-family pairs, rejected
}

// A spare interface in a subnet both nodes have: its pair scores like the
// real one (nothing but a connection shows that it leads nowhere), so the
// module keeps it first and the other interface's pair as the next path.
TEST(TcpInterfaces, SpareSubnetPairIsKeptAsAPath) {
    Interface spare = iface("spare0", {{"172.31.0.1", 16}});
    std::vector<PeerAddress> remote = {peer("10.0.0.2", 24), peer("172.31.0.2", 16)};
    PairContext ctx{.same_node = false, .loopback_available = false, .own_addresses = {}};
    auto own = rank_pairs(spare, remote, ctx);
    ASSERT_FALSE(own.empty());
    EXPECT_EQ(own[0].remote.address, ip("172.31.0.2"));
    EXPECT_EQ(own[0].remote_index, 1u);
    auto other = rank_pairs(iface("eth0", {{"10.0.0.1", 24}}), remote, ctx);
    ASSERT_FALSE(other.empty());
    EXPECT_EQ(other[0].remote.address, ip("10.0.0.2"));
}
