// The self fragment (send descriptor) and the bounded pool it comes from.
//
// Every fragment and its buffer are created when the module is set up; alloc and
// free only pop and push an intrusive list, so the send path never touches the
// heap.  An empty pool is the module's out-of-resource condition.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "transit/btl/types.hpp"

namespace transit::self {

class FragPool;

struct SelfFrag : btl::Descriptor {
    // Two segments: header + in-place user data (prepare_src), else one.
    btl::Segment segs[2]{};
    std::byte* buffer = nullptr;
    std::size_t capacity = 0;
    FragPool* pool = nullptr;
    SelfFrag* next_free = nullptr;
    bool in_use = false;  // catches a double free, which would corrupt the list
};

class FragPool {
  public:
    FragPool() = default;
    FragPool(const FragPool&) = delete;
    FragPool& operator=(const FragPool&) = delete;

    // Setup only (may throw std::bad_alloc).  `locking`: several threads may
    // alloc and free at once; single-threaded processes skip the lock entirely.
    void setup(std::size_t count, std::size_t capacity, bool locking) {
        locking_ = locking;
        storage_ = std::make_unique<std::byte[]>(count * capacity);
        frags_ = std::vector<SelfFrag>(count);
        capacity_ = capacity;
        head_ = nullptr;
        for (std::size_t i = count; i-- > 0;) {
            SelfFrag& f = frags_[i];
            f.buffer = storage_.get() + i * capacity;
            f.capacity = capacity;
            f.pool = this;
            f.next_free = head_;
            head_ = &f;
        }
        available_ = count;
    }

    SelfFrag* get() noexcept {
        if (locking_) [[unlikely]] {
            std::lock_guard guard(mutex_);
            return pop();
        }
        return pop();
    }

    // False when the fragment is not out of this pool (double free).
    bool put(SelfFrag* f) noexcept {
        if (locking_) [[unlikely]] {
            std::lock_guard guard(mutex_);
            return push(f);
        }
        return push(f);
    }

    std::size_t capacity() const noexcept { return capacity_; }
    std::size_t size() const noexcept { return frags_.size(); }
    std::size_t available() const noexcept { return available_; }

  private:
    SelfFrag* pop() noexcept {
        SelfFrag* f = head_;
        if (f == nullptr) [[unlikely]]
            return nullptr;
        head_ = f->next_free;
        --available_;
        f->in_use = true;
        f->next_free = nullptr;
        return f;
    }

    bool push(SelfFrag* f) noexcept {
        if (!f->in_use) [[unlikely]]
            return false;
        f->in_use = false;
        f->next_free = head_;
        head_ = f;
        ++available_;
        return true;
    }

    std::unique_ptr<std::byte[]> storage_;
    std::vector<SelfFrag> frags_;
    SelfFrag* head_ = nullptr;
    std::size_t capacity_ = 0;
    std::size_t available_ = 0;
    bool locking_ = false;
    std::mutex mutex_;
};

}  // namespace transit::self
