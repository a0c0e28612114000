#include "components/vader/vader_segment.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <new>
#include <system_error>

#include "components/vader/vader_layout.hpp"
#include "tests/vader/fork_util.hpp"
#include "transit/btl/util/process_watch.hpp"

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

// Writes the owner fields of a header as VaderModule::format_segment does.
void stamp(SharedFile& f, pid_t pid, std::uint64_t pid_ns, std::uint64_t start_time) {
    SegmentHeader& h = *new (f.data()) SegmentHeader{};
    h.pid = static_cast<std::uint32_t>(pid);
    h.pid_ns = pid_ns;
    h.start_time = start_time;
    h.magic = segment_magic;
}

// A directory of its own: the sweep must not touch other tests' segments.
class DeadSegments : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = "/dev/shm/transit-sweep-" + std::to_string(::getpid());
        fs::create_directory(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::size_t files() const {
        std::size_t n = 0;
        for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
        return n;
    }
    std::string dir_;
};

TEST_F(DeadSegments, AKilledOwnersSegmentIsRemoved) {
    const std::string job_id = job();  // the child's pid would make another
    const pid_t child = test::spawn([&] {
        SharedFile f = SharedFile::create(dir_, job_id, 0, 1 << 16, 0, -1);
        stamp(f, ::getpid(), btl::util::pid_namespace(), btl::util::process_start_time(::getpid()));
        ::raise(SIGKILL);  // no destructor runs: the name stays
        return true;
    });
    ASSERT_EQ(test::join(child), 128 + SIGKILL);
    ASSERT_EQ(files(), 1u);
    const auto removed = remove_dead_segments(dir_);
    ASSERT_EQ(removed.size(), 1u);
    EXPECT_TRUE(removed[0].starts_with("transit-" + job_id + "-vader-0-")) << removed[0];
    EXPECT_EQ(files(), 0u);
}

TEST_F(DeadSegments, ALiveOwnersSegmentStays) {
    SharedFile f = SharedFile::create(dir_, job(), 0, 1 << 16, 0, -1);
    stamp(f, ::getpid(), btl::util::pid_namespace(), btl::util::process_start_time(::getpid()));
    EXPECT_TRUE(remove_dead_segments(dir_).empty());
    EXPECT_EQ(files(), 1u);
}

// The owner's pid now names another process (here: this one, which started
// at another time than the header says).
TEST_F(DeadSegments, ASegmentWhosePidCameRoundIsRemoved) {
    const std::uint64_t start = btl::util::process_start_time(::getpid());
    ASSERT_NE(start, 0u);
    SharedFile f = SharedFile::create(dir_, job(), 0, 1 << 16, 0, -1);
    stamp(f, ::getpid(), btl::util::pid_namespace(), start + 1);
    EXPECT_EQ(remove_dead_segments(dir_).size(), 1u);
    EXPECT_EQ(files(), 0u);
}

// No namespace recorded, another namespace, no header yet, not a segment
// name: nothing proves the owner is gone.
TEST_F(DeadSegments, WhatDoesNotProveItsOwnerGoneStays) {
    const pid_t dead = test::spawn([] { return true; });
    ASSERT_EQ(test::join(dead), 0);
    const std::uint64_t ns = btl::util::pid_namespace();
    SharedFile no_ns = SharedFile::create(dir_, job(), 0, 4096, 0, -1);
    stamp(no_ns, dead, 0, 0);
    SharedFile other_ns = SharedFile::create(dir_, job(), 1, 4096, 0, -1);
    stamp(other_ns, dead, ns + 1, 0);
    SharedFile unformatted = SharedFile::create(dir_, job(), 2, 4096, 0, -1);
    SharedFile f = SharedFile::create(dir_, job(), 3, 4096, 0, -1);
    stamp(f, dead, ns, 0);
    const std::string other_name = dir_ + "/transit-x-tcp-0";
    fs::copy_file(f.path(), other_name);
    EXPECT_EQ(remove_dead_segments(dir_).size(), 1u);  // f only
    EXPECT_FALSE(fs::exists(f.path()));
    EXPECT_EQ(files(), 4u);
}

}  // namespace
}  // namespace transit::vader
