// Random input to every parser of the params layer: each must either accept it
// or throw its documented exception, never crash, hang or throw anything else.
// (A stand-in for a libFuzzer target until one exists; the seed is fixed so a
// failure reproduces.)
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <string>

#include "tests/params/params_fixture.hpp"

namespace transit::params::test {
namespace {

// Bytes biased towards the characters the grammars care about.
std::string random_text(std::mt19937& rng, std::size_t max_len) {
    static const std::string interesting = "0123456789kKmMgGtTbBi^,=#\" \t\n-+._:abc\xff";
    std::uniform_int_distribution<std::size_t> len(0, max_len);
    std::uniform_int_distribution<int> coin(0, 3);
    std::uniform_int_distribution<std::size_t> pick(0, interesting.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    std::string s(len(rng), '\0');
    for (char& c : s) c = coin(rng) != 0 ? interesting[pick(rng)] : static_cast<char>(byte(rng));
    return s;
}

TEST(Robustness, ParseSize) {
    std::mt19937 rng(1);
    for (int i = 0; i < 20000; ++i) {
        std::string s = random_text(rng, 12);
        try {
            (void)parse_size(s);
        } catch (const std::invalid_argument&) {
        }
    }
}

TEST(Robustness, ParseSelection) {
    std::mt19937 rng(2);
    const std::vector<std::string> known{"self", "tcp"};
    testing::internal::CaptureStderr();  // unknown excluded names warn
    for (int i = 0; i < 20000; ++i) {
        std::string s = random_text(rng, 16);
        try {
            Selection sel = parse_selection(s, i % 2 ? known : std::vector<std::string>{}, "btl");
            for (const std::string& n : sel.names) EXPECT_FALSE(n.empty()) << s;
        } catch (const Error&) {
        }
    }
    testing::internal::GetCapturedStderr();
}

using RobustFiles = ParamsTest;

TEST_F(RobustFiles, RandomParameterFiles) {
    std::mt19937 rng(3);
    for (int i = 0; i < 300; ++i) {
        write_user_file(random_text(rng, 200));
        reset_for_testing();
        try {
            registry().add("t", "c", {"s", Type::size, "1", "h", 5});
        } catch (const Error&) {
        }
    }
}

TEST_F(RobustFiles, RandomValuesForEveryType) {
    std::mt19937 rng(4);
    const Decl decls[] = {
        {"b", Type::boolean, "0", "h", 5},
        {"i", Type::integer, "0", "h", 5},
        {"u", Type::unsigned_integer, "0", "h", 5},
        {"s", Type::size, "0", "h", 5},
        {"d", Type::real, "0", "h", 5},
        {"e", Type::enumeration, "a", "h", 5, "a,b"},
        {"l", Type::list, "", "h", 5},
        {"str", Type::string, "", "h", 5},
    };
    registry().add_all("t", "c", decls);
    for (int i = 0; i < 5000; ++i) {
        const Decl& d = decls[static_cast<std::size_t>(i) % std::size(decls)];
        std::string name = "t_c_" + std::string(d.name);
        std::string before = registry().get(name).text();
        std::string value = random_text(rng, 10);
        try {
            registry().set(name, value, {Origin::api});
            EXPECT_EQ(registry().get(name).text(), value);
        } catch (const Error&) {
            EXPECT_EQ(registry().get(name).text(), before) << "a rejected value must not stick";
        }
    }
}

}  // namespace
}  // namespace transit::params::test
