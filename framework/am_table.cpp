// The process-wide active-message tag table.
#include "transit/btl/am_table.hpp"

namespace transit::btl {

Status AmTable::register_callback(Tag tag, ReceiveFn fn, void* cbdata) noexcept {
    // Tags below the btl range are reserved for the transports' own control traffic.
    if (tag < first(TagRange::btl) || fn == nullptr) return Status::bad_param;
    Entry& e = entries_[tag];
    if (e.fn != nullptr) return Status::exists;
    e = {fn, cbdata};
    return Status::success;
}

void AmTable::unregister_callback(Tag tag) noexcept {
    entries_[tag] = {};
}

AmTable& am_table() {
    static AmTable table;
    return table;
}

}  // namespace transit::btl
