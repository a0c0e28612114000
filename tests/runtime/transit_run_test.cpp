// transit_run from the outside: real processes, real signals, real exit codes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/fixtures/posix_regex.hpp"

namespace {

namespace fs = std::filesystem;
using transit::test::Regex;
using Clock = std::chrono::steady_clock;

struct Result {
    int status = -1;  // exit status, or 128+signal
    std::string out;
    std::string err;
    double seconds = 0;
    bool overran = false;  // killed for running past wait()'s limit
};

// A started transit_run (or any program), with its stdout and stderr captured.
class Process {
  public:
    // `in_child` runs in the child just before exec (e.g. to change user).
    explicit Process(const std::vector<std::string>& argv,
                     const std::vector<std::string>& unset_env = {},
                     const std::function<void()>& in_child = {}) {
        int out[2], err[2];
        if (::pipe(out) != 0 || ::pipe(err) != 0) throw std::runtime_error("pipe");
        start_ = Clock::now();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::dup2(out[1], 1);
            ::dup2(err[1], 2);
            ::close(out[0]), ::close(out[1]), ::close(err[0]), ::close(err[1]);
            for (const std::string& name : unset_env) ::unsetenv(name.c_str());
            if (in_child) in_child();
            std::vector<char*> args;
            for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        ::close(out[1]);
        ::close(err[1]);
        out_ = out[0];
        err_ = err[0];
    }
    ~Process() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }

    // Waits for the end of the program, or kills it once it has run `limit`
    // seconds (0: no limit).
    Result wait(double limit = 0) {
        Result r;
        std::vector<pollfd> fds{{out_, POLLIN, 0}, {err_, POLLIN, 0}};
        std::string* sinks[] = {&r.out, &r.err};
        const auto until = start_ + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(limit));
        int open = 2;
        while (open > 0) {
            int timeout = -1;
            if (limit > 0 && !r.overran) {
                const auto left =
                    std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
                if (left <= 0) {
                    ::kill(pid_, SIGKILL);
                    r.overran = true;
                } else {
                    timeout = static_cast<int>(left);
                }
            }
            const int ready = ::poll(fds.data(), fds.size(), timeout);
            if (ready < 0) break;
            if (ready == 0) continue;
            for (int i = 0; i < 2; ++i) {
                if (fds[i].fd < 0 || !fds[i].revents) continue;
                char buf[4096];
                const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
                if (n > 0) {
                    sinks[i]->append(buf, n);
                } else {
                    ::close(fds[i].fd);
                    fds[i].fd = -1;
                    --open;
                }
            }
        }
        int status = 0;
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        r.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return r;
    }

  private:
    pid_t pid_ = -1;
    int out_ = -1, err_ = -1;
    Clock::time_point start_;
};

Result run(std::vector<std::string> args) {
    args.insert(args.begin(), TRANSIT_RUN_PATH);
    return Process(args).wait();
}

// A fresh directory for the ranks' pid files.
class PidDir {
  public:
    PidDir() {
        char tmpl[] = "/tmp/transit-run-test-XXXXXX";
        path_ = ::mkdtemp(tmpl);
    }
    ~PidDir() { fs::remove_all(path_); }
    const std::string& path() const { return path_; }

