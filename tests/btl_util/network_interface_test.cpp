// btl::util::choose_interface on this host's real interfaces: the include and
// exclude lists (names and CIDR blocks), bad entries, and the preference for
// the interface holding an address of the node's hostname (checked in a child
// with network, mount and UTS namespaces of its own: root only, skipped
// otherwise).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

// In a child with network, mount and UTS namespaces of its own (root only,
// skipped otherwise): a veth pair tn0/tn1, 10.77.0.1 on tn1, and /etc/hosts
// naming the host.  `hosts_line` is the host's line; the answer is the index
// chosen among {tn0, tn1} ('0', '1'), or 's' when the set-up failed.
char choice_in_a_namespace(const char* hosts_line) {
    int fds[2];
    if (::pipe(fds) != 0) return 's';
    const pid_t child = ::fork();
    if (child < 0) return 's';
    if (child == 0) {
        ::close(fds[0]);
        char answer = 's';
        char hosts[] = "/tmp/transit-hosts-XXXXXX";
        const int fd = ::mkstemp(hosts);
        const std::string text = std::string("127.0.0.1 localhost\n") + hosts_line + "\n";
        const bool set_up = fd >= 0 &&
                            ::write(fd, text.data(), text.size()) == ssize_t(text.size()) &&
                            ::unshare(CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWNS) == 0 &&
                            ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                            ::mount(hosts, "/etc/hosts", nullptr, MS_BIND, nullptr) == 0 &&
                            ::sethostname("testnode", 8) == 0 &&
                            std::system(
                                "ip link add tn0 type veth peer name tn1 && "
                                "ip addr add 10.77.0.1/24 dev tn1 && ip link set tn0 up && "
                                "ip link set tn1 up") == 0;
        if (fd >= 0) ::unlink(hosts);
        if (set_up) {
            const Names candidates{"tn0", "tn1"};
            std::string why;
            const auto c = choose_interface(candidates, {}, {}, why);
            answer = c ? static_cast<char>('0' + c->index) : 'n';
        }
        const bool written = ::write(fds[1], &answer, 1) == 1;
        ::_exit(written ? 0 : 1);
    }
    ::close(fds[1]);
    char answer = 's';
    if (::read(fds[0], &answer, 1) != 1) answer = 'x';
    ::close(fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    return answer;
}

// tn1, listed second, holds the address of the host's name.
TEST(NetworkInterface, TheInterfaceOfTheHostnameIsPreferred) {
    const char answer = choice_in_a_namespace("10.77.0.1 testnode");
    if (answer == 's') GTEST_SKIP() << "cannot make network namespaces here (needs root and ip)";
    EXPECT_EQ(answer, '1') << "tn1, holding 10.77.0.1 (testnode), was not chosen";
}

// A hostname on a loopback address (Debian's 127.0.1.1) says nothing of
// where other nodes reach this one: the library's first.
TEST(NetworkInterface, ALoopbackHostnameLeavesTheLibrarysFirst) {
    const char answer = choice_in_a_namespace("127.0.1.1 testnode");
    if (answer == 's') GTEST_SKIP() << "cannot make network namespaces here (needs root and ip)";
    EXPECT_EQ(answer, '0');
}

}  // namespace
}  // namespace transit::test
