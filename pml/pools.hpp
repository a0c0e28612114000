// Free lists and intrusive lists for the hot path: objects are allocated in
// blocks when a pool runs dry and recycled forever after, so steady-state
// traffic never touches the heap.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

namespace transit::pml {

// T must have a `T* next` member (used while the object is free).
template <typename T, std::size_t Block = 64>
class FreeList {
  public:
    T* get() noexcept {
        if (!head_) [[unlikely]]
            if (!grow()) return nullptr;
        T* t = head_;
        head_ = t->next;
        t->next = nullptr;
        return t;
    }
    void put(T* t) noexcept {
        t->next = head_;
        head_ = t;
    }
    // Visits every object, free or not (for rare whole-pool sweeps).  Blocks
    // added while visiting are visited too; objects never move.
    template <typename F>
    void for_each(F f) noexcept {
        for (std::size_t b = 0; b < blocks_.size(); ++b)
            for (T& t : *blocks_[b]) f(&t);
    }
    // At most about `objects` (rounded up to whole blocks) ever exist; past
    // that get() returns null as when memory runs out.  0: no limit.
    void set_limit(std::size_t objects) noexcept {
        max_blocks_ = objects == 0 ? 0 : (objects + Block - 1) / Block;
    }

  private:
    bool grow() noexcept {
        if (max_blocks_ != 0 && blocks_.size() >= max_blocks_) return false;
        try {
            auto block = std::make_unique<std::array<T, Block>>();
            for (T& t : *block) put(&t);
            blocks_.push_back(std::move(block));
            return true;
        } catch (...) {
            return false;
        }
    }
    T* head_ = nullptr;
    std::vector<std::unique_ptr<std::array<T, Block>>> blocks_;
    std::size_t max_blocks_ = 0;
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
