#include "runtime/name_choice.hpp"

#include <fmt/format.h>

#include "runtime/runtime.hpp"
#include "transit/params.hpp"

namespace transit::rt {

NameChoice::NameChoice(Runtime& runtime) noexcept
    : runtime_(runtime), launcher_(name_service(runtime)) {
    if (!launcher_) launcher_why_ = "no launcher";
}

NameService& NameChoice::current() {
    if (launcher_) return *launcher_;
    if (!directory_) {
        register_params();
        std::string dir = params::registry().get("runtime_names_dir").as_string();
        if (dir.empty()) dir = NameDirectory::default_path();
        directory_.emplace(std::move(dir), runtime_.job_id(), runtime_.rank());
    }
    return *directory_;
}

bool NameChoice::declined(Status s, std::string& why) {
    if (!launcher_ || s != Status::not_supported) return false;
    launcher_ = nullptr;
    launcher_why_ = why;
    why.clear();
    return true;
}

Status NameChoice::publish_name(std::string_view name, std::string_view value, std::string& why) {
    Status s = current().publish_name(name, value, why);
    if (declined(s, why)) s = current().publish_name(name, value, why);
    return s;
}

Status NameChoice::lookup_name(std::string_view name, std::chrono::milliseconds wait,
                               std::string& value, std::string& why) {
    Status s = current().lookup_name(name, wait, value, why);
    if (declined(s, why)) s = current().lookup_name(name, wait, value, why);
    return s;
}

Status NameChoice::unpublish_name(std::string_view name, std::string& why) {
    Status s = current().unpublish_name(name, why);
    if (declined(s, why)) s = current().unpublish_name(name, why);
    return s;
}

bool NameChoice::changed(std::string& which) {
    const std::string now =
        launcher_ ? std::string("names are kept by the launcher (PMIx publish/lookup)")
                  : fmt::format("names are kept in the name directory {} ({})",
                                directory_ ? directory_->path() : std::string("?"), launcher_why_);
    if (now == announced_) return false;
    announced_ = now;
    which = now;
    return true;
}

}  // namespace transit::rt
