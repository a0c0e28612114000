// Pools and intrusive lists for the hot path: objects are allocated in blocks
// when a pool runs dry and recycled forever after, so steady-state traffic
// never touches the heap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "transit/btl/util/free_list.hpp"
#include "transit/btl/util/random_bits.hpp"

namespace transit::pml {

// A pool of the pml's objects: the toolkit's free list, grown `block` objects
// at a time whenever it runs dry.  T names the list's link and state
// (`T* next_free`, `bool in_use`), apart from any `next` it has for a List.
template <typename T>
class Pool : public btl::util::FreeList<T> {
  public:
    static constexpr std::size_t block = 64;

    Pool() { bound(0); }
    // At most `max` objects ever exist (0: no limit); past that get() returns
    // nullptr as when memory runs out.  Before the first get() only.
    void bound(std::size_t max) { this->setup({.max = max, .grow_by = block}); }
};

// What names a pooled object to a peer: its slot number (low 32 bits) and the
// slot's generation (high 32 bits).  A peer echoes it back; it is never a
// pointer, so a forged or stale one names nothing.
using WireHandle = std::uint64_t;

template <typename T>
concept Nameable = requires(T& t) {
    requires std::is_same_v<decltype(t.slot), std::uint32_t>;
    requires std::is_same_v<decltype(t.generation), std::uint32_t>;
};

// A pool whose objects peers may name by handle.  Each object gets a slot the
// first time it is handed out (slots_ maps slot to object in O(1)) and a
// random nonzero generation, moved on at every release: a handle names the
// object only while the use it was given out for lasts, and a peer cannot
// guess another use's handle.  find() is one bounds check and two compares.
template <Nameable T>
class NamedPool : public Pool<T> {
  public:
    static constexpr std::uint32_t no_slot = ~std::uint32_t{0};

    NamedPool() noexcept : random_(btl::util::random_u64()) {}
    void bound(std::size_t max) {
        slots_.clear();
        Pool<T>::bound(max);
    }
    T* get() noexcept {
        T* t = Pool<T>::get();
        if (t && t->slot == no_slot) [[unlikely]]
            if (!name(t)) {
                Pool<T>::put(t);
                return nullptr;
            }
        return t;
    }
    bool put(T* t) noexcept {
        if (!t || !t->in_use) [[unlikely]]
            return false;
        if (++t->generation == 0) [[unlikely]]
            t->generation = 1;
        return Pool<T>::put(t);
    }
    static WireHandle handle(const T& t) noexcept {
        return std::uint64_t{t.generation} << 32 | t.slot;
    }
    // The object in use that `h` names, or nullptr.
    T* find(WireHandle h) const noexcept {
        const auto i = static_cast<std::uint32_t>(h);
        if (i >= slots_.size()) return nullptr;
        T* t = slots_[i];
        return t->in_use && t->generation == static_cast<std::uint32_t>(h >> 32) ? t : nullptr;
    }

  private:
    bool name(T* t) noexcept {
        if (slots_.size() >= no_slot) return false;
        try {
            slots_.push_back(t);
        } catch (...) {
            return false;
        }
        t->slot = static_cast<std::uint32_t>(slots_.size() - 1);
        do t->generation = static_cast<std::uint32_t>(random_() >> 32);
        while (t->generation == 0);
        return true;
    }
    std::vector<T*> slots_;
    std::mt19937_64 random_;
};

// Doubly linked list threading through T::prev / T::next.
template <typename T>
class List {
  public:
    bool empty() const noexcept { return head_ == nullptr; }
    T* front() const noexcept { return head_; }
    std::size_t size() const noexcept { return size_; }
    void push_back(T* t) noexcept {
        t->next = nullptr;
        t->prev = tail_;
        if (tail_)
            tail_->next = t;
        else
            head_ = t;
        tail_ = t;
        ++size_;
    }
    void erase(T* t) noexcept {
        if (t->prev)
            t->prev->next = t->next;
        else
            head_ = t->next;
        if (t->next)
            t->next->prev = t->prev;
        else
            tail_ = t->prev;
        t->next = t->prev = nullptr;
        --size_;
    }
    T* pop_front() noexcept {
        T* t = head_;
        if (t) erase(t);
        return t;
    }

  private:
    T* head_ = nullptr;
    T* tail_ = nullptr;
    std::size_t size_ = 0;
};

// Byte buffers in power-of-two size classes (64 B .. 64 MiB).
class BufferPool {
  public:
    static constexpr int min_shift = 6;
    static constexpr int classes = 21;

    // nullptr when the size is too large or memory is exhausted.
    std::byte* get(std::size_t size, int& cls) noexcept {
        cls = class_of(size);
        if (cls >= classes) return nullptr;
        auto& fl = free_[cls];
        if (!fl.empty()) {
            std::byte* b = fl.back();
            fl.pop_back();
            return b;
        }
        try {
            fl.reserve(fl.size() + 1);  // so put() never allocates
            auto buf = std::make_unique<std::byte[]>(std::size_t{1} << (cls + min_shift));
            std::byte* b = buf.get();
            owned_.push_back(std::move(buf));
            return b;
        } catch (...) {
            return nullptr;
        }
    }
    void put(std::byte* b, int cls) noexcept { free_[cls].push_back(b); }

  private:
    static int class_of(std::size_t size) noexcept {
        int c = 0;
        while ((std::size_t{1} << (c + min_shift)) < size) ++c;
        return c;
    }
    std::array<std::vector<std::byte*>, classes> free_;
    std::vector<std::unique_ptr<std::byte[]>> owned_;
};

}  // namespace transit::pml
