// mca::keep_loaded with real libraries: a pinned library stays mapped after its
// last dlclose, one not pinned goes, and a name that is not loaded is neither
// pinned nor loaded.  mca::load_for_good: a library loaded late stays, and the
// signal handlers its constructor installed are taken back.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <csignal>

#include "tests/framework/plugin_env.hpp"
#include "transit/keep_loaded.hpp"

namespace transit::test {
namespace {

// Loads `path` and gives the reference back after `between` ran.
template <typename F>
void with_loaded(const std::string& path, F&& between) {
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << ::dlerror();
    between();
    ::dlclose(h);
}

TEST(KeepLoaded, UnpinnedLibraryIsUnmappedByItsLastClose) {
    const std::string lib = fixture("fixturegood");
    with_loaded(lib, [&] { EXPECT_TRUE(is_mapped(lib)); });
    EXPECT_FALSE(is_mapped(lib)) << "the check below would prove nothing";
}

TEST(KeepLoaded, PinnedLibraryStaysAfterItsLastClose) {
    const std::string lib = fixture("fixturemods");
    const char* const names[] = {lib.c_str()};
    with_loaded(lib, [&] { EXPECT_EQ(mca::keep_loaded(names), 1u); });
    EXPECT_TRUE(is_mapped(lib));
}

TEST(KeepLoaded, NamesNotLoadedAreSkippedNotLoaded) {
    const std::string lib = fixture("openthrows");
    const char* const names[] = {"libtransit-no-such-library.so.7", lib.c_str()};
    ASSERT_FALSE(is_mapped(lib));
    EXPECT_EQ(mca::keep_loaded(names), 0u);
    EXPECT_FALSE(is_mapped(lib));
    EXPECT_EQ(mca::keep_loaded({}), 0u);
}

TEST(LoadForGood, StaysAndGivesTheApplicationItsSignalsBack) {
    const std::string lib = fixture("sigtakeover");  // its constructor takes SIGTERM, SIGUSR2
    ASSERT_FALSE(is_mapped(lib));
    struct sigaction before {};
    ASSERT_EQ(::sigaction(SIGUSR2, nullptr, &before), 0);
    std::string error;
    void* h = mca::load_for_good(lib.c_str(), error);
    ASSERT_NE(h, nullptr) << error;
    EXPECT_TRUE(is_mapped(lib));
    struct sigaction after {};
    ASSERT_EQ(::sigaction(SIGUSR2, nullptr, &after), 0);
    EXPECT_EQ(after.sa_handler, before.sa_handler);
    ::dlclose(h);
    EXPECT_TRUE(is_mapped(lib)) << "unloaded by its last close";
}

TEST(LoadForGood, SaysWhyALibraryCannotBeLoaded) {
    std::string error;
    EXPECT_EQ(mca::load_for_good("libtransit-no-such-library.so.7", error), nullptr);
    EXPECT_NE(error.find("libtransit-no-such-library.so.7"), std::string::npos) << error;
}

}  // namespace
}  // namespace transit::test
