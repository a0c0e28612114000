#include "runtime/name_service.hpp"

namespace transit::rt {

std::string name_problem(std::string_view name) {
    if (name.empty()) return "the name is empty";
    if (name.size() > max_name_length)
        return "the name is longer than " + std::to_string(max_name_length) + " bytes";
    if (name.starts_with("pmix.")) return "names starting with \"pmix.\" are PMIx's own";
    for (const char c : name)
        if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f)
            return "the name holds a space or a control character";
    return {};
}

NameService* name_service(Runtime& runtime) noexcept {
    return dynamic_cast<NameService*>(&runtime);
}

}  // namespace transit::rt
