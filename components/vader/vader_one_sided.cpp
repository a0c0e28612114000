#include "components/vader/vader_one_sided.hpp"

#include <cstring>
#include <new>
#include <optional>

#include "components/vader/vader_atomics.hpp"
#include "components/vader/vader_cma.hpp"
#include "components/vader/vader_module.hpp"

namespace transit::vader {

void VaderOneSided::format(const Layout& layout) {
    heap_ = SegmentHeap(layout.heap_offset, layout.heap_size);
    auto* slots = reinterpret_cast<btl::RegionSlot*>(segment_.data() + layout.region_offset);
    for (std::uint32_t i = 0; i < region_slot_count; ++i) new (&slots[i]) btl::RegionSlot{};
    regions_ = btl::RegionTable(slots, region_slot_count);
}

Status VaderOneSided::put(const btl::RdmaRequest& req) noexcept {
    VaderEndpoint* ep = static_cast<VaderEndpoint*>(req.endpoint);
    if (ep == nullptr) [[unlikely]]
        return Status::bad_param;
    if (ep->dead) return Status::peer_failed;
    if (const Status s = btl::region_permits(ep->regions, req.remote_handle, req.remote, req.size,
                                             btl::reg_flags::remote_write);
        !ok(s)) [[unlikely]]
        return s;
    if (char* direct = ep->translate(req.remote, req.size); direct != nullptr) {
        if (req.size) std::memcpy(direct, req.local, req.size);
        return Status::completed;
    }
    if (single_copy_ != SingleCopy::cma) return Status::not_supported;
    return cma_write(ep->pid, req.local, req.remote, req.size);
}

Status VaderOneSided::get(const btl::RdmaRequest& req) noexcept {
    VaderEndpoint* ep = static_cast<VaderEndpoint*>(req.endpoint);
    if (ep == nullptr) [[unlikely]]
        return Status::bad_param;
    if (ep->dead) return Status::peer_failed;
    if (const Status s = btl::region_permits(ep->regions, req.remote_handle, req.remote, req.size,
                                             btl::reg_flags::remote_read);
        !ok(s)) [[unlikely]]
        return s;
    if (const char* direct = ep->translate(req.remote, req.size); direct != nullptr) {
        if (req.size) std::memcpy(req.local, direct, req.size);
        return Status::completed;
    }
    if (single_copy_ != SingleCopy::cma) return Status::not_supported;
    return cma_read(ep->pid, req.local, req.remote, req.size);
}

// --- mem_alloc -----------------------------------------------------------------

void* VaderOneSided::mem_alloc(std::size_t size) noexcept {
    try {
        const std::optional<std::size_t> offset = heap_.take(size);
        if (!offset) return nullptr;
        if (!segment_.provide(*offset, SegmentHeap::rounded(size))) {
            out_.verbose(5, "mem_alloc({}): {} cannot supply the pages", size,
                         config_.backing_directory);
            heap_.give(*offset);
            return nullptr;
        }
        return segment_.data() + *offset;
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}

bool VaderOneSided::mem_free(void* p) noexcept {
    const auto* c = static_cast<const char*>(p);
    if (c < segment_.data() || c >= segment_.data() + segment_.size()) return false;
    const auto offset = static_cast<std::size_t>(c - segment_.data());
    try {
        const std::size_t size = heap_.give(offset);
        if (size == 0) return false;
        segment_.reclaim(offset, size);  // fresh (zero) pages on the next mem_alloc
        return true;
    } catch (const std::bad_alloc&) {
        return true;  // ours, but merging the free list needed memory: the block stays taken
    }
}

// Peers check the region table before every put, get and atomic: what is not
// registered here is out of their reach.
btl::RegistrationHandle* VaderOneSided::register_mem(btl::Endpoint*, void* base, std::size_t size,
                                                     std::uint32_t flags) {
    if (base == nullptr && size != 0) return nullptr;
    btl::RegistrationHandle* h = regions_.add(base, size, flags);
    if (h == nullptr)
        out_.verbose(5, "register_mem: all {} region slots are taken", region_slot_count);
    return h;
}

Status VaderOneSided::deregister_mem(btl::RegistrationHandle* handle) {
    return regions_.remove(handle);
}

// put and get complete at once: only atomics that went to the target as a
// fragment can be outstanding.
Status VaderOneSided::flush(btl::Endpoint* endpoint) {
    while (atomics_.in_flight(endpoint)) progress_hook_.flush_round();
    const auto* ep = static_cast<const VaderEndpoint*>(endpoint);
    return ep != nullptr && ep->dead ? Status::peer_failed : Status::success;
}

}  // namespace transit::vader
