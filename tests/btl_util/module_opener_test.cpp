// ModuleOpener: a module that opens is published under its key and kept; one
// whose construction throws, or whose address cannot be published, is left
// out, and the decline reason names each one left out and why.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/fixtures/core_module.hpp"
#include "tests/fixtures/two_rank_runtime.hpp"
#include "transit/btl/component.hpp"
#include "transit/btl/util/module_opener.hpp"

namespace transit::test {
namespace {

class NoComponent final : public btl::Component {
  public:
    std::vector<std::unique_ptr<btl::Module>> init(btl::InitContext&) override { return {}; }
};

class KeyedModule final : public fixture::CoreModule {
  public:
    KeyedModule(btl::Component& c, std::string key) : CoreModule(c), key_(std::move(key)) {}
    std::string modex_key() const { return key_; }
    const std::vector<std::byte>& address() const noexcept { return address_; }

  private:
    std::string key_;
    std::vector<std::byte> address_{std::byte{1}, std::byte{2}};
};

// Refuses to publish under one key.
class RefusingRuntime final : public TwoRankRuntime {
  public:
    Status modex_send(std::string_view key, std::span<const std::byte> blob) override {
        if (key == "refused") return Status::out_of_resource;
        return TwoRankRuntime::modex_send(key, blob);
    }
};

TEST(ModuleOpener, KeepsWhatOpensAndSaysWhyTheOthersDidNot) {
    NoComponent component;
    RefusingRuntime runtime;
    const log::Stream out("test", 0);
    std::vector<std::unique_ptr<btl::Module>> modules;
    btl::util::ModuleOpener opener(runtime, out);

    const KeyedModule* good = opener.open(
        modules, "good", [&] { return std::make_unique<KeyedModule>(component, "btl.test.good"); });
    ASSERT_NE(good, nullptr);
    ASSERT_EQ(modules.size(), 1u);
    EXPECT_EQ(modules.back().get(), good);
    EXPECT_EQ(runtime.modex_.at({0, "btl.test.good"}), good->address());

    EXPECT_EQ(opener.open(
                  modules, "broken",
                  [&]() -> std::unique_ptr<KeyedModule> { throw std::runtime_error("no device"); }),
              nullptr);
    EXPECT_EQ(opener.open(modules, "unpublished",
                          [&] { return std::make_unique<KeyedModule>(component, "refused"); }),
              nullptr);
    EXPECT_EQ(modules.size(), 1u);
    EXPECT_EQ(opener.none_opened("nothing could be opened"),
              "nothing could be opened (broken: no device; unpublished: publishing the address "
              "failed: out of resource)");
}

}  // namespace
}  // namespace transit::test
