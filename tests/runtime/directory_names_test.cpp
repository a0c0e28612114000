// The node's name directory (rt::NameDirectory) and the name service over it
// (rt::DirectoryNames): a directory of this user's alone, exclusive publish,
// names of dead processes taken over, unpublish by the owner only, bounded and
// checked entries, waits that end; and rt::NameChoice falling back to it when
// the launcher keeps no names.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/directory_names.hpp"
#include "runtime/name_choice.hpp"
#include "runtime/runtime.hpp"
#include "runtime/runtime_base.hpp"
#include "transit/params.hpp"

namespace {

using namespace transit;
using namespace transit::rt;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

class DirectoryNamesTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char templ[] = "/tmp/transit-names-test-XXXXXX";
        ASSERT_NE(::mkdtemp(templ), nullptr);
        base_ = templ;
        dir_ = base_ + "/names";
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(base_, ec);
    }

    // A child process that publishes `name` (with `value`), says so on a pipe
    // and waits to be killed.  Returns its pid once it has published.
    pid_t publisher(const std::string& name, const std::string& value = "its-address") {
        int fds[2];
        EXPECT_EQ(::pipe(fds), 0);
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::close(fds[0]);
            DirectoryNames names(dir_, "child-job", 7);
            std::string why;
            const char ok = names.publish_name(name, value, why) == Status::success ? 'y' : 'n';
            (void)!::write(fds[1], &ok, 1);
            for (;;) ::pause();
        }
        ::close(fds[1]);
        char ok = 0;
        EXPECT_EQ(::read(fds[0], &ok, 1), 1);
        ::close(fds[0]);
        EXPECT_EQ(ok, 'y') << "the child could not publish " << name;
        return pid;
    }

    static void kill_and_reap(pid_t pid) {
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
    }

    std::string base_;
    std::string dir_;
};

