#include "launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "debris.hpp"
#include "process_util.hpp"
#include "runtime/job_secret.hpp"
#include "runtime/name_directory.hpp"
#include "transit/btl/util/leftovers.hpp"

extern char** environ;

namespace transit::run {
namespace {

constexpr std::array forwarded_signals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
// Signals that end the job; the others are only passed on.
bool ends_job(int sig) {
    return sig != SIGUSR1 && sig != SIGUSR2;
}

sigset_t handled_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (int sig : forwarded_signals) sigaddset(&set, sig);
    return set;
}

std::string host_name() {
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0) return "localhost";
    return buf.data();
}

// "name (uid N)", or "uid N" for an id with no name.
std::string user_name(uid_t uid) {
    if (const passwd* pw = ::getpwuid(uid)) return fmt::format("{} (uid {})", pw->pw_name, uid);
    return fmt::format("uid {}", uid);
}

std::string signal_name(int sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// Never throws: stderr may be a pipe whose reader is gone ("2>&1 | head"),
// and a launcher that cannot report must still end its job cleanly.
void say(const std::string& text) {
    std::fputs(fmt::format("transit_run: {}\n", text).c_str(), stderr);
}

// Replaces or appends NAME=value.
void set_var(std::vector<std::string>& env, const std::string& entry) {
    const std::size_t eq = entry.find('=');
    const std::string_view name(entry.data(), eq + 1);
    for (std::string& e : env)
        if (std::string_view(e).starts_with(name)) {
            e = entry;
            return;
        }
    env.push_back(entry);
}

void child_fail(const char* what) {
    // Only async-signal-safe calls between fork and exec.
    const char* err = ::strerror(errno);
    [[maybe_unused]] ssize_t n = ::write(2, "transit_run: ", 13);
    n = ::write(2, what, ::strlen(what));
    n = ::write(2, ": ", 2);
    n = ::write(2, err, ::strlen(err));
    n = ::write(2, "\n", 1);
    ::_exit(127);
}

}  // namespace

Launcher::Launcher(Options opt) : opt_(std::move(opt)) {
    program_ = find_program(opt_.command.front());
    if (program_.empty())
        throw std::invalid_argument(
            fmt::format("cannot run '{}': no such executable{}", opt_.command.front(),
                        opt_.command.front().find('/') == std::string::npos ? " in PATH" : ""));
    const rt::Secret tag = rt::random_secret();
    std::uint32_t suffix = 0;
    std::memcpy(&suffix, tag.data(), sizeof suffix);
    // The job id names the job's files ($TMPDIR/transit-<job id>/ and
    // /dev/shm/transit-<job id>-*), so other users see it.  The PMIx namespace
    // is another, unguessable name: the server admits a client claiming any
    // rank of a namespace it knows, and a stranger admitted as a rank of the
    // job, even turned away at once, makes that rank count as lost.
    job_id_ = fmt::format("trun-{}-{:08x}", ::getpid(), suffix);
    nspace_ = "transit-" + rt::to_hex(rt::random_secret());
    hostname_ = host_name();
    ranks_.resize(opt_.np);
}

Launcher::~Launcher() {
    cleanup();
}

// The name directory the ranks would choose without a launcher (the
// parameter runtime_names_dir, as --mca or the environment gives it to them),
// so that they and singletons on the node find each other's names.  A
// parameter file is not read here: set it on the command line or in the
// environment.
std::string Launcher::names_dir() const {
    constexpr std::string_view param = "runtime_names_dir";
    for (auto it = opt_.mca.rbegin(); it != opt_.mca.rend(); ++it)
        if (it->first == param && !it->second.empty()) return it->second;
    const char* env = std::getenv("TRANSIT_MCA_runtime_names_dir");
    if (env && *env) return env;
    return rt::NameDirectory::default_path();
}

void Launcher::prepare_files() {
    const char* env_base = std::getenv("TMPDIR");
    const std::string base = env_base && *env_base ? env_base : "/tmp";
    names_dir_ = names_dir();
    remove_dead_jobs(base);
    tmpdir_ = fmt::format("{}/transit-{}", base, job_id_);
    if (::mkdir(tmpdir_.c_str(), 0700) != 0) {
        const std::string why = std::strerror(errno);
        tmpdir_.clear();
        throw std::runtime_error(fmt::format("cannot create the job directory: {}", why));
    }
    mark_job_dir(tmpdir_);
    secret_fd_ = rt::secret_file(rt::random_secret());
}

