// mca_btl_transit: Transit's transports offered to a stock Open MPI 4.1 as one
// BTL component.  Its init opens Transit inside the MPI process (runtime in the
// mode where Open MPI drives the PMIx fence, the btl framework with the
// transports our parameters select) and returns one Open MPI module per
// Transit module.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "btl_transit_module.hpp"
#include "framework/btl_framework.hpp"
#include "pml/address.hpp"
#include "runtime/dynamic_runtime.hpp"
#include "runtime/runtime.hpp"
#include "transit/log.hpp"
#include "transit/params.hpp"
#include "transit/progress.hpp"

// Open MPI finds the component by this name; defined at the end of the file.
extern "C" mca_btl_base_component_3_0_0_t mca_btl_transit_component;

namespace transit::ompi {
namespace {

// Open MPI parameters (btl_transit_*), stored where Open MPI's registry writes.
char* include_param = nullptr;
int verbose_param = 0;
int records_param = 4096;
int dynamic_param = 1;

// The modex key under which each process publishes its Transit address.
constexpr char address_key[] = "transit.address";

// Everything Transit owns inside the MPI process, from init to close.
struct Session {
    // Open MPI's job, plus the processes of other jobs (peers outside the job).
    std::unique_ptr<rt::DynamicRuntime> runtime;
    std::unique_ptr<btl::Framework> framework;
    std::vector<std::unique_ptr<Adapter>> adapters;
    std::array<bool, 256> forwarded{};
    bool peers_refreshed = false;
    // note_reached: the peers asked about and those reached in this round of
    // add_procs calls, and whether an unreached peer was reported already.
    std::vector<Rank> asked, reached;
    std::size_t answered = 0;
    bool unreached_said = false;
    // Processes of other jobs by Open MPI name (jobid, vpid).
    std::map<std::pair<std::uint32_t, std::uint32_t>, Foreign> foreign;
    // Connections other jobs' processes opened to this one that departed or
    // failed, released at the end of the next progress call (not inside the
    // transport's own progress, which reported them).
    std::vector<std::pair<btl::Module*, Rank>> gone;

