// A rank that misbehaves on request, for the launcher and runtime tests:
//   rank_behaviour <mode> [args...]
// Each rank learns its rank from TRANSIT_RANK (set by transit_run), so the
// modes that need no runtime work with any program-level launcher behaviour.
#include <fcntl.h>
#include <mqueue.h>
#include <pmix.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/job_secret.hpp"
#include "runtime/runtime.hpp"
#include "transit/btl/util/leftovers.hpp"

namespace {

using namespace transit;
using Args = std::vector<std::string>;

int env_rank() {
    const char* r = std::getenv("TRANSIT_RANK");
    return r ? std::atoi(r) : 0;
}

int env_size() {
    const char* n = std::getenv("TRANSIT_SIZE");
    return n ? std::atoi(n) : 1;
}

void sleep_for(double seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// Polls until `path` exists, `seconds` at most; false if it never did.
bool wait_for_file(const std::string& path, double seconds) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    struct stat st {};
    while (::stat(path.c_str(), &st) != 0) {
        if (std::chrono::steady_clock::now() >= give_up) return false;
        sleep_for(0.001);
    }
    return true;
}

void write_pid(const std::string& dir, const std::string& name, pid_t pid) {
    const std::string tmp = fmt::format("{}/.{}", dir, name);
    std::ofstream(tmp) << pid << "\n";
    std::rename(tmp.c_str(), fmt::format("{}/{}", dir, name).c_str());  // appears whole
}

void say(const std::string& line) {
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
}

// sleep-on DIR SECONDS [FAIL_RANK CODE]: records its pid, then sleeps; rank
// FAIL_RANK instead exits with CODE once every rank has recorded its pid (10 s
// at most), so that the launcher has live ranks to end.
int sleep_on(const Args& a) {
    write_pid(a.at(0), fmt::format("rank.{}", env_rank()), ::getpid());
    if (a.size() >= 4 && std::atoi(a[2].c_str()) == env_rank()) {
        for (int r = 0; r < env_size(); ++r)
            if (!wait_for_file(fmt::format("{}/rank.{}", a[0], r), 10)) return 20;
        return std::atoi(a[3].c_str());
    }
    sleep_for(std::atof(a.at(1).c_str()));  // kept: the rank's lifetime, which the launcher ends
    return 0;
}

// ignore-term DIR: survives SIGTERM; only SIGKILL ends it.
int ignore_term(const Args& a) {
    ::signal(SIGTERM, SIG_IGN);
    write_pid(a.at(0), fmt::format("rank.{}", env_rank()), ::getpid());
    sleep_for(60);  // kept: a rank that stays until the launcher kills it
    return 0;
}

// kill-self SIG: dies of a signal.
int kill_self(const Args& a) {
    ::raise(std::atoi(a.at(0).c_str()));
    sleep_for(5);  // kept: not reached, the signal is fatal
    return 0;
}

// orphan DIR: leaves a grandchild in a session of its own, then exits 0.
int orphan(const Args& a) {
    const std::string name = fmt::format("orphan.{}", env_rank());
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::setsid();
        write_pid(a.at(0), name, ::getpid());
        sleep_for(60);  // kept: the orphan lives on until the launcher kills it
        ::_exit(0);
    }
    (void)wait_for_file(a.at(0) + "/" + name, 5);
    return 0;
}

// files: leaves a shared-memory file and a file in the job directory.
int files(const Args&) {
    const char* job = std::getenv("TRANSIT_JOB_ID");
    const char* dir = std::getenv("TRANSIT_JOB_TMPDIR");
    if (!job || !dir) return 10;
    const std::string shm = fmt::format("/dev/shm/transit-{}-test-{}", job, env_rank());
    std::ofstream(shm) << "left behind\n";
    std::ofstream(fmt::format("{}/left-{}", dir, env_rank())) << "left behind\n";
    say(fmt::format("shm {}", shm));
    say(fmt::format("tmpdir {}", dir));
    return 0;
}

