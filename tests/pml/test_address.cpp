// pml::parse_address, the reading of a listening context's printable address
// (what a client gets from its user or a name lookup), and format_address.
#include "pml/address.hpp"

#include <gtest/gtest.h>

#include <string>

namespace transit::pml {
namespace {

constexpr char good[] =
    "transit:1;token=00112233445566778899aabbccddeeff;node=6e6f6465;btl.tcp.1=0a0b\n";

TEST(PmlAddress, AnAddressReadsAndPrintsBack) {
    rt::PeerAddress a;
    ASSERT_EQ(parse_address(good, a), "");
    EXPECT_EQ(a.node_id, "node");
    ASSERT_EQ(a.blobs.size(), 1u);
    EXPECT_EQ(a.blobs.at("btl.tcp.1").size(), 2u);
    EXPECT_EQ(format_address(a) + "\n", good);
}

TEST(PmlAddress, MissingPartsAreNamed) {
    rt::PeerAddress a;
    EXPECT_EQ(parse_address("transit:1;node=00;btl.x=00", a), "no token");
    EXPECT_EQ(parse_address("http://x", a), "does not start with 'transit:1;'");
    EXPECT_EQ(parse_address("transit:1;token=00", a), "the token is not 128 bits");
}

// The reason goes into a log line: a long key, or one holding control bytes
// or a newline, is cut to 32 printable characters (found by fuzz_pml_address).
TEST(PmlAddress, AReasonIsOneShortPrintableLine) {
    rt::PeerAddress a;
    const std::string key = "btl.\n" + std::string(5000, '\xff') + "\x01";
    for (const std::string& text :
         {"transit:1;" + key + "=zz", "transit:1;" + key, "transit:1;x" + key + "=00"}) {
        const std::string bad = parse_address(text, a);
        ASSERT_FALSE(bad.empty());
        EXPECT_LT(bad.size(), 80u) << bad.size();
        for (const char c : bad) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << int(c);
    }
}

}  // namespace
}  // namespace transit::pml
