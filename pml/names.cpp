// Names: publish this context's address under a name, look up another's.
// The launcher keeps them (PMIx publish/lookup) when it can; a singleton, or
// a rank whose launcher keeps no names (Slurm's srun), uses this user's name
// directory on the node (rt::NameChoice).
#include "runtime/name_service.hpp"

#include "pml/engine.hpp"

namespace transit::pml {

namespace {

bool valid(std::string_view name, std::string_view what) {
    const std::string bad = rt::name_problem(name);
    if (!bad.empty()) log::error("pml: {}: {}", what, bad);
    return bad.empty();
}

// Says once (and again if it changes) which service keeps the names.
void report(rt::NameChoice& names, const log::Stream& out) {
    std::string which;
    if (names.changed(which)) out.verbose(1, "{}", which);
}

}  // namespace

Status Engine::publish(std::string_view name) {
    if (!valid(name, "publish")) return Status::bad_param;
    std::string address;
    try {
        address = listen();
    } catch (const std::runtime_error& e) {
        log::error("pml: publish: {}", e.what());
        return Status::not_supported;
    }
    std::string why;
    const Status s = runtime_->names().publish_name(name, address, why);
    report(runtime_->names(), c_.out);
    if (!ok(s)) log::error("pml: publish: {}", why);
    return s;
}

Status Engine::lookup(std::string_view name, std::chrono::milliseconds wait, std::string& address) {
    if (!valid(name, "lookup")) return Status::bad_param;
    if (wait.count() < 0) {
        log::error("pml: lookup: a negative wait");
        return Status::bad_param;
    }
    std::string why;
    const Status s = runtime_->names().lookup_name(name, wait, address, why);
    report(runtime_->names(), c_.out);
    if (!ok(s)) log::error("pml: lookup: {}", why);
    return s;
}

Status Engine::unpublish(std::string_view name) {
    if (!valid(name, "unpublish")) return Status::bad_param;
    std::string why;
    const Status s = runtime_->names().unpublish_name(name, why);
    report(runtime_->names(), c_.out);
    if (!ok(s)) log::error("pml: unpublish: {}", why);
    return s;
}

}  // namespace transit::pml