TEST_F(DirectoryNamesTest, PublishLookupUnpublish) {
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    // Any name is a safe file name: slashes, dots, bytes above 0x7f.
    for (const std::string name :
         {"plain", "../../etc/passwd", ".lock", "a/b", "\xc3\xa9t\xc3\xa9"}) {
        EXPECT_EQ(names.publish_name(name, "address of " + name, why), Status::success) << why;
        EXPECT_EQ(names.lookup_name(name, milliseconds(0), value, why), Status::success) << why;
        EXPECT_EQ(value, "address of " + name);
    }
    struct stat st {};
    ASSERT_EQ(::lstat(dir_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    EXPECT_FALSE(fs::exists(base_ + "/etc"));
    EXPECT_EQ(names.publish_name("plain", "again", why), Status::exists);
    EXPECT_NE(why.find("is published by rank 0 of job job-a"), std::string::npos) << why;
    EXPECT_EQ(names.unpublish_name("plain", why), Status::success) << why;
    EXPECT_EQ(names.unpublish_name("plain", why), Status::not_found);
    EXPECT_EQ(names.lookup_name("plain", milliseconds(0), value, why), Status::not_found);
    EXPECT_NE(why.find(dir_), std::string::npos) << "the error names the directory: " << why;
}

TEST_F(DirectoryNamesTest, ANameTooLongIsRefusedClearly) {
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    EXPECT_EQ(names.publish_name(std::string(121, 'x'), "v", why), Status::bad_param);
    EXPECT_NE(why.find("longer than 120 bytes"), std::string::npos) << why;
    EXPECT_EQ(names.lookup_name(std::string(500, 'x'), milliseconds(0), value, why),
              Status::bad_param);
    EXPECT_EQ(names.publish_name(std::string(120, '\xff'), "v", why), Status::success) << why;
}

TEST_F(DirectoryNamesTest, TheNamesGoWithTheService) {
    std::string why, value;
    {
        DirectoryNames names(dir_, "job-a", 0);
        ASSERT_EQ(names.publish_name("short-lived", "v", why), Status::success) << why;
    }
    DirectoryNames other(dir_, "job-b", 0);
    EXPECT_EQ(other.lookup_name("short-lived", milliseconds(0), value, why), Status::not_found);
    std::vector<std::string> left;
    for (const auto& f : fs::directory_iterator(dir_))
        if (f.path().filename() != ".lock") left.push_back(f.path().filename());
    EXPECT_TRUE(left.empty()) << left.front();
}

TEST_F(DirectoryNamesTest, ASecondPublisherGetsExists) {
    const pid_t first = publisher("taken");
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    EXPECT_EQ(names.publish_name("taken", "mine", why), Status::exists);
    EXPECT_NE(why.find("rank 7 of job child-job (process " + std::to_string(first) + ")"),
              std::string::npos)
        << why;
    EXPECT_EQ(names.lookup_name("taken", milliseconds(0), value, why), Status::success);
    EXPECT_EQ(value, "its-address");
    kill_and_reap(first);
}

TEST_F(DirectoryNamesTest, OnlyOneOfManyConcurrentPublishersWins) {
    constexpr int n = 8;
    pid_t kids[n];
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    for (pid_t& kid : kids) {
        kid = ::fork();
        if (kid == 0) {
            DirectoryNames names(dir_, "child-job", 1);
            std::string why;
            const Status s = names.publish_name("contested", "v", why);
            const char c = s == Status::success ? 'w' : s == Status::exists ? 'e' : '?';
            (void)!::write(fds[1], &c, 1);
            for (;;) ::pause();
        }
    }
    ::close(fds[1]);
    int won = 0, lost = 0;
    for (int i = 0; i < n; ++i) {
        char c = 0;
        ASSERT_EQ(::read(fds[0], &c, 1), 1);
        won += c == 'w';
        lost += c == 'e';
    }
    ::close(fds[0]);
    for (const pid_t kid : kids) kill_and_reap(kid);
    EXPECT_EQ(won, 1);
    EXPECT_EQ(lost, n - 1);
}

TEST_F(DirectoryNamesTest, AKilledPublishersNameIsTakenOver) {
    const pid_t victim = publisher("victims");
    kill_and_reap(victim);
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    // A reader ignores the dead entry and removes it.
    EXPECT_EQ(names.lookup_name("victims", milliseconds(0), value, why), Status::not_found);
    EXPECT_FALSE(fs::exists(dir_ + "/" + name_file("victims")));

    const pid_t again = publisher("victims2");
    kill_and_reap(again);
    EXPECT_EQ(names.publish_name("victims2", "mine", why), Status::success) << why;
    EXPECT_EQ(names.lookup_name("victims2", milliseconds(0), value, why), Status::success);
    EXPECT_EQ(value, "mine");
}

TEST_F(DirectoryNamesTest, UnpublishByAnotherProcessIsRefused) {
    const pid_t owner = publisher("owned");
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    EXPECT_EQ(names.unpublish_name("owned", why), Status::access_denied);
    EXPECT_NE(why.find("not by this process"), std::string::npos) << why;
    EXPECT_EQ(names.lookup_name("owned", milliseconds(0), value, why), Status::success);
    kill_and_reap(owner);
    EXPECT_EQ(names.unpublish_name("owned", why), Status::not_found);
}

TEST_F(DirectoryNamesTest, ALookupThatWaitsEndsInTimeout) {
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    const auto t = std::chrono::steady_clock::now();
    EXPECT_EQ(names.lookup_name("never", milliseconds(200), value, why), Status::timeout);
    const auto took = std::chrono::steady_clock::now() - t;
    EXPECT_GE(took, milliseconds(200));
    EXPECT_LT(took, milliseconds(2000));
    EXPECT_NE(why.find("within 200 ms"), std::string::npos) << why;
}

TEST_F(DirectoryNamesTest, ALookupThatWaitsSeesALatePublisher) {
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    ASSERT_TRUE(NameDirectory(dir_).open(why)) << why;
    const pid_t kid = ::fork();
    if (kid == 0) {
        std::this_thread::sleep_for(milliseconds(150));  // what is tested: the wait
        DirectoryNames late(dir_, "child-job", 0);
        std::string w;
        late.publish_name("late", "late-address", w);
        for (;;) ::pause();
    }
    const auto t = std::chrono::steady_clock::now();
    EXPECT_EQ(names.lookup_name("late", milliseconds(10000), value, why), Status::success) << why;
    EXPECT_LT(std::chrono::steady_clock::now() - t, milliseconds(5000));
    EXPECT_EQ(value, "late-address");
    kill_and_reap(kid);
}

// --- what the directory refuses ------------------------------------------------------

TEST_F(DirectoryNamesTest, ASymbolicLinkIsRefused) {
    fs::create_directory(base_ + "/real");
    fs::permissions(base_ + "/real", fs::perms::owner_all);
    fs::create_directory_symlink(base_ + "/real", dir_);
    DirectoryNames names(dir_, "job-a", 0);
    std::string why;
    EXPECT_EQ(names.publish_name("n", "v", why), Status::error);
    EXPECT_NE(why.find("is a symbolic link"), std::string::npos) << why;
    EXPECT_NE(why.find("runtime_names_dir"), std::string::npos) << "says what to do: " << why;
    EXPECT_TRUE(fs::is_empty(base_ + "/real"));
}

TEST_F(DirectoryNamesTest, ADirectoryOpenToOthersIsRefused) {
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    EXPECT_EQ(names.lookup_name("n", milliseconds(0), value, why), Status::error);
    EXPECT_NE(why.find("has mode 0755, not 0700"), std::string::npos) << why;
}

TEST_F(DirectoryNamesTest, AFileIsRefused) {
    std::ofstream(dir_) << "not a directory";
    DirectoryNames names(dir_, "job-a", 0);
    std::string why;
    EXPECT_EQ(names.publish_name("n", "v", why), Status::error);
    EXPECT_NE(why.find("is not a directory"), std::string::npos) << why;
}

TEST_F(DirectoryNamesTest, AnotherUsersDirectoryIsRefused) {
    if (::getuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
    ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
    ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
    DirectoryNames names(dir_, "job-a", 0);
    std::string why;
    EXPECT_EQ(names.publish_name("n", "v", why), Status::error);
    EXPECT_NE(why.find("belongs to uid 65534, not to this user"), std::string::npos) << why;
}

// --- entries that are not entries ----------------------------------------------------

TEST_F(DirectoryNamesTest, ForgedOrOversizedEntriesAreIgnoredAndRemoved) {
    DirectoryNames names(dir_, "job-a", 0);
    std::string why, value;
    ASSERT_EQ(names.publish_name("probe", "v", why), Status::success) << why;  // makes the dir
    const std::string mark = process_mark(::getpid());
    const auto entry = [&](const std::string& name) { return dir_ + "/" + name_file(name); };
    // Too big: a live owner, but over the bound.
    std::ofstream(entry("big")) << mark << "\njob\n0\nnode\nprocess\n"
                                << std::string(NameDirectory::max_entry, 'a');
    // Malformed header lines.
    std::ofstream(entry("garbage")) << "hello\nworld\n";
    std::ofstream(entry("bad-rank")) << mark << "\njob\n-1\nnode\nprocess\nvalue";
    // A link to an entry elsewhere is not followed.
    std::ofstream(base_ + "/elsewhere") << mark << "\njob\n0\nnode\nprocess\nplanted";
    fs::create_symlink(base_ + "/elsewhere", entry("linked"));
    for (const std::string name : {"big", "garbage", "bad-rank", "linked"}) {
        EXPECT_EQ(names.lookup_name(name, milliseconds(0), value, why), Status::not_found) << name;
        EXPECT_FALSE(fs::exists(fs::symlink_status(entry(name)))) << name << " is left";
        EXPECT_EQ(names.publish_name(name, "mine", why), Status::success) << why;
    }
    EXPECT_TRUE(fs::exists(base_ + "/elsewhere"));
    // A FIFO does not hang the reader.
    ASSERT_EQ(::mkfifo(entry("fifo").c_str(), 0600), 0);
    EXPECT_EQ(names.lookup_name("fifo", milliseconds(0), value, why), Status::not_found);
}

// --- the choice ----------------------------------------------------------------------

// A launcher whose PMIx server keeps no names (as Slurm's srun).
class NamelessLauncher final : public RuntimeBase, public NameService {
  public:
    NamelessLauncher() { id_.job_id = "nameless"; }
    bool is_singleton() const noexcept override { return false; }
    Status modex_send(std::string_view, std::span<const std::byte>) override {
        return Status::success;
    }
    Status modex_recv(Rank, std::string_view, std::vector<std::byte>&) override {
        return Status::not_found;
    }
    Status fence() override { return Status::success; }
    Status publish_name(std::string_view, std::string_view, std::string& why) override {
        ++asked;
        why = "the launcher keeps no names";
        return Status::not_supported;
    }
    Status lookup_name(std::string_view, milliseconds, std::string&, std::string& why) override {
        ++asked;
        why = "the launcher keeps no names";
        return Status::not_supported;
    }
    Status unpublish_name(std::string_view, std::string& why) override {
        ++asked;
        why = "the launcher keeps no names";
        return Status::not_supported;
    }
    int asked = 0;
};

TEST_F(DirectoryNamesTest, ALauncherWithoutNamesLeavesThemToTheDirectory) {
    register_params();
    params::registry().set("runtime_names_dir", dir_, params::Source{params::Origin::api});
    NamelessLauncher launcher;
    NameChoice choice(launcher);
    std::string why, value, which;
    EXPECT_EQ(choice.publish_name("via-choice", "v", why), Status::success) << why;
    EXPECT_EQ(launcher.asked, 1);
    EXPECT_TRUE(choice.changed(which));
    EXPECT_NE(which.find("name directory " + dir_), std::string::npos) << which;
    EXPECT_NE(which.find("keeps no names"), std::string::npos) << which;
    EXPECT_FALSE(choice.changed(which));
    EXPECT_EQ(choice.lookup_name("via-choice", milliseconds(0), value, why), Status::success);
    EXPECT_EQ(choice.unpublish_name("via-choice", why), Status::success) << why;
    EXPECT_EQ(launcher.asked, 1) << "the launcher is asked once";
    params::registry().set("runtime_names_dir", "", params::Source{params::Origin::api});
}

}  // namespace
