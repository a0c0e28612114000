// The loader: every broken fixture is refused with its own reason, good ones
// load, and the search path comes from mca_base_component_path.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "framework/plugin_file.hpp"
#include "framework/repository.hpp"
#include "framework/static_components.hpp"
#include "tests/fixtures/bad_plugin_files.hpp"
#include "tests/framework/plugin_env.hpp"
#include "transit/version.hpp"

namespace transit::mca {
namespace {

using test::fixture;
using test::fixture_dir;

const ComponentRecord* find_failure(const LoadResult& r, const std::string& name) {
    for (const ComponentRecord& f : r.failures)
        if (f.name == name) return &f;
    return nullptr;
}

const LoadedComponent* find_loaded(const LoadResult& r, const std::string& name) {
    for (const LoadedComponent& c : r.components)
        if (c.record().name == name) return &c;
    return nullptr;
}

class Repository : public ::testing::Test {
  protected:
    void SetUp() override {
        params::reset_for_testing();
        test::set_param("mca_base_component_path", fixture_dir + ":" + test::dup_dir);
    }
    void TearDown() override { params::reset_for_testing(); }
};

struct Refusal {
    std::string name;
    std::string reason;  // expected somewhere in the record's reason
};

std::ostream& operator<<(std::ostream& os, const Refusal& r) {
    return os << r.name;
}

class RefusedFixture : public Repository, public ::testing::WithParamInterface<Refusal> {};

TEST_P(RefusedFixture, IsRefusedWithItsReason) {
    const Refusal& want = GetParam();
    LoadResult r = load_components("btl");
    const ComponentRecord* f = find_failure(r, want.name);
    ASSERT_NE(f, nullptr) << want.name << " was not refused";
    EXPECT_EQ(f->state, ComponentState::failed);
    EXPECT_EQ(f->framework, "btl");
    EXPECT_NE(f->reason.find(want.reason), std::string::npos)
        << "reason: " << f->reason << "\nexpected to contain: " << want.reason;
    EXPECT_EQ(f->reason.find('\n'), std::string::npos) << "a reason is one line";
    for (const LoadedComponent& c : r.components) EXPECT_NE(c.record().path, f->path);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, RefusedFixture,
    ::testing::Values(
        Refusal{"badmagic", "bad magic 0x0badf00d"},
        Refusal{"otherabi", "built against Transit ABI 4.0, this is ABI 3.2"},
        Refusal{"otheriface", fmt::format("built against btl interface version {}, this is "
                                          "version {}",
                                          btl_interface_version + 1, btl_interface_version)},
        Refusal{"fingerprint", std::string("built with othercc/otherlib/x86_64-sysv, this is ") +
                                   build_fingerprint},
        Refusal{"wrongname", "descriptor names component 'somebodyelse'"},
        Refusal{"nofactory", "descriptor has no factory"},
        Refusal{"nosym", "missing descriptor symbol transit_btl_nosym_component"},
        Refusal{"notso", "not a shared object"},
        Refusal{"undefsym", "cannot load: " + fixture("undefsym") +
                                ": undefined symbol: transit_fixture_missing_symbol"},
        Refusal{"lazysym", "cannot load: " + fixture("lazysym") +
                               ": undefined symbol: transit_fixture_missing_function"},
        Refusal{"factorythrows", "the factory threw: fixture factory failure"},
        Refusal{"dup", "duplicate of " + fixture("dup")}),
    [](const auto& info) { return info.param.name; });

TEST_F(Repository, DuplicateRefusesTheSecondFileAndKeepsTheFirst) {
    LoadResult r = load_components("btl");
    const LoadedComponent* first = find_loaded(r, "dup");
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->record().path, fixture("dup"));
    const ComponentRecord* second = find_failure(r, "dup");
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(second->path, fixture("dup", test::dup_dir));
}

TEST_F(Repository, GoodPluginLoadsWithItsRecord) {
    LoadResult r = load_components("btl");
    const LoadedComponent* good = find_loaded(r, "fixturegood");
    ASSERT_NE(good, nullptr);
    const ComponentRecord& rec = good->record();
    EXPECT_EQ(rec.state, ComponentState::loaded);
    EXPECT_EQ(rec.framework, "btl");
    EXPECT_EQ(rec.version, "1.2.3");
    EXPECT_EQ(rec.path, fixture("fixturegood"));
    EXPECT_EQ(rec.built_with, std::string("Transit ABI 3.2, ") + build_fingerprint);
    EXPECT_TRUE(rec.reason.empty());
    EXPECT_EQ(good->component().name(), "fixturegood");
    ASSERT_NE(good->component().descriptor, nullptr);
    EXPECT_EQ(good->component().descriptor->magic, descriptor_magic);
}

// The fixture's library constructor installs SIGTERM and SIGUSR2 handlers; the
// loader accepts the component and puts the process's dispositions back.
TEST_F(Repository, LoadingAPluginLeavesSignalDispositionsAlone) {
    ASSERT_FALSE(test::is_mapped(fixture("sigtakeover")));
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    struct sigaction before {};
    ASSERT_EQ(::sigaction(SIGUSR2, &ignore, &before), 0);

    LoadResult r = load_components("btl");
    ASSERT_NE(find_loaded(r, "sigtakeover"), nullptr);
    EXPECT_TRUE(test::is_mapped(fixture("sigtakeover")));  // its constructor did run

    struct sigaction term {};
    struct sigaction usr2 {};
    ASSERT_EQ(::sigaction(SIGTERM, nullptr, &term), 0);
    ASSERT_EQ(::sigaction(SIGUSR2, nullptr, &usr2), 0);
    EXPECT_EQ(term.sa_handler, SIG_DFL);
    EXPECT_EQ(usr2.sa_handler, SIG_IGN);
    ::sigaction(SIGUSR2, &before, nullptr);
}

TEST_F(Repository, RefusedRecordSaysWhatThePluginWasBuiltWith) {
    LoadResult r = load_components("btl");
    const ComponentRecord* abi = find_failure(r, "otherabi");
    ASSERT_NE(abi, nullptr);
    EXPECT_EQ(abi->version, "1.2.3");
    EXPECT_EQ(abi->built_with, std::string("Transit ABI 4.0, ") + build_fingerprint);
    const ComponentRecord* fp = find_failure(r, "fingerprint");
    ASSERT_NE(fp, nullptr);
    EXPECT_EQ(fp->built_with, "Transit ABI 3.2, othercc/otherlib/x86_64-sysv");
    // A descriptor with a wrong magic is not trusted for anything.
    const ComponentRecord* magic = find_failure(r, "badmagic");
    ASSERT_NE(magic, nullptr);
    EXPECT_EQ(magic->built_with, "");
}

TEST_F(Repository, LoaderDoesNotRunOpen) {
    // openthrows only fails when the framework opens it.
    LoadResult r = load_components("btl");
    EXPECT_NE(find_loaded(r, "openthrows"), nullptr);
    EXPECT_EQ(find_failure(r, "openthrows"), nullptr);
}

TEST_F(Repository, AcceptedComponentsAreSortedByName) {
    LoadResult r = load_components("btl");
    ASSERT_GE(r.components.size(), 4u);
    EXPECT_TRUE(std::is_sorted(
        r.components.begin(), r.components.end(),
        [](const auto& a, const auto& b) { return a.record().name < b.record().name; }));
}

TEST_F(Repository, LibraryStaysMappedWhileTheComponentLives) {
    const std::string path = fixture("fixturegood");
    {
        LoadResult r = load_components("btl");
        ASSERT_NE(find_loaded(r, "fixturegood"), nullptr);
        EXPECT_TRUE(test::is_mapped(path));
        // Refused plugins are not kept.
        EXPECT_FALSE(test::is_mapped(fixture("badmagic")));
        EXPECT_FALSE(test::is_mapped(fixture("dup", test::dup_dir)));
    }
    EXPECT_FALSE(test::is_mapped(path));
}

TEST_F(Repository, LoadingTwiceGivesIndependentComponents) {
    LoadResult a = load_components("btl");
    LoadResult b = load_components("btl");
    const LoadedComponent* ga = find_loaded(a, "fixturegood");
    const LoadedComponent* gb = find_loaded(b, "fixturegood");
    ASSERT_TRUE(ga && gb);
    EXPECT_NE(&ga->component(), &gb->component());
    a = LoadResult{};
    EXPECT_TRUE(test::is_mapped(fixture("fixturegood")));  // b still holds it
}

TEST_F(Repository, WithoutThePathNoFixtureIsSeen) {
    test::set_param("mca_base_component_path", "");
    LoadResult r = load_components("btl");
    EXPECT_EQ(find_loaded(r, "fixturegood"), nullptr);
    EXPECT_EQ(find_failure(r, "badmagic"), nullptr);
}

TEST_F(Repository, PathComesFromTheEnvironment) {
    ::setenv("TRANSIT_MCA_mca_base_component_path", fixture_dir.c_str(), 1);
    params::reset_for_testing();
    LoadResult r = load_components("btl");
    ::unsetenv("TRANSIT_MCA_mca_base_component_path");
    EXPECT_NE(find_loaded(r, "fixturegood"), nullptr);
    EXPECT_EQ(find_failure(r, "dup"), nullptr);  // dup/ is not on this path
}

TEST_F(Repository, MissingAndEmptyDirectoriesAreHarmless) {
    test::set_param("mca_base_component_path", "::/nonexistent/dir:" + fixture_dir + ":");
    LoadResult r = load_components("btl");
    EXPECT_NE(find_loaded(r, "fixturegood"), nullptr);
}

TEST_F(Repository, ComponentPathStartsNextToTheLibraryAndSkipsRepeats) {
    test::set_param("mca_base_component_path",
                    fixture_dir + ":" + fixture_dir + "/../btl:" + test::dup_dir);
    std::vector<std::string> path = component_path();
    ASSERT_EQ(path.size(), 3u);
    EXPECT_TRUE(path[0].ends_with("/lib/transit")) << path[0];
    EXPECT_EQ(path[1], fixture_dir);
    EXPECT_EQ(path[2], test::dup_dir);
}

TEST_F(Repository, OtherFrameworksFilesAreIgnored) {
    // Only transit_btl_*.so names are candidates for "btl".
    LoadResult r = load_components("btl");
    for (const LoadedComponent& c : r.components) EXPECT_EQ(c.record().framework, "btl");
}

TEST_F(Repository, StaticComponentsAreMarkedAndNeedNoFile) {
    // Empty unless built with TRANSIT_STATIC_COMPONENTS.
    LoadResult r = load_components("btl");
    for (const transit_component_descriptor* d : static_components()) {
        if (std::string_view(d->framework) != "btl") continue;
        const LoadedComponent* c = find_loaded(r, d->name);
        ASSERT_NE(c, nullptr) << d->name;
        EXPECT_EQ(c->record().path, "(static)");
    }
}

TEST_F(Repository, UnknownFrameworkIsAProgrammingError) {
    EXPECT_THROW(load_components("nosuchframework"), std::invalid_argument);
}

// Files that took the process down (a FIFO hung it in open, a truncated library
// raised SIGBUS inside dlopen) or were refused without a word.
class BadFiles : public Repository {
  protected:
    void SetUp() override {
        Repository::SetUp();
        test::set_param("mca_base_component_path", bad_.dir() + ":" + fixture_dir);
    }
    std::string reason_for(const LoadResult& r, const std::string& name) {
        const ComponentRecord* f = find_failure(r, name);
        if (f == nullptr) return "(not listed)";
        EXPECT_EQ(f->path, bad_.path(name));
        EXPECT_EQ(f->state, ComponentState::failed);
        return f->reason;
    }
    test::BadPluginFiles bad_{fixture("fixturegood")};
};

TEST_F(BadFiles, AFifoIsListedAndNeverOpened) {
    LoadResult r = load_components("btl");
    EXPECT_EQ(reason_for(r, "fifo"), "a FIFO (named pipe), not a regular file: not opened");
    EXPECT_NE(find_loaded(r, "fixturegood"), nullptr) << "the good plugins still load";
}

TEST_F(BadFiles, ADirectoryIsListedWithItsReason) {
    LoadResult r = load_components("btl");
    EXPECT_EQ(reason_for(r, "adir"), "a directory, not a regular file: not opened");
}

TEST_F(BadFiles, ATruncatedLibraryIsRefusedBeforeDlopen) {
    LoadResult r = load_components("btl");
    std::string reason = reason_for(r, "trunc");
    EXPECT_TRUE(reason.starts_with("truncated: segment ")) << reason;
    EXPECT_TRUE(reason.ends_with(", the file has 4096 bytes")) << reason;
    EXPECT_FALSE(test::is_mapped(bad_.path("trunc")));
}

TEST_F(BadFiles, ALibraryForAnotherMachineSaysWhichMachine) {
    LoadResult r = load_components("btl");
    EXPECT_EQ(reason_for(r, "foreign"),
              fmt::format("built for {}, this is {}", test::BadPluginFiles::foreign_machine(),
                          test::uname_machine()));
}

TEST(PluginFile, AcceptsARealPlugin) {
    EXPECT_EQ(check_plugin_file(fixture("fixturegood")), "");
}

TEST(PluginFile, NamesTheClassWhenItDiffers) {
    test::BadPluginFiles bad(fixture("fixturegood"));
    const std::string path = bad.path("fixturegood");
    std::filesystem::copy_file(fixture("fixturegood"), path);
    {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(EI_CLASS);
        f.put(static_cast<char>(ELFCLASS32));
    }
    const std::string here = test::uname_machine();
    EXPECT_EQ(check_plugin_file(path),
              fmt::format("built for {} (32-bit, little-endian), this is {} (64-bit, "
                          "little-endian)",
                          here, here));
}

TEST(PluginFile, RefusesAFileShorterThanAnElfHeader) {
    test::BadPluginFiles bad(fixture("fixturegood"));
    const std::string path = bad.path("short");
    std::filesystem::copy_file(fixture("fixturegood"), path);
    std::filesystem::resize_file(path, 40);
    EXPECT_EQ(check_plugin_file(path), "truncated: 40 bytes, an ELF header alone needs 64");
    std::filesystem::resize_file(path, 10);
    EXPECT_EQ(check_plugin_file(path), "not a shared object (no ELF header)");
}

TEST(PluginFile, RefusesProgramHeadersPastTheEnd) {
    test::BadPluginFiles bad(fixture("fixturegood"));
    const std::string path = bad.path("short");
    std::filesystem::copy_file(fixture("fixturegood"), path);
    std::filesystem::resize_file(path, 100);
    EXPECT_TRUE(check_plugin_file(path).starts_with("truncated: its program headers end at byte "))
        << check_plugin_file(path);
}

TEST(PluginFile, SaysWhyAMissingFileCannotBeExamined) {
    EXPECT_EQ(check_plugin_file("/nonexistent/transit_btl_x.so"),
              "cannot examine it: No such file or directory");
}

TEST(PluginFile, MachineNames) {
    EXPECT_EQ(machine_name(EM_X86_64), "x86_64");
    EXPECT_EQ(machine_name(EM_AARCH64), "aarch64");
    EXPECT_EQ(machine_name(0x7777), "machine 30583");
}

// check_descriptor on its own, for the fields no fixture spoils.
transit_component_descriptor good_descriptor() {
    return make_descriptor<Component>("btl", btl_interface_version, "x", {1, 0, 0});
}

TEST(CheckDescriptor, AcceptsACorrectOne) {
    EXPECT_EQ(check_descriptor(good_descriptor(), "btl", "x", btl_interface_version), "");
}

TEST(CheckDescriptor, RefusesATooSmallStruct) {
    auto d = good_descriptor();
    d.struct_size = 8;
    EXPECT_NE(check_descriptor(d, "btl", "x", btl_interface_version).find("descriptor too small"),
              std::string::npos);
}

TEST(CheckDescriptor, RefusesANewerMinor) {
    auto d = good_descriptor();
    d.abi_version = (abi_major << 16) | (abi_minor + 1);
    EXPECT_EQ(check_descriptor(d, "btl", "x", btl_interface_version),
              "built against Transit ABI 3.3, this is ABI 3.2");
}

TEST(CheckDescriptor, RefusesAnotherFramework) {
    auto d = good_descriptor();
    EXPECT_EQ(check_descriptor(d, "pml", "x", btl_interface_version),
              "descriptor names framework 'btl', the file name says 'pml'");
}

TEST(CheckDescriptor, SurvivesUnterminatedNames) {
    auto d = good_descriptor();
    for (char& c : d.name) c = 'y';
    std::string reason = check_descriptor(d, "btl", "x", btl_interface_version);
    EXPECT_NE(reason.find(std::string(32, 'y') + "'"), std::string::npos) << reason;
}

TEST(ComponentStateNames, AreDistinct) {
    EXPECT_EQ(to_string(ComponentState::loaded), "loaded");
    EXPECT_EQ(to_string(ComponentState::failed), "failed");
    EXPECT_EQ(to_string(ComponentState::declined), "declined");
    EXPECT_EQ(to_string(ComponentState::excluded), "excluded");
    EXPECT_EQ(to_string(ComponentState::opened), "opened");
    EXPECT_EQ(to_string(ComponentState::active), "active");
}

}  // namespace
}  // namespace transit::mca
