// The job: starts the ranks, watches them, forwards signals and output, ends
// them all when one fails, and leaves nothing behind.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "options.hpp"
#include "pmix_host.hpp"
#include "process_util.hpp"
#include "tagged_output.hpp"
#include "transit/log_limiter.hpp"

namespace transit::run {

// Exit status when --timeout expires (as timeout(1)).
inline constexpr int timeout_status = 124;

class Launcher {
  public:
    explicit Launcher(Options opt);
    ~Launcher();
    Launcher(const Launcher&) = delete;
    Launcher& operator=(const Launcher&) = delete;

    // Runs the job to its end and returns transit_run's exit status.
    int run();

  private:
    using Clock = std::chrono::steady_clock;

    struct RankState {
        pid_t pid = -1;
        bool running = false;
        bool connected = false;
        bool finalized = false;
        timespec ended{};  // when it was reaped (CLOCK_REALTIME_COARSE)
    };

    void plan_bindings();
    void prepare_files();
    void note_end(pid_t pid);
    void start_ranks(PmixHost& host);
    pid_t spawn(unsigned rank, const std::vector<std::string>& env,
                const std::optional<cpu_set_t>& cpus, const TaggedOutput::Ends* ends);
    std::vector<std::string> base_environment() const;
    void loop(PmixHost& host);
    void handle_server_events(PmixHost& host);
    // Logs a refused PMIx connection, at most refusals_ allows (the rest counted).
    void report_refusal(const std::string& line);
    void report_unlogged_refusals(Clock::time_point now);
    void handle_signal(int sig);
    void reap(PmixHost& host);
    void on_rank_exit(PmixHost& host, unsigned rank, int wait_status);
    void terminate(int status, const std::string& why, int sig, Clock::duration grace);
    void signal_ranks(int sig);
    bool any_running() const;
    void cleanup();
    std::string names_dir() const;

    Options opt_;
    std::string program_;
    std::string job_id_;
    std::string nspace_;  // the PMIx namespace: secret, unlike the job id
    std::string hostname_;
    std::string tmpdir_;
    std::string names_dir_;  // where this user's jobs keep their names (names_dir())
    int signal_fd_ = -1;
    int secret_fd_ = -1;  // the job secret, inherited by the ranks (rt::secret_file)
    pid_t pgid_ = 0;
    std::vector<RankState> ranks_;
    CoreBindings bindings_;
    std::optional<TaggedOutput> output_;

    bool terminating_ = false;
    int exit_status_ = 0;
    std::optional<Clock::time_point> kill_at_;
    std::optional<Clock::time_point> timeout_at_;
    bool cleaned_ = false;
    // Anyone on the node may try to connect to the job's PMIx server, as often
    // as they like: a few refusals are logged per window, the rest counted.
    static constexpr std::uint32_t refusals_logged = 5;
    static constexpr std::chrono::seconds refusal_window{10};
    log::Limiter refusals_{refusals_logged, refusal_window};
};

}  // namespace transit::run
