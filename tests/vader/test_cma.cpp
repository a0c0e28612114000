#include "components/vader/vader_cma.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/vader/fork_util.hpp"

namespace transit::vader {
namespace {

// The child's buffer address is the same as ours after fork, so both sides
// know where to read without any exchange.
class CmaTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (std::string why = cma_self_probe(); !why.empty())
            GTEST_SKIP() << "CMA does not work on this machine: " << why;
    }
};

TEST_F(CmaTest, SelfProbePasses) {
    EXPECT_EQ(cma_self_probe(), "");
}

TEST_F(CmaTest, ReadsAndWritesAnotherProcess) {
    constexpr std::size_t size = 3 << 20;  // several pages, not a multiple of anything
    std::vector<char> data(size);
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>(i * 7);
    static volatile std::uint64_t cookie = 0x1234567890abcdefull;
    int ready[2], done[2];
    ASSERT_EQ(::pipe(ready), 0);
    ASSERT_EQ(::pipe(done), 0);
    const pid_t child = test::spawn([&] {
        allow_peer_access();
        char c = 'r';
        if (::write(ready[1], &c, 1) != 1) return false;
        if (::read(done[0], &c, 1) != 1) return false;
        // The parent overwrote the second half with 0x5a.
        for (std::size_t i = size / 2; i < size; ++i)
            if (data[i] != 0x5a) return false;
        return true;
    });
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);

    EXPECT_EQ(cma_peer_probe(child, reinterpret_cast<std::uint64_t>(&cookie), cookie), "");
    EXPECT_NE(cma_peer_probe(child, reinterpret_cast<std::uint64_t>(&cookie), cookie + 1), "");

    std::vector<char> copy(size);
    EXPECT_EQ(cma_read(child, copy.data(), reinterpret_cast<std::uint64_t>(data.data()), size),
              Status::completed);
    EXPECT_EQ(copy, data);
    std::vector<char> fives(size - size / 2, 0x5a);
    EXPECT_EQ(cma_write(child, fives.data(),
                        reinterpret_cast<std::uint64_t>(data.data() + size / 2), fives.size()),
              Status::completed);
    ASSERT_EQ(::write(done[1], &c, 1), 1);
    EXPECT_EQ(test::join(child), 0);

    // The process is gone: the transfer reports the peer, it does not crash.
    EXPECT_EQ(cma_read(child, copy.data(), reinterpret_cast<std::uint64_t>(data.data()), 64),
              Status::peer_failed);
    EXPECT_NE(cma_peer_probe(child, reinterpret_cast<std::uint64_t>(&cookie), cookie), "");
    for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}

TEST_F(CmaTest, BadRemoteAddressIsAnErrorNotACrash) {
    char buf[16];
    EXPECT_EQ(cma_read(::getpid(), buf, 8, sizeof buf), Status::error);
}

}  // namespace
}  // namespace transit::vader
