// btl::util::choose_interface on this host's real interfaces: the include and
// exclude lists (names and CIDR blocks), bad entries, and the preference for
// the interface holding an address of the node's hostname (checked in a child
// given a hostname of its own in a UTS namespace: root only, skipped otherwise).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "transit/btl/util/network_interface.hpp"

namespace transit::test {
namespace {

using btl::util::choose_interface;
using btl::util::interface_selected;
using Names = std::vector<std::string>;

TEST(NetworkInterface, ListsSelectByNameAndByBlock) {
    EXPECT_TRUE(interface_selected("lo", {}, {}));
    EXPECT_TRUE(interface_selected("lo", {"lo"}, {}));
    EXPECT_TRUE(interface_selected("lo", {"127.0.0.0/8"}, {}));
    EXPECT_FALSE(interface_selected("lo", {"10.255.0.0/16"}, {}));
    EXPECT_FALSE(interface_selected("lo", {}, {"127.0.0.1/32"}));
    EXPECT_TRUE(interface_selected("lo", {}, {"eth9"}));
}

TEST(NetworkInterface, BadEntriesAreRefused) {
    EXPECT_THROW(interface_selected("lo", {"10.0.0.0/33"}, {}), std::invalid_argument);
    EXPECT_THROW(interface_selected("lo", {"10.0.0/8x"}, {}), std::invalid_argument);
    EXPECT_THROW(interface_selected("lo", {"lo"}, {"eth0"}), std::invalid_argument);
}

TEST(NetworkInterface, TheListsMayLeaveNone) {
    const Names candidates{"lo"};
    std::string why;
    EXPECT_FALSE(choose_interface(candidates, {}, {"lo"}, why).has_value());
    EXPECT_NE(why.find("no interface"), std::string::npos) << why;
}

TEST(NetworkInterface, WithoutAnAddressOfTheHostnameTheLibrarysFirst) {
    const Names candidates{"nosuch0", "nosuch1"};
    std::string why;
    const auto c = choose_interface(candidates, {}, {}, why);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->index, 0u);
}

// A host named "localhost" prefers lo, listed second, over an interface
// listed first that holds none of its addresses.
TEST(NetworkInterface, TheInterfaceOfTheHostnameIsPreferred) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(fds[0]);
        char answer = 's';  // skipped: no UTS namespace here
        if (::unshare(CLONE_NEWUTS) == 0 && ::sethostname("localhost", 9) == 0) {
            const Names candidates{"nosuch0", "lo"};
            std::string why;
            const auto c = choose_interface(candidates, {}, {}, why);
            answer = c && c->index == 1 ? 'y' : 'n';
        }
        const bool written = ::write(fds[1], &answer, 1) == 1;
        ::_exit(written ? 0 : 1);
    }
    ::close(fds[1]);
    char answer = 0;
    const bool got = ::read(fds[0], &answer, 1) == 1;
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(got);
    if (answer == 's') GTEST_SKIP() << "cannot make a UTS namespace (needs root)";
    EXPECT_EQ(answer, 'y') << "lo, holding 127.0.0.1 (localhost), was not chosen";
}

}  // namespace
}  // namespace transit::test
