// Names under a launcher: publish this context's address under a name, look
// up another's (PMIx publish/lookup through the runtime, rt::NameService).
#include "runtime/name_service.hpp"

#include "pml/engine.hpp"

namespace transit::pml {

namespace {

// The launcher's name service, or nullptr with the reason logged.
rt::NameService* names_of(rt::DynamicRuntime& runtime, std::string_view what) {
    rt::NameService* names = rt::name_service(runtime.inner());
    if (!names)
        log::error(
            "pml: {}: this process has no launcher (a singleton): names need a PMIx launcher "
            "such as transit_run or mpirun",
            what);
    return names;
}

bool valid(std::string_view name, std::string_view what) {
    const std::string bad = rt::name_problem(name);
    if (!bad.empty()) log::error("pml: {}: {}", what, bad);
    return bad.empty();
}

}  // namespace

Status Engine::publish(std::string_view name) {
    if (!valid(name, "publish")) return Status::bad_param;
    rt::NameService* names = names_of(*runtime_, "publish");
    if (!names) return Status::not_supported;
    std::string address;
    try {
        address = listen();
    } catch (const std::runtime_error& e) {
        log::error("pml: publish: {}", e.what());
        return Status::not_supported;
    }
    std::string why;
    const Status s = names->publish_name(name, address, why);
    if (!ok(s)) log::error("pml: publish: {}", why);
    return s;
}

Status Engine::lookup(std::string_view name, std::chrono::milliseconds wait, std::string& address) {
    if (!valid(name, "lookup")) return Status::bad_param;
    if (wait.count() < 0) {
        log::error("pml: lookup: a negative wait");
        return Status::bad_param;
    }
    rt::NameService* names = names_of(*runtime_, "lookup");
    if (!names) return Status::not_supported;
    std::string why;
    const Status s = names->lookup_name(name, wait, address, why);
    if (!ok(s)) log::error("pml: lookup: {}", why);
    return s;
}

Status Engine::unpublish(std::string_view name) {
    if (!valid(name, "unpublish")) return Status::bad_param;
    rt::NameService* names = names_of(*runtime_, "unpublish");
    if (!names) return Status::not_supported;
    std::string why;
    const Status s = names->unpublish_name(name, why);
    if (!ok(s)) log::error("pml: unpublish: {}", why);
    return s;
}

}  // namespace transit::pml