    ~Session() {
        for (std::size_t t = 0; t < forwarded.size(); ++t)
            if (forwarded[t]) btl::am_table().unregister_callback(static_cast<btl::Tag>(t));
        framework.reset();  // finalizes the Transit modules
        adapters.clear();
        runtime.reset();
    }
};

std::unique_ptr<Session> session;
int output = -1;  // opal_output stream for verbose lines
CallLock the_calls;
bool gone_pending = false;  // session->gone is not empty

template <typename... Args>
void say(int level, fmt::format_string<Args...> f, Args&&... args) {
    if (verbose_param < level || output < 0) return;
    const std::string text = fmt::format(f, std::forward<Args>(args)...);
    opal_output(output, "btl:transit: %s", text.c_str());
}

// Transit's own log lines join Open MPI's output (the adapter's stream when
// it is verbose, else stream 0, which Open MPI always shows), so they reach
// wherever the job sends its diagnostics.
void to_opal_output(const log::Line& line, void*) {
    const std::string source(line.source);
    const std::string text(line.text);
    opal_output(output >= 0 ? output : 0, "transit %s: %s", source.c_str(), text.c_str());
}

Adapter* adapter_of(btl::Module* m) noexcept {
    for (const auto& a : session->adapters)
        if (&a->inner() == m) return a.get();
    return nullptr;
}

// A Transit active message for an Open MPI tag: the callback Open MPI put in
// its trigger table gets a descriptor whose segments are Transit's own.
void forward_message(btl::Module* m, const btl::ReceiveDescriptor& d, void* cbdata) noexcept {
    const auto* trigger = static_cast<const mca_btl_active_message_callback_t*>(cbdata);
    Adapter* a = adapter_of(m);
    if (a == nullptr || trigger->cbfunc == nullptr) [[unlikely]]
        return;
    mca_btl_base_descriptor_t des;
    des.des_segments =
        reinterpret_cast<mca_btl_base_segment_t*>(const_cast<btl::Segment*>(d.segments));
    des.des_segment_count = d.segment_count;
    des.des_cbfunc = nullptr;
    des.des_cbdata = nullptr;
    des.des_context = nullptr;
    des.des_flags = 0;
    des.order = MCA_BTL_NO_ORDER;
    trigger->cbfunc(a->ompi(), d.tag, &des, trigger->cbdata);
}

// Open MPI knows no endpoint of a connection another job's process opened to
// us: once it is gone, its transport's records and its id go here (what the
// pml's release of a departed client does).
void release_gone() noexcept {
    gone_pending = false;
    std::vector<std::pair<btl::Module*, Rank>> gone;
    gone.swap(session->gone);
    for (auto [m, id] : gone) {
        if (!session->runtime->is_dynamic(id)) continue;  // released already
        btl::Endpoint* ep = nullptr;
        btl::Reachability bits(1);
        // The transport still holds it: add_procs gives its endpoint back.
        if (ok(m->add_procs({&id, 1}, {&ep, 1}, bits)) && bits.test(0))
            m->del_procs({&id, 1}, {&ep, 1});
        session->runtime->release(id);
        say(1, "Transit peer {} (another job's process that connected to this one) released", id);
    }
}

int progress_once() {
    const int n = progress_engine().progress();
    if (gone_pending) [[unlikely]]
        release_gone();
    return n;
}

// A thread that finds another inside Transit leaves: that one is sending or
// polling already, and Open MPI's waiters call again.  Threads queueing here
// would only hand the lock round while none of them waits for anything new.
int progress() {
    if (!the_calls.enabled()) [[likely]]
        return progress_once();
    if (!the_calls.try_acquire()) return 0;
    const int events = progress_once();
    the_calls.release();
    return events;
}

// Open MPI's btl_transit_include becomes Transit's own `btl` selection.  Left
// empty, every Transit transport but self is offered: Open MPI's self already
// serves loopback, and two transports of the highest exclusivity would share it.
void select_transports() {
    params::Registry& reg = params::registry();
    const params::Source api{params::Origin::api, {}, 0};
    const std::string include = include_param != nullptr ? include_param : "";
    if (!include.empty()) {
        reg.set("btl", include, api);
    } else {
        const params::Variable* v = reg.find("btl");
        if (v == nullptr || v->source().origin == params::Origin::default_value)
            reg.set("btl", "^self", api);
    }
    if (verbose_param > 0) reg.set("btl_base_verbose", std::to_string(verbose_param), api);
}

// Why no Transit transport is offered, from each one's record.
std::string no_transport_reason(const Session& s) {
    std::string why;
    for (const mca::ComponentRecord& r : s.framework->records())
        if (!r.reason.empty())
            why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", r.name, r.reason);
    return why.empty() ? "none selected" : why;
}

// Processes of other jobs (spawned, or met through a port) reach this one by
// its Transit address, which Open MPI's modex carries to them once the jobs
// are connected: published now, before Open MPI's fence, like any btl's data.
void publish_address(Session& s) {
    if (dynamic_param == 0) return;
    const rt::PeerAddress a = pml::listening_address(*s.runtime, s.framework->modules());
    if (a.blobs.empty()) {
        say(1, "no transport offered carries processes of other jobs (tcp and vader do)");
        return;
    }
    const std::string text = pml::format_address(a);
    int rc = OPAL_SUCCESS;
    OPAL_MODEX_SEND_STRING(rc, OPAL_PMIX_GLOBAL, const_cast<char*>(address_key), text.data(),
                           text.size());
    if (rc != OPAL_SUCCESS) {
        opal_output(0,
                    "btl:transit: processes of other jobs will not reach this one: "
                    "publishing its address failed (%d)",
                    rc);
        return;
    }
    std::vector<std::string> keys;
    for (const auto& [key, blob] : a.blobs) keys.push_back(key);
    say(1, "reachable by processes of other jobs through {}", fmt::join(keys, ", "));
}

std::unique_ptr<Session> open_session() {
    auto s = std::make_unique<Session>();
    // Open MPI has published its own modex and will run the fence after every
    // btl has published: Transit puts its data now and reads it in add_procs.
    s->runtime = std::make_unique<rt::DynamicRuntime>(rt::open_runtime(rt::FenceMode::host_driven));
    const opal_process_name_t me = OPAL_PROC_MY_NAME;
    if (s->runtime->rank() != me.vpid) {
        // Transit did not join Open MPI's job (e.g. PMIx unreachable): say so.
        opal_output(0, "btl:transit: declined: Transit sees rank %u of %u, Open MPI rank %u",
                    s->runtime->rank(), s->runtime->size(), me.vpid);
        return nullptr;
    }
    s->framework =
        std::make_unique<btl::Framework>(*s->runtime, progress_engine(), btl::am_table());
    try {
        select_transports();
        s->framework->open();
    } catch (const params::Error& e) {
        // Name the parameter the user set, not only Transit's own name for it.
        if (include_param == nullptr || *include_param == '\0') throw;
        throw std::runtime_error(
            fmt::format("{} (btl_transit_include is \"{}\")", e.what(), include_param));
    }
    // Open MPI's self reaches this process: no Transit transport starts for it.
    s->framework->serve(btl::reach::node | btl::reach::remote);
    s->framework->multi_threaded(the_calls.enabled());
    s->framework->init();
    for (const mca::ComponentRecord& r : s->framework->records())
        say(2, "transport {}: {}", r.name, r.reason.empty() ? "in use" : r.reason);
    constexpr int min_records = 16;
    if (records_param < min_records)
        opal_output(0, "btl:transit: btl_transit_descriptors %d is below %d; using %d",
                    records_param, min_records, min_records);
    const auto records = static_cast<std::size_t>(std::max(records_param, min_records));
    if (s->framework->modules().empty()) {
        opal_output(0, "btl:transit: declined: no Transit transport started (%s)",
                    no_transport_reason(*s).c_str());
        return nullptr;
    }
    for (btl::Module* m : s->framework->modules()) {
        s->adapters.push_back(std::make_unique<Adapter>(*m, mca_btl_transit_component, records));
        say(1, "module {}: eager limit {}, max send {}, exclusivity {}, flags {:#x}", m->name(),
            m->attributes().eager_limit, m->attributes().max_send_size, m->attributes().exclusivity,
            m->attributes().flags);
    }
    publish_address(*s);
    return s;
}

mca_btl_base_module_t** component_init(int* count, bool progress_threads, bool mpi_threads) {
    (void)progress_threads;
    *count = 0;
    // Under MPI_THREAD_MULTIPLE ob1 calls the modules and progress from any
    // thread; the lock is switched on before a second thread can call.
    the_calls.enable(mpi_threads);
    try {
        session = open_session();
    } catch (const std::exception& e) {
        // A bad parameter or a broken launcher: Open MPI carries on without us.
        opal_output(0, "btl:transit: declined: Transit did not start: %s", e.what());
        session.reset();
    }
    if (!session || session->adapters.empty()) {
        session.reset();
        return nullptr;
    }
    const std::size_t n = session->adapters.size();
    // Open MPI releases the array with free().
    auto** modules = static_cast<mca_btl_base_module_t**>(std::malloc(n * sizeof(void*)));
    if (modules == nullptr) {
        session.reset();
        return nullptr;
    }
    for (std::size_t i = 0; i < n; ++i) modules[i] = session->adapters[i]->ompi();
    *count = static_cast<int>(n);
    return modules;
}

int component_register() {
    mca_base_component_t* c = &mca_btl_transit_component.btl_version;
    include_param = const_cast<char*>("");
    mca_base_component_var_register(
        c, "include",
        "Transit transports to offer, as Transit's btl selection: a list (\"vader,tcp\") or, "
        "with a leading '^', the ones not to offer (\"^openib\"); empty: every Transit "
        "transport except self (Open MPI's self serves loopback)",
        MCA_BASE_VAR_TYPE_STRING, nullptr, 0, mca_base_var_flag_t{}, OPAL_INFO_LVL_3,
        MCA_BASE_VAR_SCOPE_READONLY, &include_param);
    mca_base_component_var_register(
        c, "verbose",
        "Verbosity of the adapter (0..100); above 0 it also sets Transit's btl_base_verbose",
        MCA_BASE_VAR_TYPE_INT, nullptr, 0, mca_base_var_flag_t{}, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_LOCAL, &verbose_param);
    mca_base_component_var_register(
        c, "descriptors",
        "Open MPI descriptors and one-sided completion records per Transit module: how many "
        "sends and RDMA operations may be in flight through the adapter at once",
        MCA_BASE_VAR_TYPE_INT, nullptr, 0, mca_base_var_flag_t{}, OPAL_INFO_LVL_6,
        MCA_BASE_VAR_SCOPE_READONLY, &records_param);
    mca_base_component_var_register(
        c, "dynamic",
        "Processes of other jobs (MPI_Comm_spawn, MPI_Comm_connect/accept) reach this one "
        "through Transit's tcp and vader: 1 publishes its Transit address in the modex, 0 "
        "does not (such processes then reach it only through other btls)",
        MCA_BASE_VAR_TYPE_INT, nullptr, 0, mca_base_var_flag_t{}, OPAL_INFO_LVL_5,
        MCA_BASE_VAR_SCOPE_READONLY, &dynamic_param);
    return OPAL_SUCCESS;
}

int component_open() {
    if (verbose_param > 0) {
        output = opal_output_open(nullptr);
        opal_output_set_verbosity(output, verbose_param);
    }
    log::set_sink(to_opal_output, nullptr);
    return OPAL_SUCCESS;
}

int component_close() {
    session.reset();
    log::set_sink(nullptr, nullptr);
    if (output >= 0) opal_output_close(output);
    output = -1;
    return OPAL_SUCCESS;
}

}  // namespace

CallLock& calls() noexcept {
    return the_calls;
}

int forward_tag(mca_btl_base_tag_t tag) noexcept {
    if (!session) return OPAL_ERR_NOT_AVAILABLE;
    if (session->forwarded[tag]) return OPAL_SUCCESS;
    const Status s = btl::am_table().register_callback(tag, &forward_message,
                                                       &mca_btl_base_active_message_trigger[tag]);
    if (!ok(s)) {
        opal_output(0, "btl:transit: Open MPI tag %#x cannot be forwarded: %s", tag,
                    std::string(to_string(s)).c_str());
        return to_opal(s);
    }
    session->forwarded[tag] = true;
    return OPAL_SUCCESS;
}

namespace {

// What a module reaches, for the report of unreached peers.
std::string reach_of(const btl::Module& m) {
    const std::uint32_t r = m.attributes().reach;
    if (r == btl::reach::own_process) return fmt::format("{}: this process only", m.name());
    if ((r & btl::reach::remote) == 0) return fmt::format("{}: this node", m.name());
    return fmt::format("{}: this node and others", m.name());
}

}  // namespace

void note_reached(std::span<const Rank> ranks, const btl::Reachability& reached) {
    if (!session || session->unreached_said) return;
    Session& s = *session;
    for (std::size_t j = 0; j < ranks.size(); ++j) {
        s.asked.push_back(ranks[j]);
        if (reached.test(j)) s.reached.push_back(ranks[j]);
    }
    if (++s.answered < s.adapters.size()) return;
    std::vector<Rank> missing;
    std::sort(s.reached.begin(), s.reached.end());
    for (Rank r : s.asked)
        if (r != s.runtime->rank() && !std::binary_search(s.reached.begin(), s.reached.end(), r))
            missing.push_back(r);
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    s.asked.clear();
    s.reached.clear();
    s.answered = 0;
    if (missing.empty()) return;
    s.unreached_said = true;
    std::vector<std::string> offered;
    for (const auto& a : s.adapters) offered.push_back(reach_of(a->inner()));
    std::string text =
        fmt::format("no Transit transport reaches {} peer(s) (rank {} first); offered {}",
                    missing.size(), missing.front(), fmt::join(offered, ", "));
    if (include_param != nullptr && *include_param != '\0')
        text += fmt::format(" (btl_transit_include is \"{}\")", include_param);
    opal_output(0, "btl:transit: %s", text.c_str());
}

namespace {

// The address another job's process published, or why there is none.
std::string address_of(opal_proc_t* proc, rt::PeerAddress& address) {
    std::uint8_t* bytes = nullptr;
    int size = 0;
    int rc = OPAL_SUCCESS;
    OPAL_MODEX_RECV_STRING(rc, address_key, &proc->proc_name, &bytes, &size);
    if (rc != OPAL_SUCCESS || bytes == nullptr)
        return "it published no Transit address (no btl transit there, or none of its "
               "transports carries processes of other jobs, or btl_transit_dynamic is 0)";
    const std::string text(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(size));
    std::free(bytes);
    const std::string bad = pml::parse_address(text, address);
    return bad.empty() ? bad : "its Transit address is unreadable: " + bad;
}

// The most exclusive module that carries peers outside the job and reaches
// it (vader on its node, tcp elsewhere): one connection, one module.
void connect_foreign(Session& s, opal_proc_t* proc, rt::PeerAddress address, Foreign& f,
                     std::vector<std::string>& why) {
    const Rank id = s.runtime->add_server(std::move(address));
    if (id == any_rank) {
        why.push_back("no peer id left");
        return;
    }
    std::vector<Adapter*> order;
    for (const auto& a : s.adapters) order.push_back(a.get());
    std::stable_sort(order.begin(), order.end(), [](Adapter* a, Adapter* b) {
        return a->inner().attributes().exclusivity > b->inner().attributes().exclusivity;
    });
    for (Adapter* a : order) {
        btl::Module& m = a->inner();
        if (!(m.attributes().flags & btl::flags::dynamic_peers)) {
            why.push_back(fmt::format("{}: does not carry processes of other jobs", m.name()));
            continue;
        }
        btl::Endpoint* ep = nullptr;
        btl::Reachability bits(1);
        if (const Status st = m.add_procs({&id, 1}, {&ep, 1}, bits); !ok(st)) {
            why.push_back(fmt::format("{}: add_procs failed ({})", m.name(), to_string(st)));
        } else if (!bits.test(0)) {
            why.push_back(fmt::format("{}: does not reach it", m.name()));
        } else {
            f = Foreign{.id = id, .via = a, .endpoint = ep};
            a->remember(id, proc);
            return;
        }
    }
    s.runtime->release(id);
}

}  // namespace

const Foreign& reach_foreign(opal_proc_t* proc) {
    static const Foreign none;
    if (!session) return none;
    Session& s = *session;
    const opal_process_name_t name = proc->proc_name;
    auto [it, fresh] = s.foreign.try_emplace(std::pair{name.jobid, name.vpid});
    Foreign& f = it->second;
    if (!fresh) return f;
    std::vector<std::string> why;
    rt::PeerAddress address;
    if (std::string bad = address_of(proc, address); !bad.empty())
        why.push_back(std::move(bad));
    else
        connect_foreign(s, proc, std::move(address), f, why);
    if (f.via == nullptr)
        opal_output(0, "btl:transit: no Transit transport reaches %s of another job: %s",
                    OPAL_NAME_PRINT(name), fmt::format("{}", fmt::join(why, "; ")).c_str());
    else
        say(1, "{} of another job: reached through {} (Transit peer {})", OPAL_NAME_PRINT(name),
            f.via->inner().name(), f.id);
    return f;
}

void forget_foreign(opal_proc_t* proc) noexcept {
    if (!session) return;
    const opal_process_name_t name = proc->proc_name;
    auto it = session->foreign.find(std::pair{name.jobid, name.vpid});
    if (it == session->foreign.end()) return;
    const Foreign f = it->second;
    session->foreign.erase(it);  // an unreached one is tried again if named again
    if (f.via == nullptr) return;
    Rank id = f.id;
    btl::Endpoint* ep = f.endpoint;
    f.via->inner().del_procs({&id, 1}, {&ep, 1});
    f.via->remember(id, nullptr);
    session->runtime->release(id);
    say(1, "{} of another job: connection closed (Transit peer {})", OPAL_NAME_PRINT(name), id);
}

bool outside_job(const btl::Endpoint& ep) noexcept {
    return session && ep.peer() >= session->runtime->size();
}

bool forward_error(btl::Module* m, Rank peer, std::uint32_t flags, const opal_proc_t* proc,
                   const char* info) {
    if (!session || peer == any_rank || peer < session->runtime->size()) return true;
    // A process of another job that disconnected or ended is no failure, and
    // one that connected to us is known to Open MPI by our connection to it.
    if ((flags & btl::error_flags::departed) == 0 && proc != nullptr) return true;
    say(1, "Transit peer {} (another job's process{}): {}", peer,
        proc != nullptr ? "" : " that connected to this one", info != nullptr ? info : "departed");
    if (proc == nullptr && session->runtime->is_dynamic(peer)) {
        try {
            session->gone.emplace_back(m, peer);
            gone_pending = true;
        } catch (...) {
            // Kept until the component closes.
        }
    }
    return false;
}

void before_first_add_procs() {
    if (!session || session->peers_refreshed) return;
    session->peers_refreshed = true;
    // Open MPI's fence has run: learn which peers share our node.
    session->runtime->fence();
    // Callbacks Open MPI's layers placed in the trigger table without asking
    // the btls (pml, osc and user tags; the btl range belongs to transports).
    for (int t = MCA_BTL_TAG_PML; t < MCA_BTL_TAG_MAX; ++t)
        if (mca_btl_base_active_message_trigger[t].cbfunc != nullptr &&
            !btl::am_table().registered(static_cast<btl::Tag>(t)))
            forward_tag(static_cast<mca_btl_base_tag_t>(t));
}

}  // namespace transit::ompi

extern "C" {

__attribute__((visibility("default"))) mca_btl_base_component_3_0_0_t mca_btl_transit_component = {
    .btl_version =
        {
            OPAL_MCA_BASE_VERSION_2_1_0("btl", 3, 1, 0),
            .mca_component_name = "transit",
            .mca_component_major_version = TRANSIT_ADAPTER_VERSION_MAJOR,
            .mca_component_minor_version = TRANSIT_ADAPTER_VERSION_MINOR,
            .mca_component_release_version = TRANSIT_ADAPTER_VERSION_PATCH,
            .mca_open_component = &transit::ompi::component_open,
            .mca_close_component = &transit::ompi::component_close,
            .mca_query_component = nullptr,
            .mca_register_component_params = &transit::ompi::component_register,
            .mca_component_flags = 0,
            .reserved = {},
        },
    .btl_data = {.param_field = MCA_BASE_METADATA_PARAM_NONE, .reserved = {}},
    .btl_init = &transit::ompi::component_init,
    .btl_progress = &transit::ompi::progress,
};

}  // extern "C"
