#include "runtime/node_identity.hpp"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

namespace {

using transit::rt::local_node_id;

TEST(NodeIdentity, HostnameThenSixteenHexDigits) {
    const std::string id = local_node_id();
    std::array<char, 256> host{};
    ASSERT_EQ(::gethostname(host.data(), host.size() - 1), 0);
    ASSERT_EQ(id.rfind(std::string(host.data()) + "-", 0), 0u) << id;
    const std::string digits = id.substr(id.size() - 16);
    EXPECT_EQ(digits.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    EXPECT_EQ(local_node_id(), id);
}

// Reports the node id a child computes after entering the namespaces in
// `flags`; empty when it may not (no privilege): the caller then skips.
std::string node_id_in_new_namespace(int flags) {
    int fds[2];
    if (::pipe(fds) != 0) return {};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        if (::unshare(flags) == 0) {
            const std::string id = local_node_id();
            [[maybe_unused]] ssize_t n = ::write(fds[1], id.data(), id.size());
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string id;
    char buf[256];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) id.append(buf, n);
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    return id;
}

// Network namespaces stand in for nodes in the multi-node tests (and are what
// separates containers): a process in another one is on another node.
TEST(NodeIdentity, AnotherNetworkNamespaceIsAnotherNode) {
    const std::string other = node_id_in_new_namespace(CLONE_NEWNET);
    if (other.empty()) GTEST_SKIP() << "cannot create a network namespace here (no privilege)";
    EXPECT_NE(other, local_node_id());
}

TEST(NodeIdentity, AnotherIpcNamespaceIsAnotherNode) {
    const std::string other = node_id_in_new_namespace(CLONE_NEWIPC);
    if (other.empty()) GTEST_SKIP() << "cannot create an IPC namespace here (no privilege)";
    EXPECT_NE(other, local_node_id());
}

}  // namespace
