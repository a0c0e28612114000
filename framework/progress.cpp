// The progress engine's setup side; progress() itself is inline in the header.
#include "transit/progress.hpp"

#include <algorithm>

namespace transit {

ProgressEngine::Handle ProgressEngine::add(ProgressFn fn, void* context,
                                           ProgressPriority priority) {
    if (next_id_ == 0) next_id_ = 1;  // 0 is the invalid handle, even after wrapping
    const std::uint32_t id = next_id_++;
    std::vector<Entry>& list = priority == ProgressPriority::low ? low_ : normal_;
    list.push_back({fn, context, id});
    return Handle{id};
}

// The entry may be running right now (a callback removing itself), so it is
// only neutralised here and erased by compact() after the pass.
void ProgressEngine::remove(Handle h) {
    if (!h) return;
    for (std::vector<Entry>* list : {&normal_, &low_}) {
        for (Entry& e : *list) {
            if (e.id != h.id) continue;
            e.fn = &idle;
            e.context = nullptr;
            e.id = 0;
            dirty_ = true;
            return;
        }
    }
}

void ProgressEngine::compact() noexcept {
    auto removed = [](const Entry& e) { return e.id == 0; };
    std::erase_if(normal_, removed);
    std::erase_if(low_, removed);
    dirty_ = false;
}

ProgressEngine& progress_engine() {
    static ProgressEngine engine;
    return engine;
}

}  // namespace transit
