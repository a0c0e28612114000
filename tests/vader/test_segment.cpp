#include "components/vader/vader_segment.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <system_error>

#include "tests/vader/fork_util.hpp"

namespace transit::vader {
namespace {

namespace fs = std::filesystem;

std::string job() {
    return "vadertest" + std::to_string(::getpid());
}

std::size_t leftovers(const std::string& job_id) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator("/dev/shm"))
        if (e.path().filename().string().rfind("transit-" + job_id + "-", 0) == 0) ++n;
    return n;
}

TEST(VaderSegment, NameCarriesJobRankAndRandomPart) {
    const std::string a = segment_file_name("job/1 x", 3, 0xabc);
    EXPECT_EQ(a, "transit-job_1_x-vader-3-0000000000000abc");
}

TEST(VaderSegment, CreatedPrivateZeroedAndUnlinkedOnDestruction) {
    std::string path;
    {
        SharedFile f = SharedFile::create("/dev/shm", job(), 0, 1 << 20, 0, -1);
        path = f.path();
        struct stat st {};
        ASSERT_EQ(::stat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        EXPECT_EQ(static_cast<std::size_t>(st.st_size), std::size_t{1} << 20);
        EXPECT_EQ(f.data()[12345], 0);
        EXPECT_EQ(leftovers(job()), 1u);
    }
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(leftovers(job()), 0u);
}

// A peer outside the job opens the segment through the owner's descriptor,
// even after its name is gone; a file others may read or write is refused.
TEST(VaderSegment, OpenedThroughTheOwnersDescriptorAndOnlyWhenPrivate) {
    SharedFile owner = SharedFile::create("/dev/shm", job(), 0, 1 << 16, 0, -1);
    owner.unlink();
    std::memcpy(owner.data() + 100, "hello", 5);
    {
        SharedFile peer =
            SharedFile::attach_process(static_cast<std::uint32_t>(::getpid()), owner.fd());
        EXPECT_EQ(std::memcmp(peer.data() + 100, "hello", 5), 0);
    }
    ASSERT_EQ(::fchmod(owner.fd(), 0644), 0);
    try {
        (void)SharedFile::attach_process(static_cast<std::uint32_t>(::getpid()), owner.fd());
        ADD_FAILURE() << "a segment of mode 0644 was opened";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("not mode 0600"), std::string::npos) << e.what();
    }
    // A descriptor that is no regular file (stdin may be a pipe or a tty).
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    EXPECT_THROW((void)SharedFile::attach_process(static_cast<std::uint32_t>(::getpid()), fds[0]),
                 std::system_error);
    ::close(fds[0]);
    ::close(fds[1]);
}

TEST(VaderSegment, TwoCreatesGetDifferentNames) {
    SharedFile a = SharedFile::create("/dev/shm", job(), 0, 4096, 0, -1);
    SharedFile b = SharedFile::create("/dev/shm", job(), 0, 4096, 0, -1);
    EXPECT_NE(a.path(), b.path());
}

TEST(VaderSegment, PeerMapsSharesAndTheNameGoesAway) {
    SharedFile owner = SharedFile::create("/dev/shm", job(), 0, 1 << 16, 0, 0);
    const std::string path = owner.path();
    const pid_t child = test::spawn([&] {
        SharedFile peer = SharedFile::attach(path);
        if (peer.size() != owner.size() || peer.owner()) return false;
        std::strcpy(peer.data() + 100, "written by the peer");
        unlink_path(path);  // the last peer to map removes the name
        return true;
    });
    ASSERT_EQ(test::join(child), 0);
    EXPECT_STREQ(owner.data() + 100, "written by the peer");
    EXPECT_FALSE(fs::exists(path));
    owner.unlink();  // idempotent, and fine after a peer removed it
    EXPECT_EQ(leftovers(job()), 0u);
}

TEST(VaderSegment, BadPathsGiveErrorsNamingThePath) {
    try {
        (void)SharedFile::attach("/dev/shm/transit-no-such-segment");
        FAIL() << "attach of a missing file succeeded";
    } catch (const std::system_error& e) {
        EXPECT_NE(std::string(e.what()).find("transit-no-such-segment"), std::string::npos);
    }
    EXPECT_THROW((void)SharedFile::create("/nonexistent-dir", job(), 0, 4096, 0, -1),
                 std::system_error);
    EXPECT_EQ(leftovers(job()), 0u);
}

}  // namespace
}  // namespace transit::vader