std::vector<std::string> Launcher::base_environment() const {
    std::vector<std::string> env;
    for (char** p = environ; *p; ++p) {
        const std::string_view var(*p);
        // An outer launcher's PMIx variables would point our ranks at the wrong
        // server; PMIx's own tunables (PMIX_MCA_*) pass through.
        if (var.starts_with("PMIX_") && !var.starts_with("PMIX_MCA_")) continue;
        env.emplace_back(var);
    }
    for (const std::string& entry : opt_.env) set_var(env, entry);
    for (const auto& [name, value] : opt_.mca) set_var(env, "TRANSIT_MCA_" + name + "=" + value);
    set_var(env, "TRANSIT_JOB_ID=" + job_id_);
    set_var(env, "TRANSIT_JOB_TMPDIR=" + tmpdir_);
    set_var(env, fmt::format("TRANSIT_SIZE={}", opt_.np));
    set_var(env, fmt::format("{}={}", rt::secret_fd_var, secret_fd_));
    return env;
}

pid_t Launcher::spawn(unsigned rank, const std::vector<std::string>& env,
                      const std::optional<cpu_set_t>& cpus, const TaggedOutput::Ends* ends) {
    // Everything the child needs is prepared here: after fork() only
    // async-signal-safe calls are allowed (PMIx runs a thread in this process).
    std::vector<char*> argv;
    for (const std::string& a : opt_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const bool keep_stdin = rank == 0 && !::isatty(0);
    const pid_t parent = ::getpid();
    const pid_t group = pgid_;
    const int secret_fd = secret_fd_;

    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
    if (pid == 0) {
        ::setpgid(0, group);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(127);  // transit_run died meanwhile
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::signal(SIGPIPE, SIG_DFL);
        if (::fcntl(secret_fd, F_SETFD, 0) != 0) child_fail("cannot pass the job secret");
        if (!keep_stdin) {
            const int null = ::open("/dev/null", O_RDONLY);
            if (null < 0 || ::dup2(null, 0) < 0) child_fail("cannot open /dev/null");
        }
        if (ends && (::dup2(ends->out_write, 1) < 0 || ::dup2(ends->err_write, 2) < 0))
            child_fail("cannot redirect the output");
        if (cpus && ::sched_setaffinity(0, sizeof *cpus, &*cpus) != 0)
            child_fail("cannot bind to a core");
        ::execve(program_.c_str(), argv.data(), envp.data());
        child_fail(program_.c_str());
    }
    ::setpgid(pid, group == 0 ? pid : group);  // also in the parent: no race
    return pid;
}

// Decided before anything starts: binding more ranks than cores would have
// polling ranks take turns on a core, so it must be asked for by name.
void Launcher::plan_bindings() {
    bindings_ = core_bindings(opt_.np, opt_.bind_to == BindTo::core, opt_.bind_to == BindTo::none);
    if (opt_.bind_to == BindTo::core && opt_.np > bindings_.cores && bindings_.cores > 0 &&
        !opt_.oversubscribe)
        throw std::invalid_argument(fmt::format(
            "--bind-to core: {} ranks, but only {} core(s) here; add --oversubscribe to bind "
            "several ranks to each core (they take turns), or use --bind-to none",
            opt_.np, bindings_.cores));
    if (!opt_.report_bindings) return;
    for (unsigned r = 0; r < opt_.np; ++r) {
        const std::string where =
            bindings_.sets.empty()
                ? fmt::format("not bound ({} ranks, {} cores; --bind-to core binds)", opt_.np,
                              bindings_.cores)
                : fmt::format("bound to core {} (cpus {})", bindings_.core_of[r],
                              cpu_list(bindings_.sets[r]));
        std::fputs(fmt::format("transit_run: rank {} {}\n", r, where).c_str(), stderr);
    }
}

void Launcher::start_ranks(PmixHost& host) {
    const std::vector<cpu_set_t>& bindings = bindings_.sets;
    const std::vector<std::string> base = base_environment();
    if (opt_.tag_output) output_.emplace();
    for (unsigned r = 0; r < opt_.np; ++r) {
        std::vector<std::string> env = base;
        for (const std::string& e : host.client_env(r)) set_var(env, e);
        set_var(env, fmt::format("TRANSIT_RANK={}", r));
        set_var(env, fmt::format("TRANSIT_LOCAL_RANK={}", r));
        std::optional<cpu_set_t> cpus;
        if (!bindings.empty()) cpus = bindings[r];
        std::optional<TaggedOutput::Ends> ends;
        if (output_) ends = output_->add_rank(r);
        const pid_t pid = spawn(r, env, cpus, ends ? &*ends : nullptr);
        record_rank(tmpdir_, pid);
        if (pgid_ == 0) pgid_ = pid;
        ranks_[r].pid = pid;
        ranks_[r].running = true;
    }
    if (output_) output_->close_write_ends();
}

void Launcher::signal_ranks(int sig) {
    if (pgid_ > 0) ::kill(-pgid_, sig);
    // A rank may have left our process group (setsid): reach it by pid too.
    for (const RankState& r : ranks_)
        if (r.running) ::kill(r.pid, sig);
}

bool Launcher::any_running() const {
    for (const RankState& r : ranks_)
        if (r.running) return true;
    return false;
}

void Launcher::terminate(int status, const std::string& why, int sig, Clock::duration grace) {
    if (terminating_) return;
    terminating_ = true;
    exit_status_ = status;
    if (!why.empty()) say(why);
    signal_ranks(sig);
    kill_at_ = Clock::now() + grace;
}

void Launcher::handle_server_events(PmixHost& host) {
    for (const ServerEvent& ev : host.take_events()) {
        if (ev.rank >= ranks_.size()) continue;
        switch (ev.kind) {
            case ServerEvent::Kind::connected:
                ranks_[ev.rank].connected = true;
                break;
            case ServerEvent::Kind::finalized:
                ranks_[ev.rank].finalized = true;
                break;
            case ServerEvent::Kind::refused:
                report_refusal(
                    fmt::format("refused a PMIx connection claiming to be rank {}: another user "
                                "is connected to the job's PMIx server",
                                ev.rank));
                break;
            case ServerEvent::Kind::stranger_refused:
                report_refusal(fmt::format(
                    "refused a PMIx connection from user {}: only the job's owner may connect "
                    "to its PMIx server",
                    user_name(static_cast<uid_t>(ev.status))));
                break;
            case ServerEvent::Kind::idle_closed:
                say(
                    fmt::format("closed {} connection(s) to the job's PMIx server that sent no "
                                "handshake within a second",
                                ev.status));
                break;
            case ServerEvent::Kind::aborted: {
                // An exit status is 8 bits; an abort must never look like success.
                const int status = (ev.status & 0xff) != 0 ? (ev.status & 0xff) : 1;
                terminate(
                    status,
                    fmt::format("rank {} aborted the job (status {}){}{}; killing the job", ev.rank,
                                ev.status, ev.message.empty() ? "" : ": ", ev.message),
                    SIGTERM, std::chrono::seconds(1));
                break;
            }
        }
    }
}

void Launcher::report_refusal(const std::string& line) {
    const auto now = Clock::now();
    report_unlogged_refusals(now);
    if (!refusals_.admit(now)) return;
    say(refusals_.at_limit() ? fmt::format("{} (further refusals within {} s are only counted)",
                                           line, refusal_window.count())
                             : line);
}

void Launcher::report_unlogged_refusals(Clock::time_point now) {
    if (const std::uint64_t n = refusals_.take_unreported(now); n != 0)
        say(fmt::format("{} more PMIx connection(s) refused (at most {} logged every {} s)", n,
                        refusals_logged, refusal_window.count()));
}

void Launcher::on_rank_exit(PmixHost& host, unsigned rank, int wait_status) {
    RankState& r = ranks_[rank];
    r.running = false;
    // A rank that died before closing its runtime: its address is gone.
    host.forget_names_of(rank);
    if (terminating_) return;
    // The survivors run on: those that never talked to this rank have no
    // transport that could notice it is gone, so tell them all.
    if (opt_.keep_going && !r.finalized && any_running()) {
        try {
            host.notify_lost(rank, WIFSIGNALED(wait_status));
        } catch (const std::exception& e) {
            say(fmt::format("cannot tell the other ranks that rank {} is gone: {}", rank,
                            e.what()));
        }
    }
    int status = 0;
    std::string what;
    if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGPIPE && !opt_.keep_going) {
        // Its output was closed ("| head"): the job ends quietly, as a pipeline
        // of Unix tools does, with the status a shell expects of SIGPIPE.
        terminate(128 + SIGPIPE, "", SIGTERM, std::chrono::seconds(1));
        return;
    }
    if (WIFSIGNALED(wait_status)) {
        status = 128 + WTERMSIG(wait_status);
        what = fmt::format("was killed by {}", signal_name(WTERMSIG(wait_status)));
    } else if (WEXITSTATUS(wait_status) != 0) {
        status = WEXITSTATUS(wait_status);
        what = fmt::format("exited with status {}", status);
    } else if (r.connected && !r.finalized && any_running() && !opt_.keep_going) {
        // Its peers may be waiting for it in a fence: they would wait forever.
        status = 1;
        what = "exited without closing its Transit runtime (PMIx_Finalize)";
    } else {
        return;
    }
    if (opt_.keep_going) {
        say(fmt::format("rank {} (pid {}) {}; the others run on (--keep-going)", rank, r.pid,
                        what));
        if (exit_status_ == 0) exit_status_ = status;
        return;
    }
    terminate(status, fmt::format("rank {} (pid {}) {}; killing the job", rank, r.pid, what),
              SIGTERM, std::chrono::seconds(1));
}

