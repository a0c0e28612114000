#include "pmix_host.hpp"

#include "accept_gate.hpp"
#include "peer_check.hpp"
#include "runtime/pmix_names.hpp"

#include <pmix_server.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>

namespace transit::run {
namespace {

PmixHost* the_host = nullptr;

void check(pmix_status_t rc, std::string_view what) {
    if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED)
        throw std::runtime_error(fmt::format("{} failed: {}", what, PMIx_Error_string(rc)));
}

// One PMIx call answered through an operation callback, waited for at most
// `limit`: a PMIx thread that hangs (see shutdown) must not hold the launcher.
// `done`'s payload is what PMIx may read until its callback, so it lives with
// the completion, past a timeout too.  `call(callback, cbdata)` starts it.
template <class Payload, class Call>
void call_and_wait(std::string_view what,
                   const std::shared_ptr<rt::pmix::Completion<Payload>>& done,
                   std::chrono::seconds limit, Call&& call) {
    using Done = rt::pmix::Completion<Payload>;
    void* cbdata = Done::to_cbdata(done);
    pmix_status_t rc =
        std::forward<Call>(call)([](pmix_status_t s, void* cb) { Done::complete(cb, s); }, cbdata);
    if (rc != PMIX_SUCCESS) {
        Done::complete(cbdata, rc);  // answered at once, or refused: no callback comes
    } else if (const std::optional<pmix_status_t> answer = done->wait_for(limit)) {
        rc = *answer;
    } else {
        throw std::runtime_error(
            fmt::format("{}: no answer from PMIx within {} s", what, limit.count()));
    }
    check(rc, what);
}

// A client sends its handshake as soon as it has connected: a connection with
// nothing to read for this long is not a client of ours.
constexpr std::chrono::milliseconds handshake_limit{1000};
// Each scan reads /proc/net/tcp and the server's descriptors: a rank polling
// on the launcher's core loses its core meanwhile (scans every 50 ms doubled
// a pinned client's tcp round trip), so the guard looks only four times a
// second; a stranger's silent connection still ends within 1.25 s.
constexpr std::chrono::milliseconds guard_period{250};
// A lookup waiting for a name another launcher may publish looks again this often.
constexpr std::chrono::milliseconds lookup_period{50};

// Registering the job and its clients is local to the server: seconds at most.
constexpr std::chrono::seconds registration_limit{30};

// Admits the job owner's connections, and those whose owner the kernel here
// does not list (judged again in the connect upcall).
bool admit_connection(long owner) noexcept {
    if (owner < 0 || owner == static_cast<long>(::getuid())) return true;
    try {
        if (the_host)
            the_host->post({ServerEvent::Kind::stranger_refused, 0, static_cast<int>(owner), {}});
    } catch (...) {
        // Out of memory queueing the report: the connection is closed all the same.
    }
    return false;
}

unsigned rank_of(const pmix_proc_t* proc) {
    return proc ? proc->rank : 0;
}

// A client refused here must still be admitted to the library, its
// connection shut down by us (see turn_away_admitting_client); the error
// return is the last resort, when its socket cannot be told apart.
pmix_status_t on_connected(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t cbfunc, void* cbdata) {
    if (the_host && !the_host->admits_clients()) {
        the_host->post({ServerEvent::Kind::refused, rank_of(proc), 0, {}});
        if (!the_host->turn_away_client()) return PMIX_ERR_NO_PERMISSIONS;
    } else if (the_host) {
        the_host->post({ServerEvent::Kind::connected, rank_of(proc), 0, {}});
    }
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

// The event is queued before the client is released, so the launcher sees
// "finalized" before it can see the process exit.
pmix_status_t on_finalized(const pmix_proc_t* proc, void*, pmix_op_cbfunc_t cbfunc, void* cbdata) {
    if (the_host) {
        the_host->forget_names_of(rank_of(proc));
        the_host->post({ServerEvent::Kind::finalized, rank_of(proc), 0, {}});
    }
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

pmix_status_t on_abort(const pmix_proc_t* proc, void*, int status, const char msg[], pmix_proc_t[],
                       size_t, pmix_op_cbfunc_t cbfunc, void* cbdata) {
    if (the_host)
        the_host->post({ServerEvent::Kind::aborted, rank_of(proc), status, msg ? msg : ""});
    if (cbfunc) cbfunc(PMIX_SUCCESS, cbdata);
    return PMIX_SUCCESS;
}

// On one node the server library has already gathered every participant's
// contribution; handing the concatenation straight back completes the fence.
pmix_status_t on_fence(const pmix_proc_t[], size_t, const pmix_info_t[], size_t, char* data,
                       size_t ndata, pmix_modex_cbfunc_t cbfunc, void* cbdata) {
    if (cbfunc) cbfunc(PMIX_SUCCESS, data, ndata, cbdata, nullptr, nullptr);
    return PMIX_SUCCESS;
}

pmix_status_t on_publish(const pmix_proc_t* proc, const pmix_info_t info[], size_t ninfo,
                         pmix_op_cbfunc_t cbfunc, void* cbdata) {
    const pmix_status_t rc =
        the_host ? the_host->publish(rank_of(proc), {info, ninfo}) : PMIX_ERR_NOT_SUPPORTED;
    if (cbfunc) cbfunc(rc, cbdata);
    return PMIX_SUCCESS;
}

pmix_status_t on_lookup(const pmix_proc_t* proc, char** keys, const pmix_info_t info[],
                        size_t ninfo, pmix_lookup_cbfunc_t cbfunc, void* cbdata) {
    if (!the_host) return PMIX_ERR_NOT_SUPPORTED;
    return the_host->lookup(rank_of(proc), keys, {info, ninfo}, cbfunc, cbdata);
}

pmix_status_t on_unpublish(const pmix_proc_t* proc, char** keys, const pmix_info_t[], size_t,
                           pmix_op_cbfunc_t cbfunc, void* cbdata) {
    const pmix_status_t rc =
        the_host ? the_host->unpublish(rank_of(proc), keys) : PMIX_ERR_NOT_SUPPORTED;
    if (cbfunc) cbfunc(rc, cbdata);
    return PMIX_SUCCESS;
}

pmix_server_module_t make_module() {
    pmix_server_module_t m{};
    m.client_connected = on_connected;
    m.client_finalized = on_finalized;
    m.abort = on_abort;
    m.fence_nb = on_fence;
    m.publish = on_publish;
    m.lookup = on_lookup;
    m.unpublish = on_unpublish;
    return m;
}

pmix_server_module_t module = make_module();

// Frees a string PMIx allocated with malloc.
struct CFree {
    void operator()(char* p) const noexcept { std::free(p); }
};

std::string regex_of(const std::string& input, bool ppn) {
    char* raw = nullptr;
    const pmix_status_t rc =
        ppn ? PMIx_generate_ppn(input.c_str(), &raw) : PMIx_generate_regex(input.c_str(), &raw);
    std::unique_ptr<char, CFree> out(raw);
    check(rc, ppn ? "PMIx_generate_ppn" : "PMIx_generate_regex");
    return out ? std::string(out.get()) : std::string();
}

}  // namespace

PmixHost::PmixHost(const std::string& tmpdir) {
    if (the_host) throw std::logic_error("only one PMIx server per process");
    event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd_ < 0) throw std::runtime_error("eventfd failed");
    rt::pmix::InfoList info;
    info.add_string(PMIX_SERVER_TMPDIR, tmpdir);
    info.add_string(PMIX_SYSTEM_TMPDIR, tmpdir);
    info.add_bool(PMIX_SERVER_SYSTEM_SUPPORT, false);
    info.add_bool(PMIX_SERVER_TOOL_SUPPORT, false);
    info.add_string(PMIX_SERVER_NSPACE, fmt::format("transit_run-{}", ::getpid()));
    pmix_rank_t server_rank = 0;
    info.add(PMIX_SERVER_RANK, &server_rank, PMIX_PROC_RANK);
    std::span<pmix_info_t> arr = info.finish();
    the_host = this;
    set_accept_gate(admit_connection);
    const pmix_status_t rc = PMIx_server_init(&module, arr.data(), arr.size());
    if (rc != PMIX_SUCCESS) {
        set_accept_gate(nullptr);
        the_host = nullptr;
        ::close(event_fd_);
        throw std::runtime_error(
            fmt::format("cannot start the PMIx server: {}", PMIx_Error_string(rc)));
    }
    guard_ = std::jthread([this](std::stop_token stop) { guard_handshakes(stop); });
}

void PmixHost::guard_handshakes(std::stop_token stop) {
    std::optional<IdleConnectionGuard> guard;
    std::mutex m;
    std::condition_variable_any wake;
    std::unique_lock lock(m);
    auto next_scan = std::chrono::steady_clock::now() + guard_period;
    for (;;) {
        // Wakes after a period (shorter while a lookup waits), or at once when stopped.
        wake.wait_for(lock, stop, lookups_waiting() ? lookup_period : guard_period,
                      [] { return false; });
        if (stop.stop_requested()) return;
        // Names published by other launchers, and waits that are over.
        retry_lookups(false);
        const std::uint16_t port = server_port_;
        if (port == 0 || std::chrono::steady_clock::now() < next_scan) continue;
        next_scan = std::chrono::steady_clock::now() + guard_period;
        if (!guard) guard.emplace(port, handshake_limit);
        if (const unsigned closed = guard->scan(); closed > 0)
            post({ServerEvent::Kind::idle_closed, 0, static_cast<int>(closed), {}});
    }
}

PmixHost::~PmixHost() {
    if (!shut_down_) shutdown(std::chrono::seconds(3));
    ::close(event_fd_);
}

bool PmixHost::shutdown(std::chrono::milliseconds limit) {
    if (shut_down_) return true;
    shut_down_ = true;
    guard_.request_stop();
    if (guard_.joinable()) guard_.join();
    forget_names();
    // OpenPMIx 4.2.2 can deadlock its progress thread while tearing down a job
    // whose ranks died inside a fence; never let that hold the launcher.
    using Done = rt::pmix::Completion<std::monostate>;
    auto done = std::make_shared<Done>();
    std::thread teardown([cbdata = Done::to_cbdata(done)] {
        PMIx_server_finalize();
        Done::complete(cbdata, PMIX_SUCCESS);
    });
    if (!done->wait_for(limit)) {
        teardown.detach();
        return false;
    }
    teardown.join();
    set_accept_gate(nullptr);
    the_host = nullptr;
    return true;
}

void PmixHost::register_job(const JobDescription& job) {
    std::string ranks;
    for (unsigned r = 0; r < job.np; ++r) {
        // Two appends, not `"," + to_string(r)`: g++ 12 at -O3 warns (-Wrestrict) on that.
        if (r) ranks += ',';
        ranks += std::to_string(r);
    }
    const std::string node_map = regex_of(job.hostname, false);
    const std::string proc_map = regex_of(ranks, true);

    // PMIx may read the list until its callback.
    auto done = std::make_shared<rt::pmix::Completion<rt::pmix::InfoList>>();
    rt::pmix::InfoList& info = done->payload;
    info.add_u32(PMIX_UNIV_SIZE, job.np)
        .add_u32(PMIX_JOB_SIZE, job.np)
        .add_u32(PMIX_MAX_PROCS, job.np)
        .add_u32(PMIX_LOCAL_SIZE, job.np)
        .add_u32(PMIX_NUM_NODES, 1)
        .add_u32(PMIX_JOB_NUM_APPS, 1)
        .add_string(PMIX_JOBID, job.job_id)
        .add_string(PMIX_LOCAL_PEERS, ranks)
        .add_string(PMIX_NODE_MAP, node_map)
        .add_string(PMIX_PROC_MAP, proc_map)
        .add_string(PMIX_HOSTNAME, job.hostname)
        .add_u32(PMIX_NODEID, 0)
        .add_string(PMIX_TMPDIR, job.tmpdir)
        .add_string(PMIX_NSDIR, job.tmpdir)
        .add_bool(rt::pmix::wildcard_fence_survives_loss, true);
    for (unsigned r = 0; r < job.np; ++r) {
        rt::pmix::InfoList proc;
        pmix_rank_t rank = r;
        proc.add(PMIX_RANK, &rank, PMIX_PROC_RANK)
            .add_u16(PMIX_LOCAL_RANK, static_cast<std::uint16_t>(r))
            .add_u16(PMIX_NODE_RANK, static_cast<std::uint16_t>(r))
            .add_u32(PMIX_NODEID, 0)
            .add_u32(PMIX_APPNUM, 0)
            .add_string(PMIX_HOSTNAME, job.hostname);
        info.add_array(PMIX_PROC_DATA, proc);
    }
    const std::span<pmix_info_t> arr = info.finish();
    call_and_wait("PMIx_server_register_nspace", done, registration_limit,
                  [&](pmix_op_cbfunc_t cb, void* cbdata) {
                      return PMIx_server_register_nspace(job.nspace.c_str(),
                                                         static_cast<int>(job.np), arr.data(),
                                                         arr.size(), cb, cbdata);
                  });
    nspace_ = job.nspace;
    job_id_ = job.job_id;
    names_.emplace(job.names_dir, job.job_id);
}

std::vector<std::string> PmixHost::client_env(unsigned rank) {
    auto done = std::make_shared<rt::pmix::Completion<pmix_proc_t>>();
    done->payload = rt::pmix::make_proc(nspace_, rank);
    pmix_proc_t& proc = done->payload;
    call_and_wait("PMIx_server_register_client", done, registration_limit,
                  [&](pmix_op_cbfunc_t cb, void* cbdata) {
                      return PMIx_server_register_client(&proc, ::getuid(), ::getgid(), nullptr, cb,
                                                         cbdata);
                  });

    char** env = nullptr;
    check(PMIx_server_setup_fork(&proc, &env), "PMIx_server_setup_fork");
    std::vector<std::string> out;
    for (char** p = env; p && *p; ++p) out.emplace_back(*p);
    for (const std::string& e : out)
        if (e.starts_with("PMIX_SERVER_URI") && e.find("://") != std::string::npos)
            server_port_ = static_cast<std::uint16_t>(std::stoul(e.substr(e.rfind(':') + 1)));
    pmix_argv_free(env);
    return out;
}

bool PmixHost::admits_clients() const {
    const std::uint16_t port = server_port_;
    return port == 0 || !admitting_client_may_be_a_stranger(port);
}

bool PmixHost::turn_away_client() const {
    // A client sends its first request as soon as it is admitted.
    constexpr std::chrono::milliseconds patience{2000};
    return turn_away_admitting_client(server_port_, patience);
}

void PmixHost::notify_lost(unsigned rank, bool by_signal) {
    // PMIx reads the source and the info until its callback, which may come
    // after we stopped waiting for it: they live with the completion.
    struct Notice {
        pmix_proc_t lost;
        rt::pmix::InfoList info;
    };
    using Sent = rt::pmix::Completion<Notice>;
    auto sent = std::make_shared<Sent>();
    Notice& n = sent->payload;
    n.lost = rt::pmix::make_proc(nspace_, rank);
    n.info.add(PMIX_EVENT_AFFECTED_PROC, &n.lost, PMIX_PROC);
    std::span<pmix_info_t> arr = n.info.finish();
    const pmix_status_t code =
        by_signal ? PMIX_ERR_PROC_ABORTED_BY_SIG : PMIX_ERR_PROC_TERM_WO_SYNC;
    // Sourced from the lost rank, so the namespace range is its job's.
    call_and_wait(fmt::format("PMIx_Notify_event (rank {} lost)", rank), sent,
                  std::chrono::seconds(2), [&](pmix_op_cbfunc_t cb, void* cbdata) {
                      return PMIx_Notify_event(code, &n.lost, PMIX_RANGE_NAMESPACE, arr.data(),
                                               arr.size(), cb, cbdata);
                  });
}

std::vector<ServerEvent> PmixHost::take_events() {
    std::uint64_t count = 0;
    [[maybe_unused]] ssize_t n = ::read(event_fd_, &count, sizeof count);
    std::lock_guard lock(mutex_);
    return std::exchange(events_, {});
}

void PmixHost::post(ServerEvent ev) {
    {
        std::lock_guard lock(mutex_);
        events_.push_back(std::move(ev));
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
}

// --- names ---------------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

// What a publish or a lookup asks besides its data.
struct Directives {
    NameTable::Scope scope = NameTable::Scope::node;
    bool per_process = false;  // PMIx's default persistence is the session's
    bool wait = false;
    std::optional<std::chrono::milliseconds> wait_limit;  // none: until published
};

Directives directives_of(std::span<const pmix_info_t> info) {
    Directives d;
    for (const pmix_info_t& i : info) {
        if (PMIX_CHECK_KEY(&i, PMIX_RANGE) && i.value.type == PMIX_DATA_RANGE) {
            const pmix_data_range_t r = i.value.data.range;
            d.scope = r == PMIX_RANGE_NAMESPACE || r == PMIX_RANGE_PROC_LOCAL
                          ? NameTable::Scope::job
                          : NameTable::Scope::node;
        } else if (PMIX_CHECK_KEY(&i, PMIX_PERSISTENCE) && i.value.type == PMIX_PERSIST) {
            d.per_process = i.value.data.persist == PMIX_PERSIST_PROC ||
                            i.value.data.persist == PMIX_PERSIST_FIRST_READ;
        } else if (PMIX_CHECK_KEY(&i, PMIX_WAIT)) {
            d.wait = true;
        } else if (PMIX_CHECK_KEY(&i, PMIX_TIMEOUT) && i.value.type == PMIX_INT &&
                   i.value.data.integer > 0 && !d.wait_limit) {
            d.wait_limit = std::chrono::seconds(i.value.data.integer);
        } else if (PMIX_CHECK_KEY(&i, rt::lookup_wait_ms_key) && i.value.type == PMIX_UINT32) {
            d.wait_limit = std::chrono::milliseconds(i.value.data.uint32);
        }
    }
    // A timeout without PMIX_WAIT is taken as a wait: it means nothing else.
    d.wait = d.wait || d.wait_limit.has_value();
    return d;
}

std::vector<std::string> keys_of(char** keys) {
    std::vector<std::string> out;
    for (char** k = keys; k && *k; ++k) out.emplace_back(*k);
    return out;
}

void say_names(const std::string& why) {
    fmt::print(stderr, "transit_run: names: {}\n", why);
}

}  // namespace

pmix_status_t PmixHost::publish(unsigned rank, std::span<const pmix_info_t> info) {
    if (!names_) return PMIX_ERR_NOT_SUPPORTED;
    const Directives d = directives_of(info);
    std::vector<std::pair<std::string, std::string>> data;
    for (const pmix_info_t& i : info) {
        // PMIx's own keys are directives (and the server's PMIX_USERID).
        if (std::string_view(i.key).starts_with("pmix.")) continue;
        if (i.value.type != PMIX_STRING || !i.value.data.string) return PMIX_ERR_NOT_SUPPORTED;
        data.emplace_back(i.key, i.value.data.string);
    }
    if (data.empty()) return PMIX_ERR_BAD_PARAM;
    NameTable::Entry how;
    how.rank = rank;
    how.scope = d.scope;
    how.per_process = d.per_process;
    std::string why;
    switch (names_->publish(data, how, why)) {
        case NameTable::Result::ok:
            break;
        case NameTable::Result::duplicate:
            return PMIX_ERR_DUPLICATE_KEY;
        case NameTable::Result::bad_name:
            return PMIX_ERR_BAD_PARAM;
        default:
            say_names(why);
            return PMIX_ERROR;
    }
    retry_lookups(false);
    return PMIX_SUCCESS;
}

pmix_status_t PmixHost::lookup(unsigned rank, char** keys, std::span<const pmix_info_t> info,
                               pmix_lookup_cbfunc_t cbfunc, void* cbdata) {
    if (!names_) return PMIX_ERR_NOT_SUPPORTED;
    const Directives d = directives_of(info);
    Waiting w{rank,
              keys_of(keys),
              d.scope == NameTable::Scope::job,
              d.wait_limit ? Clock::now() + *d.wait_limit : Clock::time_point::max(),
              cbfunc,
              cbdata};
    if (w.keys.empty()) return PMIX_ERR_BAD_PARAM;
    if (answer(w, !d.wait, d.wait ? PMIX_SUCCESS : PMIX_ERR_NOT_FOUND)) return PMIX_SUCCESS;
    std::lock_guard lock(waiting_mutex_);
    waiting_.push_back(std::move(w));
    return PMIX_SUCCESS;
}

// Answers `w` when every key is found (or, `partial`, any); else, unless
// `otherwise` is PMIX_SUCCESS (keep waiting), answers that status.
bool PmixHost::answer(const Waiting& w, bool partial, pmix_status_t otherwise) {
    std::vector<std::pair<const std::string*, NameTable::Entry>> found;
    for (const std::string& key : w.keys)
        if (std::optional<NameTable::Entry> e = names_->find(key);
            e && (!w.job_only || e->job_id == job_id_))
            found.emplace_back(&key, std::move(*e));
    if (found.size() < w.keys.size() && !(partial && !found.empty())) {
        if (otherwise == PMIX_SUCCESS) return false;
        if (w.cbfunc) w.cbfunc(otherwise, nullptr, 0, w.cbdata);
        return true;
    }
    std::vector<pmix_pdata_t> data(found.size());
    for (std::size_t i = 0; i < found.size(); ++i) {
        const auto& [key, e] = found[i];
        PMIX_PDATA_CONSTRUCT(&data[i]);
        data[i].proc = rt::pmix::make_proc(e.job_id == job_id_ ? nspace_ : e.job_id, e.rank);
        PMIX_LOAD_KEY(data[i].key, key->c_str());
        PMIx_Value_load(&data[i].value, e.value.c_str(), PMIX_STRING);
    }
    if (w.cbfunc) w.cbfunc(PMIX_SUCCESS, data.data(), data.size(), w.cbdata);
    for (pmix_pdata_t& d : data) PMIX_PDATA_DESTRUCT(&d);
    return true;
}

bool PmixHost::lookups_waiting() {
    std::lock_guard lock(waiting_mutex_);
    return !waiting_.empty();
}

void PmixHost::retry_lookups(bool ending) {
    std::lock_guard lock(waiting_mutex_);
    const auto now = Clock::now();
    std::erase_if(waiting_, [&](const Waiting& w) {
        const pmix_status_t otherwise = ending           ? PMIX_ERR_NOT_FOUND
                                        : now >= w.until ? PMIX_ERR_TIMEOUT
                                                         : PMIX_SUCCESS;
        return answer(w, false, otherwise);
    });
}

pmix_status_t PmixHost::unpublish(unsigned rank, char** keys) {
    if (!names_) return PMIX_ERR_NOT_SUPPORTED;
    if (!keys) {
        names_->forget_rank(rank, false);
        return PMIX_SUCCESS;
    }
    pmix_status_t rc = PMIX_SUCCESS;
    for (const std::string& key : keys_of(keys)) {
        std::string why;
        switch (names_->unpublish(key, rank, why)) {
            case NameTable::Result::ok:
                break;
            case NameTable::Result::not_found:
                rc = PMIX_ERR_NOT_FOUND;
                break;
            case NameTable::Result::not_owner:
                rc = PMIX_ERR_NO_PERMISSIONS;
                break;
            default:
                say_names(why);
                rc = PMIX_ERROR;
                break;
        }
    }
    return rc;
}

void PmixHost::forget_names_of(unsigned rank) {
    if (names_) names_->forget_rank(rank, true);
}

void PmixHost::forget_names() {
    retry_lookups(true);
    if (names_) names_->forget_all();
}

}  // namespace transit::run