// shm-debris: rank 0 leaves a region named as libfabric's shm names them
// (/dev/shm/<pid>:<uid>:0) and is killed; rank 1 waits until the launcher has
// noted rank 0's end and makes one more under rank 0's pid, as a process
// given that pid again would.  Run with --keep-going: the launcher must remove
// the first only.
int shm_debris(const Args&) {
    const char* dir = std::getenv("TRANSIT_JOB_TMPDIR");
    if (!dir) return 10;
    auto rt = rt::open_runtime();
    const std::string pid_file = fmt::format("{}/rank0.pid", dir);
    if (rt->rank() == 0) {
        const std::string region = fmt::format("/dev/shm/{}:{}:0", ::getpid(), ::getuid());
        std::ofstream(region) << "left behind\n";
        say(fmt::format("region {}", region));
        write_pid(dir, "rank0.pid", ::getpid());
        if (!ok(rt->fence())) return 12;
        ::raise(SIGKILL);
    }
    if (!ok(rt->fence())) return 12;  // rank 0's pid file is written
    pid_t pid = 0;
    std::ifstream(pid_file) >> pid;
    if (pid == 0) return 11;
    // The launcher reads the clock when it reaps rank 0, before it tells the
    // survivors that rank 0 is lost: once told, the time of the end is noted.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (rt->lost_count() == 0 && std::chrono::steady_clock::now() < give_up) sleep_for(0.001);
    if (rt->lost_count() == 0) return 13;
    // That clock is the coarse one file times use: a region made one tick
    // later than now is newer than rank 0's end.
    timespec told{};
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME_COARSE, &told);
    do {
        sleep_for(0.001);
        ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
    } while (now.tv_sec == told.tv_sec && now.tv_nsec == told.tv_nsec);
    const std::string later = fmt::format("/dev/shm/{}:{}:9", pid, ::getuid());
    std::ofstream(later) << "made after rank 0 ended\n";
    say(fmt::format("later {}", later));
    return 0;
}

// secret [no-launcher-random]: prints the job secret; with the argument, first
// hides the per-job random value Open MPI gives, so that rank 0's seed is used.
int secret(const Args& a) {
    if (!a.empty() && a[0] == "no-launcher-random")
        for (const char* var :
             {"OMPI_MCA_orte_precondition_transports", "OMPI_MCA_opal_precondition_transports",
              "PMIX_MCA_opal_precondition_transports"})
            ::unsetenv(var);
    auto rt = rt::open_runtime();
    say(fmt::format("rank {} size {} singleton {} job {} secret {}", rt->rank(), rt->size(),
                    rt->is_singleton() ? 1 : 0, rt->job_id(), rt::to_hex(rt->job_secret())));
    return 0;
}

// hold-secret DIR: prints the job secret as `secret` does, leaves its PMIx and
// Transit variables in DIR/.env.<rank> (what a stranger could learn from ps,
// ss and /tmp) and its pid in DIR/rank.<rank>, then waits until DIR/release
// exists (60 s at most).
int hold_secret(const Args& a) {
    auto rt = rt::open_runtime();
    {
        std::ofstream env(fmt::format("{}/.env.{}", a.at(0), rt->rank()));
        for (char** e = environ; *e; ++e)
            if (std::string_view(*e).starts_with("PMIX_") ||
                std::string_view(*e).starts_with("TRANSIT_"))
                env << *e << "\n";
    }
    say(fmt::format("rank {} size {} singleton {} job {} secret {}", rt->rank(), rt->size(),
                    rt->is_singleton() ? 1 : 0, rt->job_id(), rt::to_hex(rt->job_secret())));
    write_pid(a.at(0), fmt::format("rank.{}", rt->rank()), ::getpid());
    (void)wait_for_file(a.at(0) + "/release", 60);
    return 0;
}

// Waits until DIR/release exists (60 s at most).
void wait_for_release(const std::string& dir) {
    (void)wait_for_file(dir + "/release", 60);
}

// A rank about to go into a fence says so with a file in the job's directory
// (outside the runtime, whose fence is what is tested), for a rank that must
// leave while the others wait in it.
void say_fencing(int rank) {
    std::ofstream(fmt::format("{}/fencing.{}", std::getenv("TRANSIT_JOB_TMPDIR"), rank)).close();
}

// Waits until every rank but `me` said it goes into the fence (10 s at most).
// What is left between its word and its call is far shorter than the time the
// launcher takes to notice a rank's end.
bool others_fencing(int me, int size) {
    for (int r = 0; r < size; ++r)
        if (r != me &&
            !wait_for_file(fmt::format("{}/fencing.{}", std::getenv("TRANSIT_JOB_TMPDIR"), r), 10))
            return false;
    return true;
}

// Leaves the PMIx and Transit variables in DIR/.env.<rank>.
void write_env(const std::string& dir, int rank) {
    std::ofstream env(fmt::format("{}/.env.{}", dir, rank));
    for (char** e = environ; *e; ++e)
        if (std::string_view(*e).starts_with("PMIX_") ||
            std::string_view(*e).starts_with("TRANSIT_"))
            env << *e << "\n";
}