// The moment a rank was reaped, on the clock file times use: what it left in
// /dev/shm is no newer (made before it died), what a process given its pid
// later makes is newer, unless that process got the pid and started libfabric
// while this launcher stood between the reap and this line.  (Read before
// the waitpid instead, a rank that died between the two left its region.)
void Launcher::note_end(pid_t pid) {
    for (RankState& r : ranks_)
        if (r.pid == pid && r.ended.tv_sec == 0) ::clock_gettime(CLOCK_REALTIME_COARSE, &r.ended);
}

void Launcher::reap(PmixHost& host) {
    std::vector<std::pair<pid_t, int>> exited;
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
        exited.emplace_back(pid, status);
        note_end(pid);
    }
    if (exited.empty()) return;
    // A rank's "finalized" is queued before the rank is released to exit, so
    // with its exit seen the event is there: take it now, not on the next
    // poll (the event fd may have become readable after this poll returned).
    handle_server_events(host);
    for (const auto& [p, st] : exited)
        for (unsigned r = 0; r < ranks_.size(); ++r)
            if (ranks_[r].pid == p && ranks_[r].running) on_rank_exit(host, r, st);
    // Named objects a killed rank's transports listed outlive it (see
    // btl::util::Leftovers): they go now, not at the user's next job.
    btl::util::remove_leftovers_of_gone_processes();
    // Anything else is an orphan we adopted as subreaper: reaped, ignored.
}

