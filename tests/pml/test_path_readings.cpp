// Both ranks' path figures as one (pml/path_readings.hpp): the list a rank
// sends, what the other makes of it (matched by module name, untrusted), and
// the merge that makes both ranks decide alike.
#include "pml/path_readings.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "pml/headers.hpp"

namespace {

using transit::pml::PathReadings;
using Names = std::vector<std::string_view>;

constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

std::vector<std::byte> entry(double us, double mbps, std::string_view name, std::size_t name_len) {
    transit::pml::wire::PathReadingHdr h{};
    h.small_us = us;
    h.bulk_mbps = mbps;
    h.name_len = static_cast<std::uint8_t>(name_len);
    std::vector<std::byte> out(sizeof h + name.size());
    std::memcpy(out.data(), &h, sizeof h);
    std::memcpy(out.data() + sizeof h, name.data(), name.size());
    return out;
}

TEST(PathReadings, RoundTripMatchesByNameInTheReadersOrder) {
    const Names sender{"tcp:eth0", "uct:tcp/eth0", "ofi:tcp;ofi_rxm"};
    const std::vector<double> us{10.5, 14.0, -1.0}, mbps{5000, 3000, 1200};
    const auto bytes = PathReadings::encode(sender, us, mbps, unbounded);

    // The reader lists the same modules in another order, one it lacks, one more.
    const Names reader{"ofi:tcp;ofi_rxm", "tcp:eth0", "vendor:x"};
    std::vector<double> got_us, got_mbps;
    ASSERT_TRUE(PathReadings::decode(bytes, reader, got_us, got_mbps));
    EXPECT_EQ(got_us, (std::vector<double>{-1.0, 10.5, -1.0}));
    EXPECT_EQ(got_mbps, (std::vector<double>{1200, 5000, -1.0}));
}

TEST(PathReadings, EncodeKeepsToTheRoomAndLeavesOutUnmatchableNames) {
    const std::string long_name(PathReadings::max_name + 1, 'x');
    const Names names{"tcp:eth0", long_name, "uct:tcp/eth0"};
    const std::vector<double> us{1, 2, 3}, mbps{4, 5, 6};
    const std::size_t one = sizeof(transit::pml::wire::PathReadingHdr) + names[0].size();
    EXPECT_EQ(PathReadings::encode(names, us, mbps, one).size(), one);
    EXPECT_TRUE(PathReadings::encode(names, us, mbps, one - 1).empty());

    // An empty key (one of two modules of a component) is not sent either.
    const Names with_empty{"tcp", "", "uct"};
    std::vector<double> e_us, e_mbps;
    ASSERT_TRUE(PathReadings::decode(PathReadings::encode(with_empty, us, mbps, unbounded),
                                     Names{"", "uct"}, e_us, e_mbps));
    EXPECT_EQ(e_us, (std::vector<double>{-1, 3}));

    const auto all = PathReadings::encode(names, us, mbps, unbounded);
    std::vector<double> got_us, got_mbps;
    ASSERT_TRUE(PathReadings::decode(all, names, got_us, got_mbps));
    EXPECT_EQ(got_us, (std::vector<double>{1, -1, 3}));
}

TEST(PathReadings, MalformedListsAreRefusedWhole) {
    const Names names{"tcp:eth0"};
    std::vector<double> us, mbps;
    auto good = entry(10, 100, "tcp:eth0", 8);

    auto cut = good;
    cut.pop_back();  // the name runs past the end
    EXPECT_FALSE(PathReadings::decode(cut, names, us, mbps));
    EXPECT_EQ(us, std::vector<double>{-1.0});

    auto header_only = good;
    header_only.resize(10);  // less than a header
    EXPECT_FALSE(PathReadings::decode(header_only, names, us, mbps));

    EXPECT_FALSE(PathReadings::decode(entry(10, 100, "", 0), names, us, mbps));
    EXPECT_FALSE(PathReadings::decode(
        entry(std::numeric_limits<double>::quiet_NaN(), 100, "tcp:eth0", 8), names, us, mbps));
    EXPECT_FALSE(PathReadings::decode(
        entry(10, std::numeric_limits<double>::infinity(), "tcp:eth0", 8), names, us, mbps));
    EXPECT_FALSE(PathReadings::decode(entry(-5, 100, "tcp:eth0", 8), names, us, mbps));

    // One key twice.
    auto twice = good;
    twice.insert(twice.end(), good.begin(), good.end());
    EXPECT_FALSE(PathReadings::decode(twice, names, us, mbps));

    // More entries than any rank sends.
    std::vector<std::byte> many;
    for (std::size_t i = 0; i <= PathReadings::max_entries; ++i) {
        const std::string name = "c" + std::to_string(i);
        const auto e = entry(10, 100, name, name.size());
        many.insert(many.end(), e.begin(), e.end());
    }
    EXPECT_FALSE(PathReadings::decode(many, names, us, mbps));

    // A good one after all that still reads.
    ASSERT_TRUE(PathReadings::decode(good, names, us, mbps));
    EXPECT_EQ(us, std::vector<double>{10.0});
}

TEST(PathReadings, MergeTakesTheLesserOfBothRanksFigures) {
    // Round trips: noise only lengthens one.  Bulk: one rank's single transfer
    // can read far above what the path sustains (tcp: 7,900 against 2,400).
    std::vector<double> us{10, -1, 12, 9}, mbps{2400, -1, 300, 4200};
    PathReadings::merge(us, std::vector<double>{11, 8, -1, 7});
    PathReadings::merge(mbps, std::vector<double>{7900, 80, -1, 4500});
    EXPECT_EQ(us, (std::vector<double>{10, 8, 12, 7}));
    EXPECT_EQ(mbps, (std::vector<double>{2400, 80, 300, 4200}));
    // Nothing from the peer: ours stand.
    PathReadings::merge(us, std::vector<double>{});
    EXPECT_EQ(us, (std::vector<double>{10, 8, 12, 7}));
}

// The point of it: both ranks merge the same two lists, whatever their
// order, and so hold the same figures per module.
TEST(PathReadings, BothRanksHoldTheSameFiguresAfterTheExchange) {
    const Names a_names{"tcp:eth0", "uct:tcp/eth0"}, b_names{"uct:tcp/eth0", "tcp:eth0"};
    std::vector<double> a_us{10.2, 13.0}, a_mbps{2000, 3400};
    std::vector<double> b_us{15.0, 11.1}, b_mbps{3100, 9000};
    const auto from_a = PathReadings::encode(a_names, a_us, a_mbps, unbounded);
    const auto from_b = PathReadings::encode(b_names, b_us, b_mbps, unbounded);
    std::vector<double> at_a_us, at_a_mbps, at_b_us, at_b_mbps;
    ASSERT_TRUE(PathReadings::decode(from_b, a_names, at_a_us, at_a_mbps));
    ASSERT_TRUE(PathReadings::decode(from_a, b_names, at_b_us, at_b_mbps));
    PathReadings::merge(a_us, at_a_us);
    PathReadings::merge(a_mbps, at_a_mbps);
    PathReadings::merge(b_us, at_b_us);
    PathReadings::merge(b_mbps, at_b_mbps);
    EXPECT_EQ(a_us, (std::vector<double>{b_us[1], b_us[0]}));
    EXPECT_EQ(a_mbps, (std::vector<double>{b_mbps[1], b_mbps[0]}));
    EXPECT_EQ(a_us, (std::vector<double>{10.2, 13.0}));
    EXPECT_EQ(a_mbps, (std::vector<double>{2000, 3100}));
}

}  // namespace
