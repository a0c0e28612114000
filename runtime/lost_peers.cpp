#include "runtime/lost_peers.hpp"

#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>

#include "runtime/pmix_util.hpp"

namespace transit::rt {
namespace {

bool same_job(std::string_view nspace, const pmix_proc_t& p) {
    return nspace == std::string_view(p.nspace, ::strnlen(p.nspace, PMIX_MAX_NSLEN + 1));
}

void add_rank(std::vector<Rank>& out, std::string_view nspace, const pmix_proc_t& p) {
    if (!same_job(nspace, p) || p.rank == PMIX_RANK_WILDCARD || p.rank >= PMIX_RANK_VALID) return;
    if (std::find(out.begin(), out.end(), p.rank) == out.end()) out.push_back(p.rank);
}

// The states of the live LostPeers of this process.  PMIx hands its handler no
// pointer of ours reliably: the PMIX_EVENT_RETURN_OBJECT it should append was
// missing from most events under load (OpenPMIx 4.2.2), so the handler looks
// its states up here.  Removing a state under the lock means no handler still
// uses it once the removal returns.
struct Registry {
    std::mutex mutex;
    std::vector<LostPeers::State*> states;
};

Registry& registry() {
    // Never destroyed: PMIx's thread may deliver an event while the process
    // exits with a runtime still open.
    static Registry* const r = std::make_unique<Registry>().release();
    return *r;
}

// PMIx's answer to (de)registering the handler, waited for with a limit:
// finalize above all must not hang on a PMIx thread that no longer answers.
// The payload receives the handler's reference.
using Registration = pmix::Completion<std::size_t>;

constexpr std::chrono::seconds pmix_answer_limit{5};

// Runs on PMIx's thread.
void on_event(std::size_t, pmix_status_t, const pmix_proc_t* source, pmix_info_t info[],
              std::size_t ninfo, pmix_info_t*, std::size_t,
              pmix_event_notification_cbfunc_fn_t cbfunc, void* cbdata) {
    {
        Registry& reg = registry();
        std::lock_guard lock(reg.mutex);
        for (LostPeers::State* s : reg.states)
            s->record(affected_ranks(s->nspace, source, info, ninfo));
    }
    // Not "action complete": other handlers (a host MPI's) see the event too.
    if (cbfunc) cbfunc(PMIX_SUCCESS, nullptr, 0, nullptr, nullptr, cbdata);
}

}  // namespace

std::vector<Rank> affected_ranks(std::string_view nspace, const pmix_proc_t* source,
                                 const pmix_info_t* info, std::size_t ninfo) {
    std::vector<Rank> out;
    bool named = false;
    for (std::size_t i = 0; i < ninfo && info != nullptr; ++i) {
        const pmix_value_t& v = info[i].value;
        if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROC) && v.type == PMIX_PROC &&
            v.data.proc != nullptr) {
            named = true;
            add_rank(out, nspace, *v.data.proc);
        } else if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROCS) &&
                   v.type == PMIX_DATA_ARRAY && v.data.darray != nullptr &&
                   v.data.darray->type == PMIX_PROC) {
            named = true;
            const auto* procs = static_cast<const pmix_proc_t*>(v.data.darray->array);
            for (std::size_t k = 0; procs != nullptr && k < v.data.darray->size; ++k)
                add_rank(out, nspace, procs[k]);
        }
    }
    if (!named && source != nullptr) add_rank(out, nspace, *source);
    return out;
}

void LostPeers::State::record(const std::vector<Rank>& lost) {
    std::lock_guard lock(mutex);
    for (Rank r : lost)
        if (r != self && std::find(ranks.begin(), ranks.end(), r) == ranks.end())
            ranks.push_back(r);
    count.store(static_cast<std::uint32_t>(ranks.size()), std::memory_order_release);
}

void LostPeers::add(Rank lost) noexcept {
    try {
        state_->record({lost});
    } catch (...) {
        // Out of memory: the rank stays unknown here, as without the report.
    }
}

std::vector<Rank> LostPeers::ranks() const {
    std::lock_guard lock(state_->mutex);
    return state_->ranks;
}

LostPeers::LostPeers(std::string nspace, Rank self) : state_(std::make_unique<State>()) {
    state_->nspace = std::move(nspace);
    state_->self = self;
    pmix_status_t codes[std::size(lost_process_events)];
    std::copy(std::begin(lost_process_events), std::end(lost_process_events), codes);
    // Allocated before the state is listed: a throw past the listing would
    // leave the list naming a state this failed constructor frees.
    auto reg = std::make_shared<Registration>();
    void* cbdata = Registration::to_cbdata(reg);
    try {
        Registry& list = registry();
        std::lock_guard lock(list.mutex);
        list.states.push_back(state_.get());
    } catch (...) {
        Registration::complete(cbdata, PMIX_ERR_NOMEM);
        throw;
    }
    const pmix_status_t rc = PMIx_Register_event_handler(
        codes, std::size(codes), nullptr, 0, on_event,
        [](pmix_status_t status, std::size_t ref, void* cb) {
            Registration::complete(cb, status, [ref](std::size_t& out) noexcept { out = ref; });
        },
        cbdata);
    if (rc != PMIX_SUCCESS) {
        Registration::complete(cbdata, rc);  // refused at once: the callback never comes
        return;
    }
    const auto status = reg->wait_for(pmix_answer_limit);
    if (!status) return;  // registered late or never: events still land
    registered_ = *status == PMIX_SUCCESS;
    ref_ = reg->payload;
}

LostPeers::~LostPeers() {
    {
        Registry& reg = registry();
        std::lock_guard lock(reg.mutex);
        std::erase(reg.states, state_.get());
    }
    if (!registered_) return;
    auto dereg = std::make_shared<Registration>();
    void* cbdata = Registration::to_cbdata(dereg);
    const pmix_status_t rc = PMIx_Deregister_event_handler(
        ref_, [](pmix_status_t status, void* cb) { Registration::complete(cb, status); }, cbdata);
    if (rc != PMIX_SUCCESS)
        Registration::complete(cbdata, rc);  // refused at once: the callback never comes
    else
        dereg->wait_for(pmix_answer_limit);
}

}  // namespace transit::rt