// fence-when-released DIR: opens the runtime, leaves its variables and pid in
// DIR as hold-secret does, waits until DIR/release exists, then fences twice
// and prints each result ("fence success"); exit status 5 if one failed.
int fence_when_released(const Args& a) {
    auto rt = rt::open_runtime();
    write_env(a.at(0), static_cast<int>(rt->rank()));
    write_pid(a.at(0), fmt::format("rank.{}", rt->rank()), ::getpid());
    wait_for_release(a.at(0));
    bool all_ok = true;
    for (int i = 0; i < 2; ++i) {
        const Status s = rt->fence();
        all_ok = all_ok && ok(s);
        say(fmt::format("fence {}", to_string(s)));
    }
    return all_ok ? 0 : 5;
}

// init-when-released DIR: leaves its variables and pid in DIR before it opens
// the runtime, waits until DIR/release exists, then opens it, fences and
// prints the result.
int init_when_released(const Args& a) {
    write_env(a.at(0), env_rank());
    write_pid(a.at(0), fmt::format("rank.{}", env_rank()), ::getpid());
    wait_for_release(a.at(0));
    auto rt = rt::open_runtime();
    const Status s = rt->fence();
    say(fmt::format("fence {}", to_string(s)));
    return ok(s) ? 0 : 5;
}

// leftover DIR: makes a POSIX message queue listed with btl::util::Leftovers
// (as a third-party transport would), notes its name in DIR/.queue.<rank>,
// then kills itself (SIGKILL): nothing of its own removes the queue.
int leftover(const Args& a) {
    const std::string queue = fmt::format("/transit-test-rank-{}", ::getpid());
    btl::util::Leftovers list("rank_behaviour");
    list.add(btl::util::LeftoverKind::posix_mq, queue);
    mq_attr attr{};
    attr.mq_maxmsg = 1;
    attr.mq_msgsize = 8;
    const mqd_t q = ::mq_open(queue.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600, &attr);
    if (q == static_cast<mqd_t>(-1)) return 10;
    std::ofstream(fmt::format("{}/.queue.{}", a.at(0), env_rank())) << queue << "\n";
    ::raise(SIGKILL);
    return 11;
}

// shm-hold DIR: makes a region named as libfabric's shm provider names them,
// notes it in DIR/.region.<rank> and the job directory in DIR/.tmpdir, records
// its pid in DIR/rank.<rank>, then sleeps (60 s).
int shm_hold(const Args& a) {
    const char* dir = std::getenv("TRANSIT_JOB_TMPDIR");
    if (!dir) return 10;
    const std::string region = fmt::format("/dev/shm/{}:{}:0", ::getpid(), ::getuid());
    std::ofstream(region) << "in use\n";
    std::ofstream(fmt::format("{}/.region.{}", a.at(0), env_rank())) << region << "\n";
    std::ofstream(fmt::format("{}/.tmpdir", a.at(0))) << dir << "\n";
    write_pid(a.at(0), fmt::format("rank.{}", env_rank()), ::getpid());
    sleep_for(60);  // kept: the region stays in use until the launcher kills the rank
    return 0;
}

int binding(const Args&) {
    auto rt = rt::open_runtime();
    say(fmt::format("rank {} binding {} numa {}", rt->rank(), rt->binding(), rt->numa_node()));
    return 0;
}

int environment(const Args&) {
    std::map<std::string, std::string> vars;
    for (char** e = environ; *e; ++e) {
        const std::string v(*e);
        if (v.starts_with("TRANSIT_") || v.starts_with("PMIX_NAMESPACE") ||
            v.starts_with("PMIX_RANK"))
            vars[v.substr(0, v.find('='))] = v;
    }
    for (const auto& [name, v] : vars) say(v);
    return 0;
}

int args(const Args& a) {
    for (const std::string& s : a) say("arg " + s);
    return 0;
}

// partial: a last line without a newline.
int partial(const Args&) {
    std::fputs("first line\nno newline", stdout);
    std::fflush(stdout);
    return 0;
}

// no-finalize: rank 1 leaves without closing its runtime while the others
// wait in a fence.
int no_finalize(const Args&) {
    if (!std::getenv("TRANSIT_JOB_TMPDIR")) return 10;
    auto rt = rt::open_runtime();
    const int me = static_cast<int>(rt->rank());
    if (me == 1) {
        if (!others_fencing(me, static_cast<int>(rt->size()))) return 11;
        std::_Exit(0);
    }
    say_fencing(me);
    (void)rt->fence();
    sleep_for(30);  // kept: a survivor that stays until the launcher ends the job
    return 0;
}

