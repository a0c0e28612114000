#include <gtest/gtest.h>

#include <vector>

#include "components/openib/openib_ifsel.hpp"
#include "transit/params.hpp"

using namespace transit::openib;
using transit::params::Error;

TEST(OpenibIfsel, ParsesDevicesAndPorts) {
    auto l = parse_if_list(" mlx5_0, mlx5_1:2 ,rxe-eth0.1", "p");
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(l[0], (IfEntry{"mlx5_0", 0}));
    EXPECT_EQ(l[1], (IfEntry{"mlx5_1", 2}));
    EXPECT_EQ(l[2], (IfEntry{"rxe-eth0.1", 0}));
    EXPECT_TRUE(parse_if_list("", "p").empty());
    EXPECT_TRUE(parse_if_list("   ", "p").empty());
    EXPECT_EQ(parse_if_list("a,a", "p").size(), 1u) << "duplicates folded";
}

TEST(OpenibIfsel, BadEntriesNameTheParameterAndTheEntry) {
    for (const char* bad : {"mlx5_0,", ",mlx5_0", "a,,b", "mlx5_0:", "mlx5_0:0", "mlx5_0:256",
                            "mlx5_0:1x", "mlx5_0:-1", ":1", "mlx 5", "mlx5_0:1:2", "dev/x"}) {
        try {
            parse_if_list(bad, "btl_openib_if_include");
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("btl_openib_if_include"), std::string::npos)
                << e.what();
        }
    }
    try {
        parse_if_list("mlx5_0:0", "x");
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'mlx5_0:0'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("1 to 255"), std::string::npos) << e.what();
    }
}

TEST(OpenibIfsel, IncludeAndExcludeTogetherIsAnError) {
    EXPECT_THROW(parse_if_filter("mlx5_0", "mlx5_1"), Error);
    EXPECT_NO_THROW(parse_if_filter("mlx5_0", ""));
    EXPECT_NO_THROW(parse_if_filter("", "mlx5_0:1"));
    try {
        parse_if_filter("a", "b");
    } catch (const Error& e) {
        std::string w = e.what();
        EXPECT_NE(w.find("btl_openib_if_include"), std::string::npos);
        EXPECT_NE(w.find("btl_openib_if_exclude"), std::string::npos);
    }
}

namespace {
std::vector<PortCandidate> fabric() {
    return {{"mlx5_0", 1, 10}, {"mlx5_0", 2, 10}, {"mlx5_1", 1, 21}, {"mlx5_2", 1, -1}};
}
std::vector<bool> used(const IfSelectionResult& r) {
    std::vector<bool> u;
    for (const auto& v : r.verdicts) u.push_back(v.use);
    return u;
}
}  // namespace

TEST(OpenibIfsel, IncludeSelectsDevicesOrSinglePorts) {
    auto c = fabric();
    auto r = select_ports(c, parse_if_filter("mlx5_0:2,mlx5_1", ""), true);
    EXPECT_EQ(used(r), (std::vector<bool>{false, true, true, false}))
        << "an explicit list is not narrowed by distance";
    EXPECT_EQ(r.verdicts[0].reason, "not in btl_openib_if_include");
    EXPECT_TRUE(r.unmatched.empty());
}

TEST(OpenibIfsel, ExcludeDropsDevicesOrSinglePorts) {
    auto c = fabric();
    auto r = select_ports(c, parse_if_filter("", "mlx5_0:1"), false);
    EXPECT_EQ(used(r), (std::vector<bool>{false, true, true, true}));
    EXPECT_EQ(r.verdicts[0].reason, "excluded by btl_openib_if_exclude");
    r = select_ports(c, parse_if_filter("", "mlx5_0"), false);
    EXPECT_EQ(used(r), (std::vector<bool>{false, false, true, true}));
}

TEST(OpenibIfsel, ClosestDevicePreferred) {
    auto c = fabric();
    auto r = select_ports(c, {}, true);
    EXPECT_EQ(used(r), (std::vector<bool>{true, true, false, true}))
        << "unknown distance is never a reason to drop";
    EXPECT_EQ(r.verdicts[2].reason,
              "farther from this process (distance 21) than mlx5_0 (distance 10)");
    r = select_ports(c, {}, false);
    EXPECT_EQ(used(r), (std::vector<bool>{true, true, true, true}));
    // The closest after exclusion, not before.
    r = select_ports(c, parse_if_filter("", "mlx5_0"), true);
    EXPECT_EQ(used(r), (std::vector<bool>{false, false, true, true}));
}

TEST(OpenibIfsel, UnmatchedIncludeEntriesAreReported) {
    auto c = fabric();
    auto r = select_ports(c, parse_if_filter("mlx5_9,mlx5_0:3,mlx5_1:1", ""), true);
    EXPECT_EQ(r.unmatched, (std::vector<std::string>{"mlx5_9", "mlx5_0:3"}));
    EXPECT_EQ(used(r), (std::vector<bool>{false, false, true, false}));
}
