// mca::keep_loaded with real libraries: a pinned library stays mapped after its
// last dlclose, one not pinned goes, and a name that is not loaded is neither
// pinned nor loaded.
#include <dlfcn.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace transit::test
