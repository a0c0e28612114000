// The registrations of every module of the uct component in this process: the
// upper layer may register memory through one module and have a peer reach it
// through another (posix and tcp both reach a peer on this node), so a key
// means the same region whichever module the request comes in on.
//
// A rendezvous registers and deregisters a buffer for every message, so the
// records come from a free list (no allocation once grown) and both lookups
// are direct: a key carries its record's index (and a serial, so the key of a
// deregistered region never names the record's next region, and a peer cannot
// guess keys: serials start at a random point), and a handle is
// the address of its record, checked against the list's chunks before it is
// read.
#pragma once

#include <uct/api/uct.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>

#include "transit/btl/types.hpp"
#include "transit/btl/util/free_list.hpp"
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
};

struct Regions {
    // A key is serial << index_bits | index.
    static constexpr unsigned index_bits = 24;
    static constexpr std::uint64_t index_mask = (std::uint64_t{1} << index_bits) - 1;

    Regions() : next_serial_(first_serial()) {
        records_.setup({.initial = 0, .max = std::size_t{1} << index_bits, .grow_by = 64});
    }

    // A record for `region`, its key and packed header written; nullptr when
    // 2^24 are live or memory ran out.
    Registration* add(const Region& region) noexcept {
        Registration* r = records_.get();
        if (r == nullptr) return nullptr;
        const std::uint64_t key = next_serial_++ << index_bits | records_.index(r);
        const PackedHandle h{key, region.base, region.len, region.access, handle_magic};
        std::memcpy(r->packed.data(), &h, sizeof h);
        return r;
    }

    // The live record `handle` points at, or nullptr for anything else: a
    // handle is compared with the records' addresses as an integer (no
    // pointer arithmetic on a foreign address), and read only once it is
    // found to be the start of one.
    Registration* live(const void* handle) noexcept {
        const auto at = reinterpret_cast<std::uintptr_t>(handle);
        for (std::size_t c = 0; c < records_.chunk_count(); ++c) {
            const std::span<Registration> items = records_.chunk_items(c);
            const auto first = reinterpret_cast<std::uintptr_t>(items.data());
            if (at < first || at - first >= items.size_bytes()) continue;
            if ((at - first) % sizeof(Registration) != 0) return nullptr;
            Registration& r = items[(at - first) / sizeof(Registration)];
            return r.in_use ? &r : nullptr;
        }
        return nullptr;
    }

    // Releases its memory-domain registration and frees the record.
    void remove(Registration& r) noexcept {
        r.release();
        records_.put(&r);
    }

    // The region a peer's key names, or nothing when no live registration has it.
    std::optional<Region> find(std::uint64_t key) const noexcept {
        const std::uint64_t index = key & index_mask;
        if (index >= records_.size()) return std::nullopt;
        const Registration& r = records_.at(index);
        if (!r.in_use) return std::nullopt;
        const PackedHandle h = r.header();
        if (h.key != key) return std::nullopt;
        return Region{h.base, h.len, h.access};
    }

    template <typename F>
    void for_each_live(F f) noexcept {
        for (Registration& r : records_.items())
            if (r.in_use) f(r);
    }

    std::size_t live_count() const noexcept { return records_.size() - records_.available(); }

  private:
    btl::util::FreeList<Registration> records_;
    // Serials start at a random point below 2^39 (room for 2^39 more), so a
    // peer cannot guess the key of another peer's registration from its own.
    static std::uint64_t first_serial() noexcept {
        std::uint64_t r = 0;
        try {
            std::random_device device;
            r = std::uint64_t{device()} << 32 | device();
        } catch (...) {
            r = static_cast<std::uint64_t>(
                std::chrono::steady_clock::now().time_since_epoch().count());
        }
        return (r & ((std::uint64_t{1} << 39) - 1)) | 1;
    }

    std::uint64_t next_serial_;
};

}  // namespace transit::uct
