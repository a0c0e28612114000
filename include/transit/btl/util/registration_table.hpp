// The memory registrations a component hands out: the upper layer holds a
// handle (the address of a record here), peers name a registration by its key.
//
// A rendezvous registers and deregisters a buffer for every message, so the
// records come from a free list (no allocation once grown) and both lookups
// are direct.  A key is two words: an id, serial << 24 | index, whose index
// finds the record and whose serial makes the key of a deregistered
// registration useless once its record is reused; and a secret, 64 random bits
// drawn per registration.  The ids are predictable from one another, the
// secrets are not: a peer holding some keys has one chance in 2^64 per try of
// naming a registration it was not given, and every wrong try is refused (the
// component logs it, rate-limited).  A handle is compared with the records'
// addresses as an integer before it is read: a stale, copied or made-up handle
// is refused, never followed.
//
// The record type is the component's (what it packs for peers, what it must
// release); it is a FreeList item.  To be found by key it also has key(),
// returning the key the caller stored in it after add().  A component whose
// peers name memory by its network library's keys (ofi) uses the table for
// its records and handle checks only.
#pragma once

#include <sys/random.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include "transit/btl/util/free_list.hpp"
#include "transit/btl/util/random_bits.hpp"

namespace transit::btl::util {

// What a peer names a registration by (16 bytes on the wire).
struct RegistrationKey {
    std::uint64_t id = 0;      // serial << 24 | index
    std::uint64_t secret = 0;  // random per registration
    friend constexpr bool operator==(const RegistrationKey&, const RegistrationKey&) = default;
};
static_assert(sizeof(RegistrationKey) == 16);

template <typename Record>
concept KeyedRecord = FreeListItem<Record> && requires(const Record& r) {
    { r.key() } -> std::same_as<RegistrationKey>;
};

// A random serial below 2^39 (room for 2^39 more), odd so that it is never 0.
inline std::uint64_t random_first_serial() noexcept {
    return (random_u64() & ((std::uint64_t{1} << 39) - 1)) | 1;
}

// Random words drawn from the kernel a batch at a time: a registration per
// rendezvous must not cost a system call each.
class RandomWords {
  public:
    std::uint64_t next() noexcept {
        if (left_ == 0) refill();
        return words_[--left_];
    }

  private:
    void refill() noexcept {
        const auto want = static_cast<ssize_t>(sizeof words_);
        if (::getrandom(words_.data(), sizeof words_, 0) != want)
            for (std::uint64_t& w : words_) w = random_u64();
        left_ = words_.size();
    }
    std::array<std::uint64_t, 32> words_{};
    std::size_t left_ = 0;
};

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
        RegistrationKey key{};     // for the caller to store where record->key() reads it
    };
    Added add() noexcept {
        Record* r = records_.get();
        if (r == nullptr) return {};
        return {r, {next_serial_++ << index_bits | records_.index(r), secrets_.next()}};
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

    // The live record whose key is `key` (id and secret), or nullptr.
    const Record* find(const RegistrationKey& key) const noexcept requires KeyedRecord<Record> {
        const std::size_t index = key.id & (max_live - 1);
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
    RandomWords secrets_;
};

}  // namespace transit::btl::util