    std::vector<pid_t> pids() const {
        std::vector<pid_t> out;
        for (const auto& e : fs::directory_iterator(path_)) {
            if (e.path().filename().string().starts_with(".")) continue;
            std::ifstream in(e.path());
            pid_t pid = 0;
            if (in >> pid) out.push_back(pid);
        }
        return out;
    }
    // Waits until `n` pid files exist.
    bool wait_for(std::size_t n, double seconds = 10) const {
        const auto until = Clock::now() + std::chrono::duration<double>(seconds);
        while (Clock::now() < until) {
            if (pids().size() >= n) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

  private:
    std::string path_;
};

// True while `pid` exists and is not a zombie.
bool alive(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    if (!std::getline(in, stat)) return false;
    const std::size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

void expect_all_gone(const std::vector<pid_t>& pids) {
    for (pid_t pid : pids) EXPECT_FALSE(alive(pid)) << "pid " << pid << " was left behind";
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

const std::string behaviour = RANK_BEHAVIOUR_PATH;

TEST(TransitRun, FailingRankStatusIsTheJobStatus) {
    PidDir dir;
    const Result r = run({"-n", "3", behaviour, "sleep-on", dir.path(), "60", "1", "3"});
    EXPECT_EQ(r.status, 3) << r.err;
    EXPECT_LT(r.seconds, 2.0);
    EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
    EXPECT_EQ(dir.pids().size(), 3u);
    expect_all_gone(dir.pids());
}

TEST(TransitRun, RankKilledBySignalGives128PlusSignal) {
    const Result r = run({"-n", "2", behaviour, "kill-self", std::to_string(SIGKILL)});
    EXPECT_EQ(r.status, 128 + SIGKILL) << r.err;
    EXPECT_NE(r.err.find("SIGKILL"), std::string::npos) << r.err;
}

TEST(TransitRun, SuccessfulJobExitsZero) {
    const Result r = run({"-n", "3", behaviour, "args", "x"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;
}

TEST(TransitRun, TimeoutEndsASleepingJob) {
    PidDir dir;
    const Result r = run({"--timeout", "1", "-n", "2", behaviour, "sleep-on", dir.path(), "60"});
    EXPECT_EQ(r.status, 124) << r.err;
    EXPECT_GE(r.seconds, 0.9);
    EXPECT_LT(r.seconds, 3.0);
    EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
    expect_all_gone(dir.pids());
}

TEST(TransitRun, RanksThatIgnoreSigtermAreKilled) {
    PidDir dir;
    const Result r = run({"--timeout", "1", "-n", "2", behaviour, "ignore-term", dir.path()});
    EXPECT_EQ(r.status, 124) << r.err;
    EXPECT_LT(r.seconds, 4.0);
    EXPECT_EQ(dir.pids().size(), 2u);
    expect_all_gone(dir.pids());
}

void expect_signal_ends_job(int sig) {
    PidDir dir;
    Process p({TRANSIT_RUN_PATH, "-n", "3", behaviour, "sleep-on", dir.path(), "60"});
    ASSERT_TRUE(dir.wait_for(3)) << "the ranks did not start";
    const std::vector<pid_t> pids = dir.pids();
    ::kill(p.pid(), sig);
    const Result r = p.wait();
    EXPECT_EQ(r.status, 128 + sig) << r.err;
    expect_all_gone(pids);
}

TEST(TransitRun, SigtermEndsEveryRank) {
    expect_signal_ends_job(SIGTERM);
}
TEST(TransitRun, SigintEndsEveryRank) {
    expect_signal_ends_job(SIGINT);
}

TEST(TransitRun, BadArgumentsExitTwo) {
    const std::vector<std::vector<std::string>> cases = {
        {},
        {"true"},
        {"-n", "2"},
        {"-n", "0", "true"},
        {"-n", "-1", "true"},
        {"-n", "two", "true"},
        {"-n", "2", "--no-such-option", "true"},
        {"--no-such-option", "-n", "2", "true"},
        {"-n", "2", "--bind-to", "socket", "true"},
        {"-n", "2", "--timeout", "0", "true"},
        {"-n", "2", "--timeout", "soon", "true"},
        {"-n", "2", "--mca", "bad-name!", "1", "true"},
        {"-n", "2", "/no/such/program"},
        {"-n", "2", "no-such-program-in-path-xyz"},
    };
    for (const auto& args : cases) {
        const Result r = run(args);
        std::string joined;
        for (const auto& a : args) joined += a + " ";
        EXPECT_EQ(r.status, 2) << "transit_run " << joined << "\n" << r.err;
        EXPECT_NE(r.err.find("transit_run: "), std::string::npos) << joined << ": " << r.err;
    }
}

TEST(TransitRun, TakesMpirunsSpellings) {
    const Result np = run({"-np", "2", behaviour, "env"});
    ASSERT_EQ(np.status, 0) << np.err;
    EXPECT_NE(np.out.find("TRANSIT_SIZE=2\n"), std::string::npos) << np.out;
    // -np after the program belongs to the program.
    const Result after = run({"-n", "1", behaviour, "args", "-np", "3"});
    EXPECT_EQ(after.out, "arg -np\narg 3\n") << after.err;
}

TEST(TransitRun, DashXSetsOrForwardsAVariable) {
    ::setenv("TRANSIT_RUN_TEST_FORWARDED", "kept", 1);
    const Result r = run({"-np", "1", "-x", "TRANSIT_RUN_TEST_SET=a=b", "-x",
                          "TRANSIT_RUN_TEST_FORWARDED", behaviour, "env"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("TRANSIT_RUN_TEST_SET=a=b\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TRANSIT_RUN_TEST_FORWARDED=kept\n"), std::string::npos) << r.out;
    const Result unset = run({"-n", "1", "-x", "TRANSIT_RUN_TEST_NOT_SET_ANYWHERE", behaviour});
    EXPECT_EQ(unset.status, 2);
    EXPECT_NE(unset.err.find("TRANSIT_RUN_TEST_NOT_SET_ANYWHERE is not set"), std::string::npos)
        << unset.err;
}

TEST(TransitRun, ABadTimeoutSaysWhatIsExpectedInOneShortLine) {
    const Result r = run({"-n", "1", "--timeout", "0", "true"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("above 0"), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 200u) << r.err;
}

// mpirun's options for several nodes: transit_run says where to go instead of
// "unknown option", wherever on the command line they stand.
TEST(TransitRun, SeveralNodesPointToMpirunAndSrun) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--host", "a,b", "-n", "2", "true"},
          std::vector<std::string>{"-n", "2", "--hostfile", "hosts", "true"},
          std::vector<std::string>{"-n", "2", "-H", "a:1,b:1", "true"},
          std::vector<std::string>{"--machinefile=hosts", "-n", "2", "true"}}) {
        const Result r = run(args);
        EXPECT_EQ(r.status, 2) << args[0];
        EXPECT_NE(r.err.find("this node only"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("srun --mpi=pmix"), std::string::npos) << r.err;
    }
}

// "transit_run ... 2>&1 | head": the job ends when its reader is gone, with
// SIGPIPE's status, and the launcher does not crash writing its own message.
TEST(TransitRun, AClosedOutputPipeEndsTheJobQuietly) {
    const std::string script = std::string("\"$0\" -n 2 yes 2>&1 | head -3 >/dev/null; ") +
                               "echo \"launcher status ${PIPESTATUS[0]}\"";
    const Result r = Process({"/bin/bash", "-c", script, TRANSIT_RUN_PATH}).wait();
    EXPECT_EQ(r.out, "launcher status 141\n") << r.err;
}

// The same with --tag-output, where the launcher itself writes the ranks'
// lines: once its reader is gone it stops forwarding and ends the job as
// fast (before, it ran on, failing ~9,000 writes a second).  `timeout` ends a
// launcher that would not.
TEST(TransitRun, AClosedOutputPipeEndsATaggedJobQuietly) {
    for (const char* redirect : {"", "2>&1"}) {
        const std::string script = std::string("timeout -s KILL 20 \"$0\" --tag-output -n 2 yes ") +
                                   redirect + " | head -3 >/dev/null; " +
                                   "echo \"launcher status ${PIPESTATUS[0]}\"";
        const Result r = Process({"/bin/bash", "-c", script, TRANSIT_RUN_PATH}).wait(30);
        EXPECT_EQ(r.out, "launcher status 141\n") << redirect << "\n" << r.err;
        EXPECT_LT(r.seconds, 5.0) << redirect;
        EXPECT_EQ(r.err, "") << redirect;
    }
}

// Without a stdout at all, the ranks' lines are dropped and the job runs to
// its end, as the ranks themselves would writing to a closed descriptor.
TEST(TransitRun, AClosedStdoutDropsTaggedLinesAndTheJobRunsOn) {
    const Result r =
        Process({"/bin/bash", "-c", "\"$0\" --tag-output -n 2 sh -c 'echo out; echo err >&2' >&-",
                 TRANSIT_RUN_PATH})
            .wait(30);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("[0] err\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[1] err\n"), std::string::npos) << r.err;
}

TEST(TransitRun, HelpExitsZero) {
    const Result r = run({"--help"});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("--tag-output"), std::string::npos);
}

TEST(TransitRun, ProgramArgumentsPassUntouched) {
    const Result r = run({"-n", "1", behaviour, "args", "--mca", "x", "-n", "5", "--", "a b", ""});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "arg --mca\narg x\narg -n\narg 5\narg --\narg a b\narg \n");
    const Result sep = run({"-n", "1", "--", behaviour, "args", "--"});
    EXPECT_EQ(sep.status, 0) << sep.err;
    EXPECT_EQ(sep.out, "arg --\n");
}

TEST(TransitRun, EnvironmentOfARank) {
    const Result r = run({"-n", "2", "--mca", "btl", "self,vader", "--mca", "btl_tcp_if_include",
                          "lo", behaviour, "env"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("TRANSIT_MCA_btl=self,vader\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TRANSIT_MCA_btl_tcp_if_include=lo\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TRANSIT_RANK=0\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TRANSIT_RANK=1\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TRANSIT_SIZE=2\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("TRANSIT_JOB_ID=trun-"), std::string::npos) << r.out;
    // The PMIx namespace is not the job id, which other users can see.
    EXPECT_TRUE(Regex("PMIX_NAMESPACE=transit-[0-9a-f]{32}\n").search(r.out)) << r.out;
}

TEST(TransitRun, TagOutputPrefixesEveryLine) {
    const Result r = run({"--tag-output", "-n", "3", behaviour, "partial"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    for (int rank = 0; rank < 3; ++rank) {
        const std::string tag = "[" + std::to_string(rank) + "] ";
        EXPECT_EQ(lines.count(tag + "first line"), 1u) << r.out;
        EXPECT_EQ(lines.count(tag + "no newline"), 1u) << r.out;
    }
    EXPECT_EQ(lines.size(), 6u) << r.out;
}

TEST(TransitRun, TagOutputKeepsStderrApart) {
    const Result r = run({"--tag-output", "-n", "2", "/bin/sh", "-c", "echo out; echo err >&2"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("[0] out\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[1] out\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("[0] err\n"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("err"), std::string::npos) << r.out;
}

TEST(TransitRun, RemovesTheJobsFiles) {
    const Result r = run({"-n", "2", behaviour, "files"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::set<std::string> shm, tmpdirs;
    for (const std::string& l : lines_of(r.out)) {
        if (l.starts_with("shm ")) shm.insert(l.substr(4));
        if (l.starts_with("tmpdir ")) tmpdirs.insert(l.substr(7));
    }
    ASSERT_EQ(shm.size(), 2u) << r.out;
    ASSERT_EQ(tmpdirs.size(), 1u) << r.out;
    for (const std::string& f : shm) EXPECT_FALSE(fs::exists(f)) << f;
    EXPECT_FALSE(fs::exists(*tmpdirs.begin())) << *tmpdirs.begin();
}

// libfabric's shm regions of a rank killed with its endpoint open, not those
// made under its pid after it ended (by a process that got the pid again).
TEST(TransitRun, RemovesTheShmRegionsOfAKilledRankOnly) {
    const Result r = run({"--keep-going", "-n", "2", behaviour, "shm-debris"});
    EXPECT_EQ(r.status, 128 + SIGKILL) << r.err;
    std::string region, later;
    for (const std::string& l : lines_of(r.out)) {
        if (l.starts_with("region ")) region = l.substr(7);
        if (l.starts_with("later ")) later = l.substr(6);
    }
    ASSERT_FALSE(region.empty()) << r.out;
    ASSERT_FALSE(later.empty()) << r.out << r.err;
    EXPECT_FALSE(fs::exists(region)) << region << " was left behind";
    EXPECT_TRUE(fs::exists(later)) << later << ", made after the rank ended, was removed";
    std::error_code ec;
    fs::remove(region, ec);
    fs::remove(later, ec);
}

TEST(TransitRun, LeavesNoOrphanBehind) {
    PidDir dir;
    const Result r = run({"-n", "2", behaviour, "orphan", dir.path()});
    EXPECT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(dir.pids().size(), 2u);
    expect_all_gone(dir.pids());
}

TEST(TransitRun, RankLeavingWithoutFinalizeEndsTheJob) {
    const Result r = run({"-n", "3", behaviour, "no-finalize"});
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_LT(r.seconds, 5.0);
    EXPECT_NE(r.err.find("without closing"), std::string::npos) << r.err;
}

TEST(TransitRun, AbortGivesItsStatus) {
    const Result r = run({"-n", "2", behaviour, "abort", "7"});
    EXPECT_EQ(r.status, 7) << r.err;
    EXPECT_LT(r.seconds, 5.0);
    EXPECT_NE(r.err.find("deliberate abort"), std::string::npos) << r.err;
}

// rank -> secret, from "rank R size N singleton S job J secret X" lines.
std::map<std::string, std::string> secrets_of(const Result& r, std::string* job = nullptr) {
    std::map<std::string, std::string> out;
    const Regex line(
        "rank ([0-9]+) size ([0-9]+) singleton ([0-9]) job ([^[:space:]]+) secret ([0-9a-f]{32})");
    for (const std::string& l : lines_of(r.out)) {
        std::vector<std::string> m;
        if (!line.match(l, &m)) continue;
        out[m[1]] = m[5];
        if (job) *job = m[4];
    }
    return out;
}

TEST(TransitRun, JobSecretIsSharedWithinAJobAndNotAcrossJobs) {
    const Result a = run({"-n", "3", behaviour, "secret"});
    const Result b = run({"-n", "3", behaviour, "secret"});
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_EQ(b.status, 0) << b.err;
    std::string job_a, job_b;
    const auto sa = secrets_of(a, &job_a), sb = secrets_of(b, &job_b);
    ASSERT_EQ(sa.size(), 3u) << a.out;
    ASSERT_EQ(sb.size(), 3u) << b.out;
    for (const auto& [rank, s] : sa) EXPECT_EQ(s, sa.at("0")) << "rank " << rank;
    for (const auto& [rank, s] : sb) EXPECT_EQ(s, sb.at("0")) << "rank " << rank;
    EXPECT_NE(sa.at("0"), sb.at("0"));
    EXPECT_NE(job_a, job_b);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> lines_of_file(const std::string& path) {
    return lines_of(read_file(path));
}

// How often `what` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size())
        ++n;
    return n;
}

// A second local user for the test's lifetime (created with useradd, removed
// with userdel).
class OtherUser {
  public:
    OtherUser() : name_("transit-x" + std::to_string(::getpid())) {
        const std::string add = "useradd -M -N -s /usr/sbin/nologin " + name_ + " 2>&1";
        if (std::system(add.c_str()) != 0) return;
        if (const passwd* pw = ::getpwnam(name_.c_str())) {
            uid_ = pw->pw_uid;
            gid_ = pw->pw_gid;
        }
    }
    ~OtherUser() {
        if (uid_ != 0) [[maybe_unused]]
            int rc = std::system(("userdel " + name_ + " 2>/dev/null").c_str());
    }
    bool made() const { return uid_ != 0; }
    // In a forked child: becomes this user for good.
    void become() const {
        if (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0)
            ::_exit(126);
    }

  private:
    std::string name_;
    uid_t uid_ = 0;
    gid_t gid_ = 0;
};

// `argv` run as `stranger` with the variables `env` (after removing `unset`),
// claiming the job owner's user and group ids to PMIx (fake_uid preloaded).
Process intruder(const OtherUser& stranger, const std::vector<std::string>& argv,
                 const std::vector<std::string>& env, const std::vector<std::string>& unset = {}) {
    // Under AddressSanitizer the preloaded library comes before its runtime,
    // and a stranger that drops its PMIx connection leaks by design.
    const char* asan = std::getenv("ASAN_OPTIONS");
    const std::string asan_options =
        std::string(asan ? asan : "") + ":verify_asan_link_order=0:detect_leaks=0";
    return Process(argv, unset, [&] {
        for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
        ::setenv("ASAN_OPTIONS", asan_options.c_str(), 1);
        ::setenv("TRANSIT_FAKE_UID", std::to_string(::getuid()).c_str(), 1);
        ::setenv("TRANSIT_FAKE_GID", std::to_string(::getgid()).c_str(), 1);
        ::setenv("LD_PRELOAD", FAKE_UID_PATH, 1);
        stranger.become();
    });
}

// Another local user, who can see the job (ps, ss, /tmp) and whose PMIx
// client claims to be the job's owner, gets neither the secret nor anything
// that holds it: the launcher's PMIx server refuses it (it could otherwise
// read the job's data and publish some as a rank), the ranks' /proc entries
// (inherited descriptor, environment, memory) and the job directory are
// closed to it.  The job runs on undisturbed.
TEST(TransitRun, AnotherUserCannotObtainTheSecret) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a second user";
    OtherUser stranger;
    ASSERT_TRUE(stranger.made()) << "useradd failed";
    PidDir dir;
    Process job({TRANSIT_RUN_PATH, "-n", "2", behaviour, "hold-secret", dir.path()});
    ASSERT_TRUE(dir.wait_for(2)) << "the ranks did not start";
    std::vector<std::string> args{JOB_INTRUDER_PATH};
    for (pid_t pid : dir.pids()) args.push_back(std::to_string(pid));
    const std::vector<std::string> env = lines_of_file(dir.path() + "/.env.1");
    ASSERT_FALSE(env.empty());
    auto intrude = [&] {
        // The intruder gives up on PMIx after 5 s (exit status 3) by itself.
        return intruder(stranger, args, env).wait(10);
    };
    // Three times: each refusal must leave the server as it was.
    std::vector<Result> tries;
    for (int i = 0; i < 3; ++i) tries.push_back(intrude());
    std::ofstream(dir.path() + "/release").close();
    const Result r = job.wait(30);
    for (std::size_t i = 0; i < tries.size(); ++i) {
        const Result& tried = tries[i];
        ASSERT_FALSE(tried.overran)
            << "attempt " << i + 1 << ": the stranger was killed after 10 s:\n"
            << tried.out << tried.err;
        ASSERT_NE(tried.status, 3)
            << "attempt " << i + 1 << ": the launcher left a refused PMIx client waiting:\n"
            << tried.out << tried.err;
        ASSERT_EQ(tried.status, 0) << "attempt " << i + 1 << ":\n" << tried.out << tried.err;
    }
    ASSERT_FALSE(r.overran) << "the job did not end within 30 s:\n" << r.err;
    ASSERT_EQ(r.status, 0) << r.err;
    const auto secrets = secrets_of(r);
    ASSERT_EQ(secrets.size(), 2u) << r.out;
    const std::string secret = secrets.at("0");
    // The attempts were made; the launcher saw through the claimed user id.
    EXPECT_EQ(count_of(r.err, "refused a PMIx connection from user"), tries.size()) << r.err;
    for (const Result& tried : tries) {
        EXPECT_NE(tried.out.find("pmix refused"), std::string::npos) << tried.out << tried.err;
        EXPECT_NE(tried.out.find("fd refused"), std::string::npos) << tried.out;
        EXPECT_EQ(tried.out.find(secret), std::string::npos) << "the stranger read the secret:\n"
                                                             << tried.out;
    }
}

// What another user learns of a running job from /tmp, ps and ss: the job id
// and the PMIx server's address.  PMIx's other variables are the same in every
// job.  The rest of a rank's environment is closed to it.
std::vector<std::string> visible_environment(const std::vector<std::string>& env,
                                             const std::string& rank) {
    std::string job;
    for (const std::string& e : env)
        if (e.starts_with("TRANSIT_JOB_ID=")) job = e.substr(15);
    std::vector<std::string> out;
    for (const std::string& e : env) {
        if (!e.starts_with("PMIX_")) continue;
        if (e.starts_with("PMIX_NAMESPACE="))
            out.push_back("PMIX_NAMESPACE=" + job);
        else if (e.starts_with("PMIX_RANK="))
            out.push_back("PMIX_RANK=" + rank);
        else
            out.push_back(e);
    }
    return out;
}

// Another user claims to be rank 1 of a running job, with the job owner's
// user id and everything it can see of the job: the job's fences must not
// report rank 1 lost.
TEST(TransitRun, AStrangerClaimingARankCannotFailTheJob) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a second user";
    OtherUser stranger;
    ASSERT_TRUE(stranger.made()) << "useradd failed";
    PidDir dir;
    Process job({TRANSIT_RUN_PATH, "-n", "2", behaviour, "fence-when-released", dir.path()});
    ASSERT_TRUE(dir.wait_for(2)) << "the ranks did not start";
    const std::vector<std::string> env =
        visible_environment(lines_of_file(dir.path() + "/.env.1"), "1");
    ASSERT_FALSE(env.empty());
    const Result tried =
        intruder(stranger, {JOB_INTRUDER_PATH}, env,
                 {"PMIX_NAMESPACE", "PMIX_RANK", "TRANSIT_JOB_SECRET_FD", "TRANSIT_JOB_TMPDIR"})
            .wait(10);
    ASSERT_FALSE(tried.overran) << tried.out << tried.err;
    EXPECT_EQ(tried.out.find("pmix connected"), std::string::npos) << tried.out;
    std::ofstream(dir.path() + "/release").close();
    const Result r = job.wait(30);
    ASSERT_FALSE(r.overran) << "the job did not end within 30 s:\n" << r.err;
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    EXPECT_EQ(lines.count("fence success"), 4u) << r.out << r.err;
}

// The port of the PMIx server of the job whose ranks left their variables in
// `dir`; empty if it has no tcp4 address.
std::string pmix_port_of(const PidDir& dir) {
    std::string port;
    for (const std::string& e : lines_of_file(dir.path() + "/.env.0"))
        if (e.starts_with("PMIX_SERVER_URI") && e.find("tcp4://") != std::string::npos)
            port = e.substr(e.rfind(':') + 1);
    return port;
}

// A socket connected to 127.0.0.1:`port`, -1 on failure (for forked children:
// nothing here throws or allocates).
int connect_to_loopback(const std::string& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(port.c_str())));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
}

// Another user who knows everything of a starting job (its PMIx namespace
// too) claims rank 2 `claims` times, each claim refused at once, while the
// ranks run `mode` (init-when-released: before they connect to the server;
// fence-when-released: connected, before their fences): the real ranks start,
// fence and finish, and each refusal is logged.  (The PMIx library used to
// take a refused claim as one more connection of rank 2, with the stranger's
// way of storing the job's data: the ranks' fences then failed, or hung.)
void expect_claims_harmless(const std::string& mode, int claims, std::size_t fences_per_rank) {
    OtherUser stranger;
    ASSERT_TRUE(stranger.made()) << "useradd failed";
    PidDir dir;
    Process job({TRANSIT_RUN_PATH, "-n", "3", behaviour, mode, dir.path()});
    ASSERT_TRUE(dir.wait_for(3)) << "the ranks did not start";
    const std::vector<std::string> env = lines_of_file(dir.path() + "/.env.2");
    ASSERT_FALSE(env.empty());
    for (int i = 0; i < claims; ++i) {
        const Result tried = intruder(stranger, {JOB_INTRUDER_PATH}, env).wait(10);
        ASSERT_FALSE(tried.overran) << "claim " << i + 1 << ":\n" << tried.out << tried.err;
        ASSERT_EQ(tried.status, 0) << "claim " << i + 1 << ":\n" << tried.out << tried.err;
        EXPECT_NE(tried.out.find("pmix refused"), std::string::npos) << "claim " << i + 1 << ":\n"
                                                                     << tried.out;
    }
    std::ofstream(dir.path() + "/release").close();
    const Result r = job.wait(30);
    ASSERT_FALSE(r.overran) << "the job did not end within 30 s:\n" << r.out << r.err;
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    EXPECT_EQ(lines.count("fence success"), 3 * fences_per_rank) << r.out << r.err;
    EXPECT_EQ(count_of(r.err, "refused a PMIx connection from user"),
              static_cast<std::size_t>(claims))
        << r.err;
}

TEST(TransitRun, StrangersClaimingARankBeforeItConnectsCannotHangIt) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a second user";
    expect_claims_harmless("init-when-released", 3, 1);
}

TEST(TransitRun, StrangersClaimingAConnectedRankCannotHangIt) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a second user";
    expect_claims_harmless("fence-when-released", 3, 2);
}

// Another user's connections to the job's PMIx server, many in a row: each is
// refused and counted, the first five in ten seconds are logged, the rest are
// summed up in one line; the job runs on.
TEST(TransitRun, StrangersConnectionsAreCountedAndLoggedAtABoundedRate) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a second user";
    OtherUser stranger;
    ASSERT_TRUE(stranger.made()) << "useradd failed";
    PidDir dir;
    Process job({TRANSIT_RUN_PATH, "-n", "2", behaviour, "fence-when-released", dir.path()});
    ASSERT_TRUE(dir.wait_for(2)) << "the ranks did not start";
    const std::string port = pmix_port_of(dir);
    ASSERT_FALSE(port.empty()) << "no tcp4 address for the PMIx server";
    // The stranger connects `attempts` times, each time waiting until the
    // server has closed the connection; its exit status is how many it saw
    // closed.
    constexpr int attempts = 20;
    const pid_t child = ::fork();
    if (child == 0) {
        stranger.become();
        int closed = 0;
        for (int i = 0; i < attempts; ++i) {
            const int fd = connect_to_loopback(port);
            if (fd < 0) ::_exit(100);
            pollfd p{fd, POLLIN, 0};
            char c = 0;
            if (::poll(&p, 1, 5000) == 1 && ::read(fd, &c, 1) <= 0) ++closed;
            ::close(fd);
        }
        ::_exit(closed);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    std::ofstream(dir.path() + "/release").close();
    const Result r = job.wait(30);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), attempts) << "connections left open by the server";
    ASSERT_FALSE(r.overran) << r.out << r.err;
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_EQ(count_of(r.err, "refused a PMIx connection from user"), 5u) << r.err;
    EXPECT_EQ(count_of(r.err, std::to_string(attempts - 5) + " more PMIx connection(s) refused"),
              1u)
        << r.err;
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    EXPECT_EQ(lines.count("fence success"), 4u) << r.out << r.err;
}

// A connection to the launcher's PMIx server that never says anything (or
// stops in the middle of its handshake), made by `connect_as` in a child
// process, held while the ranks start: they must start and fence at once.
void expect_idle_connection_harmless(const std::function<void()>& connect_as,
                                     const std::string& first_bytes) {
    PidDir dir;
    Process job({TRANSIT_RUN_PATH, "-n", "2", behaviour, "init-when-released", dir.path()});
    ASSERT_TRUE(dir.wait_for(2)) << "the ranks did not start";
    const std::string port = pmix_port_of(dir);
    ASSERT_FALSE(port.empty()) << "no tcp4 address for the PMIx server";
    // The idle client: connects, sends `first_bytes`, says so through `ready`
    // and holds on for 30 s.
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t idle = ::fork();
    if (idle == 0) {
        ::close(ready[0]);
        if (connect_as) connect_as();
        const int fd = connect_to_loopback(port);
        if (fd < 0) ::_exit(1);
        if (!first_bytes.empty() && ::write(fd, first_bytes.data(), first_bytes.size()) !=
                                        static_cast<ssize_t>(first_bytes.size()))
            ::_exit(2);
        if (::write(ready[1], "c", 1) != 1) ::_exit(3);
        ::sleep(30);  // kept: the client stays silent; the test kills it
        ::_exit(0);
    }
    ::close(ready[1]);
    pollfd p{ready[0], POLLIN, 0};
    char c = 0;
    const bool connected = ::poll(&p, 1, 10000) == 1 && ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    std::ofstream(dir.path() + "/release").close();
    const Result r = job.wait(30);
    ::kill(idle, SIGKILL);
    ::waitpid(idle, nullptr, 0);
    ASSERT_TRUE(connected) << "the idle client could not connect";
    ASSERT_FALSE(r.overran) << "the job did not end within 30 s:\n" << r.out << r.err;
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_LT(r.seconds, 15.0);
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    EXPECT_EQ(lines.count("fence success"), 2u) << r.out << r.err;
}

TEST(TransitRun, AnIdleConnectionDoesNotStallStartUp) {
    expect_idle_connection_harmless({}, "");
}

TEST(TransitRun, AHalfSentHandshakeDoesNotStallStartUp) {
    expect_idle_connection_harmless({}, std::string("\x01\x00\x00", 3));
}

// The same, from another user: its mere connection must not get the ranks
// refused either.
TEST(TransitRun, AStrangersIdleConnectionDoesNotStallStartUp) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a second user";
    OtherUser stranger;
    ASSERT_TRUE(stranger.made()) << "useradd failed";
    expect_idle_connection_harmless([&] { stranger.become(); }, "");
}

// A rank killed with a POSIX message queue it listed (btl::util::Leftovers):
// the launcher removes the queue once the rank is gone.
TEST(TransitRun, ARankKilledLeavesNoListedObjectBehind) {
    PidDir dir;
    const Result r = run({"-n", "1", behaviour, "leftover", dir.path()});
    EXPECT_EQ(r.status, 128 + SIGKILL) << r.err;
    const std::string queue = read_file(dir.path() + "/.queue.0");
    ASSERT_FALSE(queue.empty()) << r.err;
    const std::string name = queue.substr(0, queue.find('\n'));
    const mqd_t q = ::mq_open(name.c_str(), O_RDONLY);
    if (q != static_cast<mqd_t>(-1)) {
        ::mq_close(q);
        ::mq_unlink(name.c_str());
        FAIL() << "the killed rank's queue " << name << " is still there";
    }
}

// kill -9 of the launcher: its ranks end at once, and the next launcher of the
// user removes the job directory and the ranks' shm regions it left, but
// nothing of a job whose launcher still runs.
TEST(TransitRun, KilledLaunchersDebrisIsRemovedByTheNext) {
    PidDir live_dir, dead_dir;
    Process live({TRANSIT_RUN_PATH, "-n", "1", behaviour, "shm-hold", live_dir.path()});
    Process dead({TRANSIT_RUN_PATH, "-n", "2", behaviour, "shm-hold", dead_dir.path()});
    ASSERT_TRUE(live_dir.wait_for(1)) << "the live job did not start";
    ASSERT_TRUE(dead_dir.wait_for(2)) << "the killed job did not start";
    const std::vector<pid_t> ranks = dead_dir.pids();
    ::kill(dead.pid(), SIGKILL);
    dead.wait();
    const auto until = Clock::now() + std::chrono::seconds(2);
    auto any_alive = [&] {
        for (pid_t pid : ranks)
            if (alive(pid)) return true;
        return false;
    };
    while (any_alive() && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    expect_all_gone(ranks);

    const std::string dead_tmp = lines_of_file(dead_dir.path() + "/.tmpdir").at(0);
    const std::string live_tmp = lines_of_file(live_dir.path() + "/.tmpdir").at(0);
    const std::string live_region = lines_of_file(live_dir.path() + "/.region.0").at(0);
    std::vector<std::string> dead_regions;
    for (int r = 0; r < 2; ++r)
        dead_regions.push_back(
            lines_of_file(dead_dir.path() + "/.region." + std::to_string(r)).at(0));
    ASSERT_TRUE(fs::exists(dead_tmp));  // what the fix is for: nobody removed it
    for (const std::string& f : dead_regions) ASSERT_TRUE(fs::exists(f)) << f;

    const Result next = run({"-n", "1", behaviour, "args"});
    ASSERT_EQ(next.status, 0) << next.err;
    EXPECT_FALSE(fs::exists(dead_tmp)) << dead_tmp << " was left behind";
    for (const std::string& f : dead_regions)
        EXPECT_FALSE(fs::exists(f)) << f << " was left behind";
    EXPECT_TRUE(fs::exists(live_tmp)) << "the live job's directory was removed";
    EXPECT_TRUE(fs::exists(live_region)) << "the live job's region was removed";
    EXPECT_TRUE(alive(live_dir.pids().at(0)));
    ::kill(live.pid(), SIGTERM);  // it cleans up after itself
    EXPECT_EQ(live.wait().status, 128 + SIGTERM);
    EXPECT_FALSE(fs::exists(live_region));
    std::error_code ec;
    for (const std::string& f : dead_regions) fs::remove(f, ec);
    fs::remove_all(dead_tmp, ec);
}

TEST(TransitRun, ProgramWithoutLauncherIsASingleton) {
    Process p({behaviour, "secret"}, {"PMIX_NAMESPACE", "PMIX_SERVER_URI41", "PMIX_SERVER_URI4",
                                      "PMIX_SERVER_URI3", "PMIX_SERVER_URI2", "PMIX_SERVER_URI21"});
    const Result r = p.wait();
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("rank 0 size 1 singleton 1 job singleton-"), std::string::npos) << r.out;
}

TEST(TransitRun, FenceReportsARankThatDied) {
    const Result r =
        run({"--timeout", "60", "--keep-going", "-n", "3", behaviour, "fence-after-death"});
    EXPECT_EQ(r.status, 5) << r.err;
    EXPECT_LT(r.seconds, 10.0);
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    // Two survivors, two fences each: the failure sticks.
    EXPECT_EQ(lines.count("fence peer failed"), 4u) << r.out;
}

// Survivors learn of a loss at different moments; under transit_run a fence
// must not hang on ranks naming different participants.
TEST(TransitRun, FenceCompletesWhenRanksDisagreeOnWhoIsLost) {
    const Result r = run({"--timeout", "20", "-n", "3", behaviour, "fence-with-suspicion"});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    EXPECT_EQ(lines.count("rank 0 fence peer failed"), 1u) << r.out;
    EXPECT_EQ(lines.count("rank 1 fence success"), 1u) << r.out;
    EXPECT_EQ(lines.count("rank 2 fence success"), 1u) << r.out;
}

TEST(TransitRun, FenceTimeoutParameterBoundsTheWait) {
    const Result r =
        run({"--mca", "runtime_fence_timeout", "1", "-n", "3", behaviour, "slow-fence"});
    std::multiset<std::string> lines;
    for (const std::string& l : lines_of(r.out)) lines.insert(l);
    EXPECT_GE(lines.count("fence timeout"), 2u) << r.out << r.err;
    EXPECT_LT(r.seconds, 20.0);  // rank 1 alone takes 3 s + 1 s; no wait of 120 s
}

TEST(TransitRun, BindToCoreGivesEachRankItsOwnCpus) {
    const unsigned cores = std::thread::hardware_concurrency();
    if (cores < 2) GTEST_SKIP() << "needs two CPUs";
    const Result r = run({"--bind-to", "core", "-n", "2", behaviour, "binding"});
    ASSERT_EQ(r.status, 0) << r.err;
    std::map<std::string, std::string> binding;
    const Regex line("rank ([0-9]+) binding ([^[:space:]]+) numa (-?[0-9]+)");
    for (const std::string& l : lines_of(r.out)) {
        std::vector<std::string> m;
        if (line.match(l, &m)) binding[m[1]] = m[2];
    }
    ASSERT_EQ(binding.size(), 2u) << r.out;
    EXPECT_NE(binding["0"], binding["1"]) << r.out;

    const Result none = run({"--bind-to", "none", "-n", "2", behaviour, "binding"});
    ASSERT_EQ(none.status, 0) << none.err;
    std::set<std::string> unbound;
    for (const std::string& l : lines_of(none.out)) {
        std::vector<std::string> m;
        if (line.match(l, &m)) unbound.insert(m[2]);
    }
    EXPECT_EQ(unbound.size(), 1u) << none.out;  // both see the whole machine
}

// More ranks than cores: --bind-to core is refused unless --oversubscribe says
// several ranks may share a core; --report-bindings says where each runs.
TEST(TransitRun, BindingMoreRanksThanCoresMustBeAskedFor) {
    const std::string np = std::to_string(std::thread::hardware_concurrency() + 1);
    const Result refused = run({"--bind-to", "core", "-n", np, behaviour, "binding"});
    EXPECT_EQ(refused.status, 2) << refused.err;
    EXPECT_NE(refused.err.find("--bind-to core: " + np + " ranks, but only"), std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("--oversubscribe"), std::string::npos) << refused.err;

    const Result shared = run({"--bind-to", "core", "--oversubscribe", "--report-bindings", "-n",
                               np, behaviour, "binding"});
    ASSERT_EQ(shared.status, 0) << shared.err;
    const Regex bound(R"(transit_run: rank ([0-9]+) bound to core ([0-9]+) \(cpus [0-9,-]+\))");
    std::set<std::string> ranks, cores;
    for (const std::string& l : lines_of(shared.err)) {
        std::vector<std::string> m;
        if (bound.match(l, &m)) ranks.insert(m[1]), cores.insert(m[2]);
    }
    EXPECT_EQ(ranks.size(), std::stoul(np)) << shared.err;
    EXPECT_LT(cores.size(), ranks.size()) << shared.err;  // some core holds two ranks

    const Result unbound = run({"--report-bindings", "-n", np, behaviour, "binding"});
    ASSERT_EQ(unbound.status, 0) << unbound.err;
    EXPECT_NE(unbound.err.find("transit_run: rank 0 not bound"), std::string::npos) << unbound.err;
}

TEST(TransitRun, HostDrivenFenceModeReadsWhatTheHostsFenceBrought) {
    const Result r = run({"-n", "3", behaviour, "host-driven"});
    ASSERT_EQ(r.status, 0) << r.err;
    const Regex line("rank ([0-9]) read 3 of 3 blobs, 3 local peers, secret ([0-9a-f]{32})");
    std::set<std::string> ranks, secrets;
    for (const std::string& l : lines_of(r.out)) {
        std::vector<std::string> m;
        if (!line.match(l, &m)) continue;
        ranks.insert(m[1]);
        secrets.insert(m[2]);
    }
    EXPECT_EQ(ranks.size(), 3u) << r.out;
    EXPECT_EQ(secrets.size(), 1u) << r.out;
}

// Open MPI's mpirun gives no Transit secret: the ranks derive one from the
// job's own random value, the same in every rank, different in every job.
void expect_mpirun_secrets(const std::string& variant) {
    const std::string mpirun = MPIRUN_PATH;
    if (mpirun.empty()) GTEST_SKIP() << "mpirun was not found when configuring";
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    auto job = [&] {
        return Process({mpirun, "-n", "2", "--oversubscribe", "--bind-to", "none", behaviour,
                        "secret", variant})
            .wait();
    };
    const Result a = job(), b = job();
    ASSERT_EQ(a.status, 0) << a.err;
    ASSERT_EQ(b.status, 0) << b.err;
    const auto sa = secrets_of(a), sb = secrets_of(b);
    ASSERT_EQ(sa.size(), 2u) << a.out;
    ASSERT_EQ(sb.size(), 2u) << b.out;
    EXPECT_EQ(sa.at("0"), sa.at("1"));
    EXPECT_EQ(sb.at("0"), sb.at("1"));
    EXPECT_NE(sa.at("0"), sb.at("0"));
}

// Open MPI's mpirun gives no Transit secret: the ranks derive one from the
// job's own random value, the same in every rank, different in every job.
TEST(Mpirun, JobSecretIsSharedWithinAJobAndNotAcrossJobs) {
    expect_mpirun_secrets("launcher");
}

// A launcher with no per-job random value at all: rank 0's seed, spread by
// the first fence.
TEST(Mpirun, JobSecretFromRankZerosSeed) {
    expect_mpirun_secrets("no-launcher-random");
}

TEST(Mpirun, HostDrivenFenceMode) {
    const std::string mpirun = MPIRUN_PATH;
    if (mpirun.empty()) GTEST_SKIP() << "mpirun was not found when configuring";
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const Result r = Process({mpirun, "-n", "2", "--oversubscribe", "--bind-to", "none", behaviour,
                              "host-driven"})
                         .wait();
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("read 2 of 2 blobs, 2 local peers"), std::string::npos) << r.out;
}

// The names ranks publish (raw PMIx): a job's own names stay in the job, the
// others are seen by the user's other transit_run jobs; the server refuses a
// name taken, a value it cannot keep, a foreign or unknown unpublish.  (The
// lines hold PMIx_Error_string's spellings.)
TEST(TransitRun, PublishedNamesAreSeenByTheirScopeAndGuarded) {
    PidDir dir;
    Process job({TRANSIT_RUN_PATH, "--timeout", "60", "-n", "2", behaviour, "names", dir.path()});
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (!fs::exists(dir.path() + "/published") && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(fs::exists(dir.path() + "/published")) << "the job did not publish";
    const std::string launcher = std::to_string(job.pid());
    const Result other = run({"-n", "1", behaviour, "names-other", launcher});
    std::ofstream(dir.path() + "/release").close();
    const Result r = job.wait(30);
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    ASSERT_EQ(other.status, 0) << other.out << other.err;
    for (const char* line :
         {"job SUCCESS", "node SUCCESS", "lookup job: job value", "lookup node: node value",
          "publish taken: DUPLICATE KEY", "publish int: NOT-SUPPORTED",
          "unpublish foreign: NO-PERMISSIONS", "unpublish unknown: NOT-FOUND"})
        EXPECT_NE(r.out.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << r.out;
    for (const char* line : {"other lookup job: NOT-FOUND", "other lookup node: node value",
                             "other unpublish node: NO-PERMISSIONS"})
        EXPECT_NE(other.out.find(std::string(line) + "\n"), std::string::npos) << line << "\n"
                                                                               << other.out;
    // The job is over: its names with it.
    const Result after = run({"-n", "1", behaviour, "names-other", launcher});
    EXPECT_NE(after.out.find("other lookup node: NOT-FOUND"), std::string::npos) << after.out;
}

TEST(TransitRun, PrintJobShowsEveryPeersBlob) {
    const Result r = run({"--tag-output", "-n", "4", PRINT_JOB_PATH});
    ASSERT_EQ(r.status, 0) << r.err;
    for (int me = 0; me < 4; ++me)
        for (int peer = 0; peer < 4; ++peer) {
            const std::string want = "[" + std::to_string(me) + "]   rank " + std::to_string(peer) +
                                     ": \"hello from rank " + std::to_string(peer) + " ";
            EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
        }
}

}  // namespace
