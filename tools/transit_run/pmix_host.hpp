// transit_run's side of PMIx: the server library serves the ranks; this host
// module answers its few upcalls on one node (connect, finalize, abort, fence,
// and publish, lookup, unpublish through a NameTable) and queues what the
// launcher must act on.  Nothing secret goes through it:
// OpenPMIx 4 serves over TCP and believes the user id a client claims, so the
// host closes other users' connections as they are accepted (accept_gate.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "name_table.hpp"
#include "runtime/job_secret.hpp"
#include "runtime/pmix_util.hpp"
#include "transit/runtime.hpp"

namespace transit::run {

struct JobDescription {
    std::string nspace;  // known to the job only (see Launcher::Launcher)
    std::string job_id;  // what the ranks' Runtime::job_id() gives (PMIX_JOBID)
    unsigned np = 0;
    std::string hostname;
    std::string tmpdir;
    std::string names_dir;  // where the names of this user's jobs are kept (NameTable)
};

struct ServerEvent {
    // refused: a client claiming `rank` refused in the connect upcall;
    // stranger_refused: a connection from user `status` closed before the
    // library read anything of it (see accept_gate.hpp).
    enum class Kind { connected, finalized, aborted, refused, stranger_refused, idle_closed };
    Kind kind;
    unsigned rank;
    int status = 0;       // aborted: the status the rank asked to exit with; idle_closed: how many;
                          // stranger_refused: the user id
    std::string message;  // aborted: its message
};

// One per process: the PMIx server library has global state.
class PmixHost {
  public:
    // Starts the server; its rendezvous files go to `tmpdir`.  Throws on failure.
    explicit PmixHost(const std::string& tmpdir);
    ~PmixHost();
    PmixHost(const PmixHost&) = delete;
    PmixHost& operator=(const PmixHost&) = delete;

    void register_job(const JobDescription& job);
    // Registers a rank as an expected client and returns the variables it
    // needs to reach this server ("NAME=value" entries).
    std::vector<std::string> client_env(unsigned rank);

    // Stops the server; false when PMIx did not finish within `limit` (its
    // thread is then left behind and the process must _exit).
    bool shutdown(std::chrono::milliseconds limit);

    // Tells the other ranks (a PMIx event, PMIX_ERR_PROC_TERM_WO_SYNC or
    // PMIX_ERR_PROC_ABORTED_BY_SIG, affecting `rank`) that a rank ended without
    // closing its runtime, so their requests to and from it fail instead of
    // waiting: a peer they never talked to is known to no transport.
    void notify_lost(unsigned rank, bool by_signal);

    // The names published by the ranks (see NameTable); a lookup that waits
    // for a name is answered when it is published or its wait ends.
    pmix_status_t publish(unsigned rank, std::span<const pmix_info_t> info);
    pmix_status_t lookup(unsigned rank, char** keys, std::span<const pmix_info_t> info,
                         pmix_lookup_cbfunc_t cbfunc, void* cbdata);
    pmix_status_t unpublish(unsigned rank, char** keys);
    // A rank ended: the names it published for its own life go.
    void forget_names_of(unsigned rank);
    // The job ends: every name it published goes, and waiting lookups are
    // answered (not found).
    void forget_names();

    // Becomes readable (an eventfd) whenever take_events() has something.
    int event_fd() const noexcept { return event_fd_; }
    std::vector<ServerEvent> take_events();

    // Called from PMIx's progress thread.
    void post(ServerEvent ev);
    // False while another user holds a connection to the server: the client
    // connecting now may be that user's, whatever user id it claims.
    bool admits_clients() const;
    // Shuts down the connection of the client being admitted (the connect
    // upcall then admits it to the library); false if it cannot be found.
    bool turn_away_client() const;

  private:
    // Shuts down connections that hold up the library's handshake (see
    // IdleConnectionGuard) until `stop` is requested.
    void guard_handshakes(std::stop_token stop);

    // A lookup waiting for names not published yet.
    struct Waiting {
        unsigned rank;
        std::vector<std::string> keys;
        bool job_only;
        std::chrono::steady_clock::time_point until;
        pmix_lookup_cbfunc_t cbfunc;
        void* cbdata;
    };
    // Answers the waiting lookups whose names are all there, whose wait is
    // over, or all of them (`ending`).
    void retry_lookups(bool ending);
    bool lookups_waiting();
    // Every key found (or, when `partial`, any): cbfunc called, true.
    bool answer(const Waiting& w, bool partial, pmix_status_t otherwise);

    std::string nspace_;
    std::string job_id_;
    std::optional<NameTable> names_;
    std::mutex waiting_mutex_;
    std::vector<Waiting> waiting_;
    int event_fd_ = -1;
    std::atomic<std::uint16_t> server_port_{0};
    bool shut_down_ = false;
    std::mutex mutex_;
    std::vector<ServerEvent> events_;
    std::jthread guard_;  // last: stopped and joined before the rest goes
};

}  // namespace transit::run
