// Pools and intrusive lists for the hot path: objects are allocated in blocks
// when a pool runs dry and recycled forever after, so steady-state traffic
// never touches the heap.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "transit/btl/util/free_list.hpp"

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
