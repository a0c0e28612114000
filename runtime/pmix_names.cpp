#include "runtime/pmix_names.hpp"

#include <pmix.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "runtime/pmix_util.hpp"
#include "transit/progress.hpp"

namespace transit::rt {
namespace {

using Clock = std::chrono::steady_clock;

// The launcher answers a publish or an unpublish at once; this bounds a
// launcher that stopped answering.
constexpr std::chrono::seconds answer_limit{10};
// A lookup that waits ends here at its wait and this much more (time for the
// launcher's answer), whatever the launcher does with PMIX_TIMEOUT: Open
// MPI 4.1's server holds the lookup until the name comes.
constexpr std::chrono::milliseconds lookup_grace{500};

Status from_pmix(pmix_status_t rc, std::string_view name, std::string& why) {
    switch (rc) {
        case PMIX_SUCCESS:
        case PMIX_OPERATION_SUCCEEDED:
            return Status::success;
        case PMIX_ERR_DUPLICATE_KEY:
            why = fmt::format("the name \"{}\" is already published", name);
            return Status::exists;
        case PMIX_ERR_NOT_FOUND:
            why = fmt::format("no process published the name \"{}\"", name);
            return Status::not_found;
        case PMIX_ERR_TIMEOUT:
            why = fmt::format("no process published the name \"{}\" in time", name);
            return Status::timeout;
        case PMIX_ERR_NO_PERMISSIONS:
            why = fmt::format("the name \"{}\" was published by another process", name);
            return Status::access_denied;
        case PMIX_ERR_NOT_SUPPORTED:
            why = "the launcher keeps no names (its PMIx server does not publish)";
            return Status::not_supported;
        case PMIX_ERR_BAD_PARAM:
            why = fmt::format("the launcher refused the name \"{}\"", name);
            return Status::bad_param;
        default:
            why = fmt::format("the launcher answered: {}", PMIx_Error_string(rc));
            return Status::error;
    }
}

// Waits for PMIx's callback until `until`, running the progress engine
// meanwhile (as a fence does): a process that serves peers goes on serving
// them while it waits for a name.
template <class Payload>
std::optional<pmix_status_t> wait_progressing(pmix::Completion<Payload>& done,
                                              Clock::time_point until) {
    for (unsigned idle = 0;;) {
        const auto nap = idle > 64 ? std::chrono::milliseconds(1) : std::chrono::milliseconds(0);
        if (const std::optional<pmix_status_t> s = done.wait_for(nap)) return s;
        if (Clock::now() >= until) return std::nullopt;
        idle = progress_engine().progress() > 0 ? 0 : idle + 1;
    }
}

// Starts a PMIx call with an operation callback and waits for it.
template <class Payload, class Call>
pmix_status_t call(const std::shared_ptr<pmix::Completion<Payload>>& done, Clock::time_point until,
                   Call&& start) {
    using Done = pmix::Completion<Payload>;
    void* cbdata = Done::to_cbdata(done);
    const pmix_status_t rc = std::forward<Call>(start)(cbdata);
    if (rc != PMIX_SUCCESS) {
        Done::complete(cbdata, rc);  // refused, or answered at once: no callback comes
        return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
    }
    return wait_progressing(*done, until).value_or(PMIX_ERR_TIMEOUT);
}

void on_op(pmix_status_t status, void* cbdata) {
    pmix::Completion<pmix::InfoList>::complete(cbdata, status);
}

// The key as PMIx takes it: a NULL-terminated array.
struct Keys {
    std::string key;
    std::array<char*, 2> argv{};
    char** get() {
        argv = {key.data(), nullptr};
        return argv.data();
    }
};

}  // namespace

Status PmixNames::publish_name(std::string_view name, std::string_view value, std::string& why) {
    if (mine_.contains(name)) return from_pmix(PMIX_ERR_DUPLICATE_KEY, name, why);
    auto done = std::make_shared<pmix::Completion<pmix::InfoList>>();
    pmix::InfoList& info = done->payload;
    const pmix_data_range_t range = PMIX_RANGE_SESSION;
    const pmix_persistence_t persist = PMIX_PERSIST_PROC;  // the address dies with us
    info.add_string(std::string(name).c_str(), std::string(value))
        .add(PMIX_RANGE, &range, PMIX_DATA_RANGE)
        .add(PMIX_PERSISTENCE, &persist, PMIX_PERSIST);
    const std::span<pmix_info_t> arr = info.finish();
    const pmix_status_t rc = call(done, Clock::now() + answer_limit, [&](void* cbdata) {
        return PMIx_Publish_nb(arr.data(), arr.size(), on_op, cbdata);
    });
    const Status s = from_pmix(rc, name, why);
    if (ok(s)) mine_.emplace(name);
    return s;
}

Status PmixNames::lookup_name(std::string_view name, std::chrono::milliseconds wait,
                              std::string& value, std::string& why) {
    struct Lookup {
        pmix::InfoList info;
        Keys keys;
        std::optional<std::string> value;
    };
    using Done = pmix::Completion<Lookup>;
    // 49 days at most: the milliseconds fit PMIx's 32 bits and the clock.
    wait = std::min(wait, std::chrono::milliseconds(std::numeric_limits<std::uint32_t>::max()));
    auto done = std::make_shared<Done>();
    Lookup& l = done->payload;
    l.keys.key = std::string(name);
    if (wait.count() > 0) {
        const int all = 0;
        const int seconds = static_cast<int>((wait.count() + 999) / 1000);
        const auto ms = static_cast<std::uint32_t>(wait.count());
        l.info.add(PMIX_WAIT, &all, PMIX_INT)
            .add(PMIX_TIMEOUT, &seconds, PMIX_INT)
            .add(lookup_wait_ms_key, &ms, PMIX_UINT32);
    }
    const pmix_data_range_t range = PMIX_RANGE_SESSION;
    l.info.add(PMIX_RANGE, &range, PMIX_DATA_RANGE);
    const std::span<pmix_info_t> arr = l.info.finish();
    char** keys = l.keys.get();
    auto on_lookup = [](pmix_status_t status, pmix_pdata_t data[], size_t n, void* cbdata) {
        Done::complete(cbdata, status, [&](Lookup& out) noexcept {
            for (size_t i = 0; i < n; ++i) {
                const pmix_value_t& v = data[i].value;
                if (v.type != PMIX_STRING || !v.data.string || out.keys.key != data[i].key)
                    continue;
                try {
                    out.value = v.data.string;
                } catch (...) {
                    // Out of memory: the name counts as not found.
                }
            }
        });
    };
    const auto until = Clock::now() + (wait.count() > 0 ? wait + lookup_grace : answer_limit);
    const pmix_status_t rc = call(done, until, [&](void* cbdata) {
        return PMIx_Lookup_nb(keys, arr.data(), arr.size(), on_lookup, cbdata);
    });
    if (rc == PMIX_SUCCESS && !l.value) return from_pmix(PMIX_ERR_NOT_FOUND, name, why);
    if (rc == PMIX_ERR_TIMEOUT && wait.count() > 0)
        why = fmt::format("no process published the name \"{}\" within {} ms", name, wait.count());
    const Status s = rc == PMIX_ERR_TIMEOUT ? Status::timeout : from_pmix(rc, name, why);
    if (ok(s)) value = *l.value;
    return s;
}

Status PmixNames::unpublish_name(std::string_view name, std::string& why) {
    // Launchers differ on names this process did not publish (Open MPI 4.1's
    // lets any process of the job remove one, and answers success for a name
    // never published): the rule here is the same under all of them.
    if (!mine_.contains(name)) {
        std::string value;
        const Status s = lookup_name(name, std::chrono::milliseconds(0), value, why);
        if (s == Status::success) {
            why = fmt::format("the name \"{}\" was published by another process", name);
            return Status::access_denied;
        }
        if (s == Status::not_found) why = fmt::format("the name \"{}\" is not published", name);
        return s;
    }
    struct Unpublish {
        pmix::InfoList info;
        Keys keys;
    };
    using Done = pmix::Completion<Unpublish>;
    auto done = std::make_shared<Done>();
    Unpublish& u = done->payload;
    u.keys.key = std::string(name);
    const pmix_data_range_t range = PMIX_RANGE_SESSION;
    u.info.add(PMIX_RANGE, &range, PMIX_DATA_RANGE);
    const std::span<pmix_info_t> arr = u.info.finish();
    char** keys = u.keys.get();
    const pmix_status_t rc = call(done, Clock::now() + answer_limit, [&](void* cbdata) {
        return PMIx_Unpublish_nb(
            keys, arr.data(), arr.size(),
            [](pmix_status_t status, void* cb) { Done::complete(cb, status); }, cbdata);
    });
    if (const auto it = mine_.find(name); it != mine_.end()) mine_.erase(it);
    return from_pmix(rc, name, why);
}

}  // namespace transit::rt
