// Logging of the received messages the pml drops.
#include "pml/drop_log.hpp"

#include "transit/btl/module.hpp"
#include "transit/log.hpp"

namespace transit::pml {

// The first few drops of each kind are logged, the last of them saying so: a
// peer sending garbage must not flood the log.
bool DropLog::admit(wire::Kind k) noexcept {
    return drops_[k].admit();
}

const char* DropLog::note(wire::Kind k) const noexcept {
    return drops_[k].at_limit() ? " (further drops of this kind are not logged)" : "";
}

// Called at the end, after the barrier: a late drop is in the count too.
void DropLog::report() const noexcept {
    for (int k = 0; k < wire::kind_count; ++k)
        if (drops_[k].unlogged() != 0)
            log::error("pml: {} messages of kind {} were dropped or refused in all ({} not logged)",
                       drops_[k].total(), wire::name(static_cast<wire::Kind>(k)),
                       drops_[k].unlogged());
}

void DropLog::received(wire::Kind k, const btl::ReceiveDescriptor& d, const char* why) noexcept {
    if (!admit(k)) return;
    // -1: a transport that does not say which endpoint a message came over.
    const long long from = d.endpoint ? static_cast<long long>(d.endpoint->peer()) : -1;
    log::error("pml: a message of kind {} ({} bytes) from rank {} was dropped: {}{}", wire::name(k),
               btl::total_length(btl::segments_of(d)), from, why, note(k));
}

// The sender is not a Transit pml of this version, or memory was corrupted on
// the way.
void DropLog::malformed(wire::Kind k, std::size_t n, Rank from) noexcept {
    if (!admit(k)) return;
    log::error("pml: a malformed message of kind {} ({} bytes) from rank {} was dropped{}",
               wire::name(k), n, from, note(k));
}

// Never dereferenced: a peer outside the job holds no job secret, and a stale
// handle is an honest peer's late message.
void DropLog::named(wire::Kind k, Rank from, const char* why) noexcept {
    if (!admit(k)) return;
    log::error("pml: a message of kind {} from rank {} was dropped: {}{}", wire::name(k),
               from == any_rank ? -1 : static_cast<long long>(from), why, note(k));
}

// Answered with the refusal (a one-sided request) or ignored (job control);
// either way nothing of ours was touched.
void DropLog::refused(wire::Kind k, Rank from, const char* why) noexcept {
    if (!admit(k)) return;
    log::error("pml: a message of kind {} from rank {} was refused: {}{}", wire::name(k),
               from == any_rank ? -1 : static_cast<long long>(from), why, note(k));
}

}  // namespace transit::pml
