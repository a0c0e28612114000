// The registrations of every module of the uct component in this process: the
// upper layer may register memory through one module and have a peer reach it
// through another (posix and tcp both reach a peer on this node), so a key
// means the same region whichever module the request comes in on.
//
// The records, their keys and the checks of handles are the SDK's
// RegistrationTable (no allocation per registration, direct lookups).
#pragma once

#include <uct/api/uct.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "transit/btl/types.hpp"
#include "transit/btl/util/registration_table.hpp"
#include "uct_wire.hpp"

namespace transit::uct {

// A registered range and what peers may do to it (btl::reg_flags).
struct Region {
    std::uint64_t base = 0;
    std::uint64_t len = 0;
    std::uint32_t access = 0;
};

// The handle given to the upper layer points at `packed`, its first member,
// which holds the key and the region (a PackedHandle) for peers and for the
// lookups here.  A registration with a memory domain (native RDMA) is released
// with it.
struct Registration {
    alignas(8) std::array<std::byte, btl::max_registration_handle_size> packed{};
    uct_md_h md = nullptr;  // the memory domain holding memh, or nullptr
    uct_mem_h memh = nullptr;
    Registration* next_free = nullptr;
    bool in_use = false;

    Registration() = default;
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration() { release(); }
    void release() noexcept {
        if (md != nullptr && memh != nullptr) uct_md_mem_dereg(md, memh);
        md = nullptr;
        memh = nullptr;
    }
    PackedHandle header() const noexcept {
        PackedHandle h;
        std::memcpy(&h, packed.data(), sizeof h);
        return h;
    }
    btl::util::RegistrationKey key() const noexcept {
        const PackedHandle h = header();
        return {h.key, h.secret};
    }
};

// The component's table (btl::util::RegistrationTable) with the region
// written into each record's packed handle.
class Regions {
  public:
    // A record for `region`, its key and packed header written; nullptr when
    // the table is full or memory ran out.
    Registration* add(const Region& region) noexcept {
        const auto [r, key] = table_.add();
        if (r == nullptr) return nullptr;
        const PackedHandle h{key.id,     key.secret,    region.base,
                             region.len, region.access, handle_magic};
        std::memcpy(r->packed.data(), &h, sizeof h);
        return r;
    }

    // The live record `handle` points at, or nullptr for anything else.
    Registration* live(const void* handle) noexcept { return table_.live(handle); }

    // Releases its memory-domain registration and frees the record.
    void remove(Registration& r) noexcept {
        r.release();
        table_.remove(r);
    }

    // The region a peer's key names, or nothing when no live registration has it.
    std::optional<Region> find(const btl::util::RegistrationKey& key) const noexcept {
        const Registration* r = table_.find(key);
        if (r == nullptr) return std::nullopt;
        const PackedHandle h = r->header();
        return Region{h.base, h.len, h.access};
    }

    template <typename F>
    void for_each_live(F f) noexcept {
        table_.for_each_live(f);
    }

    std::size_t live_count() const noexcept { return table_.live_count(); }

  private:
    btl::util::RegistrationTable<Registration> table_;
};

}  // namespace transit::uct
