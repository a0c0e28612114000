// The selection-list grammar of framework parameters such as `btl`.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transit/params.hpp"

namespace transit::params {
namespace {

const std::vector<std::string> known{"openib", "self", "tcp", "vader"};

std::string error_of(std::string_view text, const std::vector<std::string>& k = known) {
    try {
        parse_selection(text, k, "btl");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Selection, EmptySelectsEverything) {
    for (const char* text : {"", "  "}) {
        Selection s = parse_selection(text, known, "btl");
        EXPECT_TRUE(s.empty());
        EXPECT_FALSE(s.exclude);
        EXPECT_TRUE(s.selects("tcp"));
        EXPECT_TRUE(s.selects("anything"));
    }
}

TEST(Selection, IncludeList) {
    Selection s = parse_selection("self, vader ,tcp", known, "btl");
    EXPECT_FALSE(s.exclude);
    EXPECT_EQ(s.names, (std::vector<std::string>{"self", "vader", "tcp"}));
    EXPECT_TRUE(s.selects("self"));
    EXPECT_TRUE(s.selects("tcp"));
    EXPECT_FALSE(s.selects("openib"));
}

TEST(Selection, ExcludeList) {
    Selection s = parse_selection("^openib,tcp", known, "btl");
    EXPECT_TRUE(s.exclude);
    EXPECT_EQ(s.names, (std::vector<std::string>{"openib", "tcp"}));
    EXPECT_FALSE(s.selects("openib"));
    EXPECT_FALSE(s.selects("tcp"));
    EXPECT_TRUE(s.selects("self"));
    EXPECT_TRUE(s.selects("vader"));
}

TEST(Selection, CaretOnlyAtTheFront) {
    for (const char* text : {"self,^tcp", "^self,^tcp", "se^lf"}) {
        std::string e = error_of(text);
        EXPECT_NE(e.find("btl"), std::string::npos) << text << ": " << e;
        EXPECT_NE(e.find(text), std::string::npos) << e;
        EXPECT_NE(e.find("'^' may only come first"), std::string::npos) << e;
    }
}

TEST(Selection, EmptyNamesAreErrors) {
    for (const char* text : {"self,,tcp", "self,", ",self", "^", "^,tcp", " , "}) {
        std::string e = error_of(text);
        EXPECT_NE(e.find("empty name"), std::string::npos) << '"' << text << "\": " << e;
    }
}

TEST(Selection, UnknownIncludedNameListsTheKnownOnes) {
    std::string e = error_of("self,tpc");
    EXPECT_NE(e.find("tpc"), std::string::npos) << e;
    EXPECT_NE(e.find("known: openib, self, tcp, vader"), std::string::npos) << e;
}

TEST(Selection, UnknownExcludedNameOnlyWarns) {
    testing::internal::CaptureStderr();
    Selection s = parse_selection("^opnib", known, "btl");
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(s.exclude);
    EXPECT_TRUE(s.selects("openib"));
    EXPECT_NE(err.find("opnib"), std::string::npos) << err;
}

TEST(Selection, NoKnownListAcceptsAnyName) {
    Selection s = parse_selection("foo,bar", {}, "btl");
    EXPECT_TRUE(s.selects("foo"));
    EXPECT_FALSE(s.selects("baz"));
}

}  // namespace
}  // namespace transit::params