// abort CODE: rank 0 asks the launcher to abort the job.
int abort_job(const Args& a) {
    pmix_proc_t me;
    if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return 10;
    if (me.rank == 0) PMIx_Abort(std::atoi(a.at(0).c_str()), "deliberate abort", nullptr, 0);
    sleep_for(30);  // kept: the ranks stay until the abort ends them
    return 0;
}

// fence-after-death: rank 1 dies while the others wait in a fence; each
// survivor prints what its fence returned, twice (failure must stick).
int fence_after_death(const Args&) {
    if (!std::getenv("TRANSIT_JOB_TMPDIR")) return 10;
    auto rt = rt::open_runtime();
    const int me = static_cast<int>(rt->rank());
    if (me == 1) {
        if (!others_fencing(me, static_cast<int>(rt->size()))) return 11;
        std::_Exit(5);
    }
    say_fencing(me);
    say(fmt::format("fence {}", to_string(rt->fence())));
    say(fmt::format("fence {}", to_string(rt->fence())));
    return 0;
}

// fence-with-suspicion: rank 0 holds rank 2 lost (as its transports would on a
// broken connection) while ranks 1 and 2 know of no loss, as happens between a
// death and the launcher's event; everyone fences.
int fence_with_suspicion(const Args&) {
    auto rt = rt::open_runtime();
    if (rt->rank() == 0) rt->report_lost(2);
    say(fmt::format("rank {} fence {}", rt->rank(), to_string(rt->fence())));
    return 0;
}

// slow-fence: rank 1 is 3 s late to a fence.
int slow_fence(const Args&) {
    auto rt = rt::open_runtime();
    if (rt->rank() == 1) sleep_for(3);  // kept: the lateness is what is tested
    say(fmt::format("fence {}", to_string(rt->fence())));
    return 0;
}

// host-driven: the runtime as Open MPI's BTL adapter will use it: the host
// (here this program, calling PMIx itself) runs the fence; the runtime's
// fence() only picks up what it brought.
int host_driven(const Args&) {
    auto rt = rt::open_runtime(rt::FenceMode::host_driven);
    const std::string mine = fmt::format("blob of {}", rt->rank());
    if (!ok(rt->modex_send(
            "test.host_driven",
            std::span(reinterpret_cast<const std::byte*>(mine.data()), mine.size()))))
        return 11;
    // The host fences over its own namespace, which need not be the job id.
    pmix_proc_t me;
    if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return 14;
    pmix_proc_t all;
    PMIX_PROC_CONSTRUCT(&all);
    PMIX_LOAD_NSPACE(all.nspace, me.nspace);
    all.rank = PMIX_RANK_WILDCARD;
    pmix_info_t collect;
    bool yes = true;
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    if (PMIx_Fence(&all, 1, &collect, 1) != PMIX_SUCCESS) return 12;
    if (rt->fence() != Status::success) return 13;
    unsigned good = 0;
    for (Rank r = 0; r < rt->size(); ++r) {
        std::vector<std::byte> blob;
        if (ok(rt->modex_recv(r, "test.host_driven", blob)) &&
            std::string(reinterpret_cast<const char*>(blob.data()), blob.size()) ==
                fmt::format("blob of {}", r))
            ++good;
    }
    say(fmt::format("rank {} read {} of {} blobs, {} local peers, secret {}", rt->rank(), good,
                    rt->size(), rt->local_size(), rt::to_hex(rt->job_secret())));
    PMIx_Finalize(nullptr, 0);
    return 0;
}

}  // namespace

// --- names (transit_run's PMIx publish/lookup/unpublish, raw PMIx) -----------

