// The btl framework's lifecycle over the fixture plugins: selection lists,
// failures in open, declines, module collection and ordering, verbose lines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "framework/btl_framework.hpp"
#include "tests/framework/plugin_env.hpp"

namespace transit::btl {
namespace {

using mca::ComponentRecord;
using mca::ComponentState;
using test::fixture;
using test::set_param;

// A job of one, enough for components that never talk to peers.
class LoneRuntime final : public rt::Runtime {
  public:
    Rank rank() const noexcept override { return 0; }
    std::uint32_t size() const noexcept override { return 1; }
    std::uint32_t local_rank() const noexcept override { return 0; }
    std::uint32_t local_size() const noexcept override { return 1; }
    const std::string& job_id() const noexcept override { return job_; }
    const std::string& node_id() const noexcept override { return node_; }
    bool is_singleton() const noexcept override { return true; }
    std::span<const Rank> local_peers() const noexcept override { return {&self_, 1}; }
    bool on_this_node(Rank peer) const noexcept override { return peer == 0; }
    const rt::Secret& job_secret() const noexcept override { return secret_; }
    Status modex_send(std::string_view, std::span<const std::byte>) override {
        return Status::success;
    }
    Status modex_recv(Rank, std::string_view, std::vector<std::byte>&) override {
        return Status::not_found;
    }
    Status fence() override { return Status::success; }
    int numa_node() const noexcept override { return -1; }
    std::string binding() const override { return {}; }
    int distance_to_device(std::string_view) const override { return -1; }

  private:
    std::string job_ = "test";
    std::string node_ = "here";
    Rank self_ = 0;
    rt::Secret secret_{};
};

// Tests that call init() name their components: the real plugins next to
// libtransit are loaded too, and must not be initialised by these tests.
class BtlFramework : public ::testing::Test {
  protected:
    void SetUp() override {
        params::reset_for_testing();
        set_param("mca_base_component_path", test::fixture_dir);
    }
    void TearDown() override {
        framework_.reset();
        params::reset_for_testing();
    }

    Framework& make() {
        framework_.emplace(runtime_, progress_, am_);
        return *framework_;
    }

    std::optional<ComponentRecord> record(const std::string& name) const {
        for (const ComponentRecord& r : framework_->records())
            if (r.name == name && r.path.find("/dup/") == std::string::npos) return r;
        return std::nullopt;
    }

    LoneRuntime runtime_;
    ProgressEngine progress_;
    AmTable am_;
    std::optional<Framework> framework_;
};

TEST_F(BtlFramework, RegistersItsParameters) {
    make();
    params::Variable& btl = params::registry().get("btl");
    EXPECT_EQ(btl.type(), params::Type::string);
    EXPECT_EQ(btl.level(), 1);
    EXPECT_FALSE(btl.help().empty());
    params::Variable& verbose = params::registry().get("btl_base_verbose");
    EXPECT_EQ(verbose.type(), params::Type::integer);
    EXPECT_EQ(verbose.level(), 5);
}

TEST_F(BtlFramework, IncludeListExcludesTheOthers) {
    set_param("btl", "fixturegood,fixturemods");
    make().open();
    EXPECT_EQ(record("fixturegood")->state, ComponentState::opened);
    EXPECT_EQ(record("fixturemods")->state, ComponentState::opened);
    auto other = record("openthrows");
    ASSERT_TRUE(other);
    EXPECT_EQ(other->state, ComponentState::excluded);
    EXPECT_EQ(other->reason, "excluded by btl=fixturegood,fixturemods (from api)")
        << "(the source text comes from params)";
}

TEST_F(BtlFramework, ExcludeListNamesItsSource) {
    ::setenv("TRANSIT_MCA_btl", "^openthrows,dup", 1);
    params::reset_for_testing();
    set_param("mca_base_component_path", test::fixture_dir);
    make().open();
    ::unsetenv("TRANSIT_MCA_btl");
    auto r = record("openthrows");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->state, ComponentState::excluded);
    EXPECT_NE(r->reason.find("excluded by btl=^openthrows,dup (from "), std::string::npos)
        << r->reason;
    EXPECT_NE(r->reason.find("TRANSIT_MCA_btl"), std::string::npos) << r->reason;
    EXPECT_EQ(record("fixturegood")->state, ComponentState::opened);
}

TEST_F(BtlFramework, ExcludedComponentsAreUnloaded) {
    set_param("btl", "^fixturegood");
    make().open();
    EXPECT_EQ(record("fixturegood")->state, ComponentState::excluded);
    EXPECT_FALSE(test::is_mapped(fixture("fixturegood")));
    EXPECT_TRUE(test::is_mapped(fixture("fixturemods")));
}

// Loading runs the constructors of the plugin and of everything it links
// (libfabric's providers spend a quarter of a second calibrating clocks): a
// plugin the selection leaves out is never loaded, whichever way it is left out.
TEST_F(BtlFramework, ExcludedPluginsAreNeverLoaded) {
    for (const char* list : {"fixturegood,fixturemods", "^sigtakeover"}) {
        ::unsetenv("TRANSIT_TEST_SIGTAKEOVER_LOADS");
        params::reset_for_testing();
        set_param("mca_base_component_path", test::fixture_dir);
        set_param("btl", list);
        make().open();
        EXPECT_EQ(std::getenv("TRANSIT_TEST_SIGTAKEOVER_LOADS"), nullptr) << list;
        auto r = record("sigtakeover");
        ASSERT_TRUE(r) << list;
        EXPECT_EQ(r->state, ComponentState::excluded) << list;
        EXPECT_EQ(r->path, fixture("sigtakeover")) << list;
        framework_.reset();
    }
    // Selected, it is loaded (so the check above can fail).
    params::reset_for_testing();
    set_param("mca_base_component_path", test::fixture_dir);
    set_param("btl", "sigtakeover");
    make().open();
    EXPECT_NE(std::getenv("TRANSIT_TEST_SIGTAKEOVER_LOADS"), nullptr);
    ::unsetenv("TRANSIT_TEST_SIGTAKEOVER_LOADS");
}

TEST_F(BtlFramework, UnknownNameInTheListIsAnError) {
    set_param("btl", "fixturegood,nosuchbtl");
    Framework& f = make();
    EXPECT_THROW(f.open(), params::Error);
}

TEST_F(BtlFramework, MixingIncludeAndExcludeIsAnError) {
    set_param("btl", "fixturegood,^fixturemods");
    Framework& f = make();
    EXPECT_THROW(f.open(), params::Error);
}

TEST_F(BtlFramework, RefusedPluginsAreKnownNames) {
    // Naming a plugin that failed to load is not a typo: no error, it just fails.
    set_param("btl", "badmagic,fixturegood");
    make().open();
    EXPECT_EQ(record("badmagic")->state, ComponentState::failed);
    EXPECT_EQ(record("fixturegood")->state, ComponentState::opened);
}

TEST_F(BtlFramework, OpenThatThrowsFailsWithTheMessage) {
    make().open();
    auto r = record("openthrows");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->state, ComponentState::failed);
    EXPECT_EQ(r->reason, "open() threw: fixture open failure");
    EXPECT_FALSE(test::is_mapped(fixture("openthrows")));
}