void Launcher::handle_signal(int sig) {
    if (!ends_job(sig)) {
        signal_ranks(sig);
        return;
    }
    if (terminating_) {
        // Asked again: stop waiting for the ranks to go quietly.
        signal_ranks(SIGKILL);
        return;
    }
    terminate(128 + sig, fmt::format("received {}; passing it to the ranks", signal_name(sig)), sig,
              std::chrono::seconds(3));
}

void Launcher::loop(PmixHost& host) {
    while (any_running()) {
        std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}, {host.event_fd(), POLLIN, 0}};
        if (output_)
            for (int fd : output_->open_fds()) fds.push_back({fd, POLLIN, 0});
        int wait_ms = -1;
        const auto now = Clock::now();
        for (const auto& deadline : {kill_at_, timeout_at_}) {
            if (!deadline) continue;
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
            const int ms = left < 0 ? 0 : static_cast<int>(left);
            wait_ms = wait_ms < 0 ? ms : std::min(wait_ms, ms);
        }
        if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR)
            throw std::runtime_error(fmt::format("poll failed: {}", std::strerror(errno)));

        // Server events first: a rank's "finalized" must be known before its exit.
        if (fds[1].revents) handle_server_events(host);
        if (fds[0].revents) {
            signalfd_siginfo info{};
            while (::read(signal_fd_, &info, sizeof info) == sizeof info)
                if (info.ssi_signo != SIGCHLD) handle_signal(static_cast<int>(info.ssi_signo));
        }
        reap(host);
        for (std::size_t i = 2; i < fds.size(); ++i)
            if (fds[i].revents) output_->pump(fds[i].fd);
        // Our reader is gone ("| head"): the job ends quietly, as it does when
        // a rank writing to that pipe itself gets SIGPIPE (see on_rank_exit).
        if (output_ && output_->reader_gone() && !terminating_ && !opt_.keep_going)
            terminate(128 + SIGPIPE, "", SIGTERM, std::chrono::seconds(1));

        const auto after = Clock::now();
        if (timeout_at_ && after >= *timeout_at_ && !terminating_)
            terminate(timeout_status,
                      fmt::format("the job ran longer than --timeout {} s; killing it",
                                  opt_.timeout_seconds),
                      SIGTERM, std::chrono::seconds(1));
        if (kill_at_ && after >= *kill_at_) {
            signal_ranks(SIGKILL);
            kill_at_.reset();
        }
    }
}