pmix_status_t publish_raw(const std::string& key, const pmix_value_t& value,
                          pmix_data_range_t range) {
    pmix_info_t info[2];
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    PMIX_LOAD_KEY(info[0].key, key.c_str());
    PMIx_Value_xfer(&info[0].value, &value);
    PMIx_Info_load(&info[1], PMIX_RANGE, &range, PMIX_DATA_RANGE);
    const pmix_status_t rc = PMIx_Publish(info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    return rc;
}

pmix_status_t publish_string(const std::string& key, const std::string& text,
                             pmix_data_range_t range = PMIX_RANGE_SESSION) {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_STRING;
    v.data.string = const_cast<char*>(text.c_str());  // copied by publish_raw
    return publish_raw(key, v, range);
}

// The value under `key`, or the error's name.
std::string lookup_raw(const std::string& key) {
    pmix_pdata_t d;
    PMIX_PDATA_CONSTRUCT(&d);
    PMIX_LOAD_KEY(d.key, key.c_str());
    const pmix_status_t rc = PMIx_Lookup(&d, 1, nullptr, 0);
    std::string out = rc != PMIX_SUCCESS            ? PMIx_Error_string(rc)
                      : d.value.type == PMIX_STRING ? d.value.data.string
                                                    : "not a string";
    PMIX_PDATA_DESTRUCT(&d);
    return out;
}

std::string unpublish_raw(const std::string& key) {
    std::string k = key;
    char* keys[] = {k.data(), nullptr};
    return PMIx_Error_string(PMIx_Unpublish(keys, nullptr, 0));
}

// names DIR: rank 0 publishes "<launcher pid>.job" for its job (PMIx's
// namespace range) and "<launcher pid>.node" (session range), writes
// DIR/published and waits until DIR/release exists; rank 1 meanwhile tries
// what the launcher must refuse, and prints each answer.
int names(const Args& a) {
    pmix_proc_t me;
    if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return 10;
    const std::string base = std::to_string(::getppid());
    if (me.rank == 0) {
        say(fmt::format("job {}", PMIx_Error_string(publish_string(base + ".job", "job value",
                                                                   PMIX_RANGE_NAMESPACE))));
        say(fmt::format("node {}",
                        PMIx_Error_string(publish_string(base + ".node", "node value"))));
    }
    PMIx_Fence(nullptr, 0, nullptr, 0);
    if (me.rank == 1) {
        say(fmt::format("lookup job: {}", lookup_raw(base + ".job")));
        say(fmt::format("lookup node: {}", lookup_raw(base + ".node")));
        say(fmt::format("publish taken: {}",
                        PMIx_Error_string(publish_string(base + ".node", "mine now"))));
        pmix_value_t number;
        PMIX_VALUE_CONSTRUCT(&number);
        number.type = PMIX_INT;
        number.data.integer = 7;
        say(fmt::format("publish int: {}",
                        PMIx_Error_string(publish_raw(base + ".int", number, PMIX_RANGE_SESSION))));
        say(fmt::format("unpublish foreign: {}", unpublish_raw(base + ".node")));
        say(fmt::format("unpublish unknown: {}", unpublish_raw(base + ".unknown")));
    }
    PMIx_Fence(nullptr, 0, nullptr, 0);
    if (me.rank == 0) {
        std::ofstream(a.at(0) + "/published").close();
        wait_for_release(a.at(0));
    }
    PMIx_Fence(nullptr, 0, nullptr, 0);
    PMIx_Finalize(nullptr, 0);
    return 0;
}

// names-other PID: another job looks up and unpublishes the names of the job
// whose launcher is PID.
int names_other(const Args& a) {
    pmix_proc_t me;
    if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return 10;
    const std::string base = a.at(0);
    say(fmt::format("other lookup job: {}", lookup_raw(base + ".job")));
    say(fmt::format("other lookup node: {}", lookup_raw(base + ".node")));
    say(fmt::format("other unpublish node: {}", unpublish_raw(base + ".node")));
    PMIx_Finalize(nullptr, 0);
    return 0;
}

int main(int argc, char** argv) {
    // One mode a line.
    // clang-format off
    const std::map<std::string, std::function<int(const Args&)>> modes = {
        {"sleep-on", sleep_on},
        {"ignore-term", ignore_term},
        {"kill-self", kill_self},
        {"orphan", orphan},
        {"files", files},
        {"shm-debris", shm_debris},
        {"secret", secret},
        {"hold-secret", hold_secret},
        {"shm-hold", shm_hold},
        {"leftover", leftover},
        {"binding", binding},
        {"env", environment},
        {"args", args},
        {"partial", partial},
        {"no-finalize", no_finalize},
        {"abort", abort_job},
        {"fence-after-death", fence_after_death},
        {"fence-with-suspicion", fence_with_suspicion},
        {"slow-fence", slow_fence},
        {"fence-when-released", fence_when_released},
        {"init-when-released", init_when_released},
        {"host-driven", host_driven},
        {"names", names},
        {"names-other", names_other},
    };
    // clang-format on
    if (argc < 2 || !modes.contains(argv[1])) {
        std::fprintf(stderr, "rank_behaviour: unknown mode\n");
        return 64;
    }
    try {
        return modes.at(argv[1])(Args(argv + 2, argv + argc));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "rank_behaviour %s: %s\n", argv[1], e.what());
        return 65;
    }
}
