// parse_size: the one place "4k" becomes 4096.
#include <gtest/gtest.h>

#include <stdexcept>

#include "transit/params.hpp"

namespace transit::params {
namespace {

TEST(ParseSize, PlainNumbers) {
    EXPECT_EQ(parse_size("0"), 0u);
    EXPECT_EQ(parse_size("4096"), 4096u);
    EXPECT_EQ(parse_size("  17  "), 17u);
    EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
}

TEST(ParseSize, BinarySuffixesAnyCase) {
    EXPECT_EQ(parse_size("4k"), 4096u);
    EXPECT_EQ(parse_size("4K"), 4096u);
    EXPECT_EQ(parse_size("1m"), 1048576u);
    EXPECT_EQ(parse_size("1M"), 1048576u);
    EXPECT_EQ(parse_size("2g"), 2147483648u);
    EXPECT_EQ(parse_size("2G"), 2147483648u);
    EXPECT_EQ(parse_size("1t"), 1099511627776u);
    EXPECT_EQ(parse_size("8kb"), 8192u);
    EXPECT_EQ(parse_size("8KiB"), 8192u);
    EXPECT_EQ(parse_size("3MB"), 3u << 20);
}

TEST(ParseSize, RejectsNegative) {
    EXPECT_THROW(parse_size("-1"), std::invalid_argument);
    EXPECT_THROW(parse_size("-4k"), std::invalid_argument);
}

TEST(ParseSize, RejectsOverflow) {
    EXPECT_THROW(parse_size("18446744073709551616"), std::invalid_argument);
    EXPECT_THROW(parse_size("17179869184g"), std::invalid_argument);  // 2^34 * 2^30
    EXPECT_EQ(parse_size("17179869183g"), 17179869183ull << 30);
}

TEST(ParseSize, RejectsGarbage) {
    for (const char* bad :
         {"", "   ", "k", "banana", "4x", "4kk", "4 k", "1.5M", "0x10", "4kbb", "+4", "4k4"})
        EXPECT_THROW(parse_size(bad), std::invalid_argument) << '"' << bad << '"';
}

TEST(ParseSize, ErrorSaysWhatWasWrong) {
    try {
        parse_size("4q");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("\"4q\""), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace transit::params
