// The memory registrations a component hands out: the upper layer holds a
// handle (the address of a record here), peers name a registration by its key.
//
// A rendezvous registers and deregisters a buffer for every message, so the
// records come from a free list (no allocation once grown) and both lookups
// are direct.  A key is serial << 24 | index: the index finds the record, the
// serial makes the key of a deregistered registration useless once its record
// is reused, and serials start at a random point, so a peer cannot guess the
// keys of another peer's registrations from its own.  A handle is compared
// with the records' addresses as an integer before it is read: a stale,
// copied or made-up handle is refused, never followed.
//
// The record type is the component's (what it packs for peers, what it must
// release); it is a FreeList item.  To be found by key it also has key(),
// returning the key the caller stored in it after add().  A component whose
// peers name memory by its network library's keys (ofi) uses the table for
// its records and handle checks only.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>

#include "transit/btl/util/free_list.hpp"

namespace transit::btl::util {

template <typename Record>
concept KeyedRecord = FreeListItem<Record> && requires(const Record& r) {
    { r.key() } -> std::same_as<std::uint64_t>;
};

// A random serial below 2^39 (room for 2^39 more), odd so that it is never 0.
inline std::uint64_t random_first_serial() noexcept {
    std::uint64_t r = 0;
    try {
        std::random_device device;
        r = std::uint64_t{device()} << 32 | device();
    } catch (...) {
        r = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    return (r & ((std::uint64_t{1} << 39) - 1)) | 1;
}

template <FreeListItem Record>
class RegistrationTable {
  public:
    static constexpr unsigned index_bits = 24;
    static constexpr std::size_t max_live = std::size_t{1} << index_bits;

    RegistrationTable() : next_serial_(random_first_serial()) {
        // Every chunk holds `chunk` records (max_live is a multiple of it), so
        // an index finds its record by a division, not a walk of the chunks.
        records_.setup({.initial = 0, .max = max_live, .grow_by = chunk});
    }

    struct Added {
        Record* record = nullptr;  // nullptr: max_live are live, or memory ran out
        std::uint64_t key = 0;     // for the caller to store where record->key() reads it
    };
    Added add() noexcept {
        Record* r = records_.get();
        if (r == nullptr) return {};
        return {r, next_serial_++ << index_bits | records_.index(r)};
    }

    // The live record `handle` points at the start of, or nullptr.
    Record* live(const void* handle) noexcept {
        const auto at = reinterpret_cast<std::uintptr_t>(handle);
        for (std::size_t c = 0; c < records_.chunk_count(); ++c) {
            const std::span<Record> items = records_.chunk_items(c);
            const auto first = reinterpret_cast<std::uintptr_t>(items.data());
            if (at < first || at - first >= items.size_bytes()) continue;
            if ((at - first) % sizeof(Record) != 0) return nullptr;
            Record& r = items[(at - first) / sizeof(Record)];
            return r.in_use ? &r : nullptr;
        }
        return nullptr;
    }

    // The live record whose key is `key`, or nullptr.
    const Record* find(std::uint64_t key) const noexcept requires KeyedRecord<Record> {
        const std::size_t index = key & (max_live - 1);
        if (index >= records_.size()) return nullptr;
        const Record& r = records_.chunk_items(index / chunk)[index % chunk];
        return r.in_use && r.key() == key ? &r : nullptr;
    }

    // The record goes back to the list; what it holds is the caller's to release first.
    void remove(Record& r) noexcept { records_.put(&r); }
    // Every live record, the same way.
    void clear() noexcept {
        for_each_live([this](Record& r) { remove(r); });
    }

    template <typename F>
    void for_each_live(F f) noexcept {
        for (Record& r : records_.items())
            if (r.in_use) f(r);
    }

    std::size_t live_count() const noexcept { return records_.size() - records_.available(); }

  private:
    static constexpr std::size_t chunk = 64;
    static_assert(max_live % chunk == 0);

    FreeList<Record> records_;
    std::uint64_t next_serial_;
};

}  // namespace transit::btl::util