void Launcher::cleanup() {
    if (cleaned_) return;
    cleaned_ = true;
    if (any_running()) {
        signal_ranks(SIGKILL);
        for (RankState& r : ranks_)
            if (r.running) {
                ::waitpid(r.pid, nullptr, 0);
                r.running = false;
                note_end(r.pid);
            }
    }
    // Whatever the ranks left running in their group or handed to us.
    if (pgid_ > 0) ::kill(-pgid_, SIGKILL);
    kill_adopted_children();
    if (output_) {
        // Late output still in the pipes; their writers are gone now.
        const auto until = Clock::now() + std::chrono::seconds(1);
        while (!output_->all_closed() && Clock::now() < until) {
            std::vector<pollfd> fds;
            for (int fd : output_->open_fds()) fds.push_back({fd, POLLIN, 0});
            if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
            for (const pollfd& p : fds)
                if (p.revents) output_->pump(p.fd);
        }
        output_->flush_all();
    }
    btl::util::remove_leftovers_of_gone_processes();
    if (!tmpdir_.empty()) remove_tree(tmpdir_);
    remove_job_shm(job_id_);
    for (const RankState& r : ranks_)
        if (r.pid > 0 && r.ended.tv_sec != 0) remove_dead_rank_regions(r.pid, r.ended);
    if (signal_fd_ >= 0) ::close(signal_fd_);
    signal_fd_ = -1;
    if (secret_fd_ >= 0) ::close(secret_fd_);
    secret_fd_ = -1;
}

int Launcher::run() {
    plan_bindings();
    // Signals arrive through a descriptor; blocked before PMIx starts its
    // thread so that thread never takes them.
    const sigset_t handled = handled_signals();
    ::sigprocmask(SIG_BLOCK, &handled, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    signal_fd_ = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
    if (signal_fd_ < 0) throw std::runtime_error("signalfd failed");
    // Orphans of the ranks come to us, so none survives the job.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);

    prepare_files();
    {
        PmixHost host(tmpdir_);
        JobDescription job{nspace_, job_id_, opt_.np, hostname_, tmpdir_, names_dir_};
        host.register_job(job);
        if (opt_.timeout_seconds > 0)
            timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(opt_.timeout_seconds));
        try {
            start_ranks(host);
        } catch (const std::exception& e) {
            terminate(1, fmt::format("cannot start the job: {}", e.what()), SIGKILL,
                      std::chrono::seconds(0));
        }
        loop(host);
        handle_server_events(host);
        report_unlogged_refusals(Clock::time_point::max());
        host.forget_names();
        cleanup();
        // After a failed job the PMIx server is not shut down: OpenPMIx 4.2.2
        // may deadlock tearing down ranks killed inside a fence, and the
        // process ends now anyway.  A normal end shuts it down, bounded.
        if (terminating_ || !host.shutdown(std::chrono::seconds(2))) {
            std::fflush(stdout);
            std::fflush(stderr);
            std::_Exit(exit_status_);
        }
    }
    return exit_status_;
}

}  // namespace transit::run