TEST_F(BtlFramework, RecordsIncludeLoaderFailures) {
    make().open();
    auto r = record("otherabi");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->state, ComponentState::failed);
    EXPECT_EQ(r->reason, "built against Transit ABI 4.0, this is ABI 3.2");
    EXPECT_EQ(r->path, fixture("otherabi"));
}

TEST_F(BtlFramework, BadComponentParameterValueStopsOpen) {
    set_param("btl_fixturemods_count", "lots");
    Framework& f = make();
    EXPECT_THROW(f.open(), params::Error);
}

TEST_F(BtlFramework, VerbosityOutOfRangeIsAnError) {
    set_param("btl_base_verbose", "101");
    EXPECT_THROW(make(), params::Error);
}

TEST_F(BtlFramework, DeclineInOpenKeepsTheReason) {
    set_param("btl_fixturemods_available", "false");
    make().open();
    auto r = record("fixturemods");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->state, ComponentState::declined);
    EXPECT_EQ(r->reason, "fixture told to decline");
}

TEST_F(BtlFramework, InitCollectsModulesHighestExclusivityFirst) {
    set_param("btl", "fixturemods,fixturegood");
    set_param("btl_fixturemods_count", "3");
    Framework& f = make();
    f.open();
    f.init();
    ASSERT_EQ(f.modules().size(), 3u);
    EXPECT_EQ(f.modules()[0]->name(), "fixturemods:2");
    EXPECT_EQ(f.modules()[1]->name(), "fixturemods:1");
    EXPECT_EQ(f.modules()[2]->name(), "fixturemods:0");
    EXPECT_EQ(f.modules()[0]->attributes().exclusivity, 300u);
    EXPECT_EQ(f.modules()[0]->component().name(), "fixturemods");
    EXPECT_EQ(record("fixturemods")->state, ComponentState::active);
    auto good = record("fixturegood");
    EXPECT_EQ(good->state, ComponentState::declined);
    EXPECT_EQ(good->reason, "fixture has no device");
    EXPECT_FALSE(test::is_mapped(fixture("fixturegood")));
}

TEST_F(BtlFramework, NoModulesMeansDeclined) {
    set_param("btl", "fixturemods");
    set_param("btl_fixturemods_count", "0");
    Framework& f = make();
    f.init();  // opens first
    EXPECT_TRUE(f.modules().empty());
    EXPECT_EQ(record("fixturemods")->state, ComponentState::declined);
    EXPECT_EQ(record("fixturemods")->reason, "told to create no module");
}

TEST_F(BtlFramework, DestructionUnloadsEverything) {
    set_param("btl", "fixturemods");
    make().init();
    EXPECT_TRUE(test::is_mapped(fixture("fixturemods")));
    framework_.reset();
    EXPECT_FALSE(test::is_mapped(fixture("fixturemods")));
}

TEST_F(BtlFramework, VerboseSaysWhyForEachComponent) {
    set_param("btl", "fixturemods,openthrows,badmagic");
    set_param("btl_base_verbose", "1");
    ::testing::internal::CaptureStderr();
    {
        Framework& f = make();
        EXPECT_EQ(f.output().verbosity(), 1);
        f.open();
        f.init();
    }
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(
        err.find("btl: excluded fixturegood: excluded by btl=fixturemods,openthrows,badmagic"),
        std::string::npos)
        << err;
    EXPECT_NE(err.find("btl: rejected badmagic (" + fixture("badmagic") + "): "), std::string::npos)
        << err;
    EXPECT_NE(err.find("btl: rejected openthrows"), std::string::npos) << err;
    EXPECT_NE(err.find("btl: opened fixturemods"), std::string::npos) << err;
    EXPECT_NE(err.find("btl: selected fixturemods: 2 module(s): fixturemods:0, fixturemods:1"),
              std::string::npos)
        << err;
}

TEST_F(BtlFramework, SilentByDefault) {
    set_param("btl", "fixturemods,fixturegood,openthrows");
    ::testing::internal::CaptureStderr();
    make().init();
    framework_.reset();
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace transit::btl
