#include "runtime/job_secret.hpp"

#include <gtest/gtest.h>

#include <set>

namespace {

using namespace transit::rt;

TEST(JobSecret, RandomSecretsDiffer) {
    std::set<Secret> seen;
    for (int i = 0; i < 100; ++i) seen.insert(random_secret());
    EXPECT_EQ(seen.size(), 100u);
}

TEST(JobSecret, DerivationIsDeterministicAndSeparatesItsInputs) {
    EXPECT_EQ(derive_secret("job1", "ab12"), derive_secret("job1", "ab12"));
    EXPECT_NE(derive_secret("job1", "ab12"), derive_secret("job2", "ab12"));
    EXPECT_NE(derive_secret("job1", "ab12"), derive_secret("job1", "ab13"));
    // Moving a character from one input to the other changes the secret.
    EXPECT_NE(derive_secret("ab", "c"), derive_secret("a", "bc"));
    EXPECT_NE(derive_secret("", ""), Secret{});
}

TEST(JobSecret, HexAndBytes) {
    const std::byte raw[] = {std::byte{0x00}, std::byte{0x9f}, std::byte{0xff}};
    EXPECT_EQ(to_hex(raw), "009fff");
    EXPECT_EQ(to_hex({}), "");
    const Secret s = random_secret();
    EXPECT_EQ(secret_from_bytes(s), s);
    EXPECT_FALSE(secret_from_bytes(raw).has_value());
}

}  // namespace
