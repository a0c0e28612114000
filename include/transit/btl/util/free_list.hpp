// A bounded free list of a component's fragments or operations, with an
// optional buffer beside each item.
//
// Items are made in chunks: `initial` at setup, then `grow_by` more whenever the
// list is empty, up to `max` in all (free_list_max).  Once made, an item is
// never freed before the list: get and put only pop and push an intrusive
// stack, so the hot path neither allocates (once grown) nor throws.  An empty
// list at its bound gives nullptr, which a module reports as out-of-resource.
//
// A list for one thread at a time (`Locking::never`, the default) tests no
// flag on get and put; `Locking::when_configured` takes a mutex when its
// setup says several threads share it (`FreeListConfig::locking`).
//
// An item type names its own link and state (`T* next_free`, `bool in_use`):
// the list needs no allocation of its own and catches a double put.  An item
// with `std::byte* buffer` and `std::size_t capacity` gets its buffer in them
// (headroom + capacity bytes, starting on a 64-byte line).
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace transit::btl::util {

template <typename T>
concept FreeListItem = std::is_default_constructible_v<T> && requires(T& t) {
    requires std::is_same_v<decltype(t.next_free), T*>;
    requires std::is_same_v<decltype(t.in_use), bool>;
};

struct FreeListConfig {
    std::size_t initial = 0;      // items made by setup()
    std::size_t max = 0;          // never more items than this (0: no bound)
    std::size_t grow_by = 0;      // items made when empty and below max (0: never grows)
    std::size_t buffer_size = 0;  // bytes of payload beside each item
    std::size_t headroom = 0;     // bytes in front of the payload (a wire header);
                                  // no buffer when both are 0
    bool locking = false;         // several threads get and put at once
};

enum class Locking { never, when_configured };

template <FreeListItem T, Locking Policy = Locking::never>
class FreeList {
  public:
    // Called once for each item as it is made (at setup or growth, never on a
    // get), with its buffer (nullptr without one: headroom + buffer_size bytes),
    // its payload size and the setup's context.
    using Init = void (*)(T& item, std::byte* buffer, std::size_t buffer_size, void* context);

    FreeList() = default;
    FreeList(const FreeList&) = delete;
    FreeList& operator=(const FreeList&) = delete;

    // Setup only: may throw std::bad_alloc (and std::logic_error when asked
    // to lock a list whose policy never locks).  Forgets any earlier items.
    void setup(const FreeListConfig& config, Init init = nullptr, void* context = nullptr) {
        if (config.locking && Policy == Locking::never)
            throw std::logic_error("FreeList: locking asked of a list that never locks");
        config_ = config;
        const std::size_t bytes = config_.headroom + config_.buffer_size;
        stride_ = (bytes + line - 1) / line * line;
        init_ = init;
        context_ = context;
        chunks_.clear();
        head_ = nullptr;
        total_ = 0;
        available_ = 0;
        const std::size_t first =
            config_.max == 0 ? config_.initial : std::min(config_.initial, config_.max);
        if (first > 0) grow(first);
    }

    // An item, or nullptr when none is free and the list may not (or cannot) grow.
    T* get() noexcept {
        return locked([this] { return pop(false); });
    }
    // The same, but grows past `max`: for the module's own control messages,
    // which must not fail where a user's send may.
    T* get_beyond_max() noexcept {
        return locked([this] { return pop(true); });
    }

    // False, and nothing changed, when the item is already free.  Items of
    // another list are the caller's to rule out (owns()).
    bool put(T* item) noexcept {
        return locked([this, item] { return push(item); });
    }

    // put() for an item that may come from elsewhere (a caller's descriptor).
    bool put_checked(T* item) noexcept { return owns(item) && put(item); }

    bool owns(const T* item) const noexcept { return find_chunk(item) != nullptr; }
    // An item is free, or one can be made.
    bool can_get() const noexcept { return head_ != nullptr || may_grow(false); }

    std::size_t size() const noexcept { return total_; }
    std::size_t available() const noexcept { return available_; }
    std::size_t capacity() const noexcept { return config_.buffer_size; }

    // Items by number, in the order they were made (stable for the list's life).
    T& at(std::size_t index) noexcept {
        return const_cast<T&>(static_cast<const FreeList&>(*this).at(index));
    }
    const T& at(std::size_t index) const noexcept {
        for (const Chunk& c : chunks_)
            if (index < c.first + c.count) return c.items[index - c.first];
        return chunks_.back().items[0];  // out of range: the caller checks size()
    }
    std::size_t index(const T* item) const noexcept {
        const Chunk* c = find_chunk(item);
        return c == nullptr ? total_ : c->first + static_cast<std::size_t>(item - c->items.get());
    }

    // The items and buffers of one chunk (chunk 0 holds the setup's items): a
    // list that never grows is one block, registered at once.
    std::size_t chunk_count() const noexcept { return chunks_.size(); }
    std::span<T> chunk_items(std::size_t chunk) noexcept {
        if (chunk >= chunks_.size()) return {};
        return {chunks_[chunk].items.get(), chunks_[chunk].count};
    }
    std::span<const T> chunk_items(std::size_t chunk) const noexcept {
        if (chunk >= chunks_.size()) return {};
        return {chunks_[chunk].items.get(), chunks_[chunk].count};
    }
    // An empty span for a list without buffers or items.
    std::span<std::byte> chunk_buffers(std::size_t chunk) noexcept {
        if (chunk >= chunks_.size()) return {};
        return {chunks_[chunk].buffers.get(), chunks_[chunk].count * stride_};
    }

    // Every item, free or not, in the order made.
    template <typename Self>
    class Range {
      public:
        explicit Range(Self& list) noexcept : list_(list) {}
        class iterator {
          public:
            using value_type = T;
            using difference_type = std::ptrdiff_t;
            iterator() = default;
            iterator(Self* l, std::size_t c, std::size_t i) noexcept : list_(l), c_(c), i_(i) {}
            using reference = std::conditional_t<std::is_const_v<Self>, const T&, T&>;
            reference operator*() const noexcept { return list_->chunks_[c_].items[i_]; }
            iterator& operator++() noexcept {
                if (++i_ == list_->chunks_[c_].count) {
                    ++c_;
                    i_ = 0;
                }
                return *this;
            }
            iterator operator++(int) noexcept {
                iterator old = *this;
                ++*this;
                return old;
            }
            bool operator==(const iterator& o) const noexcept { return c_ == o.c_ && i_ == o.i_; }

          private:
            Self* list_ = nullptr;
            std::size_t c_ = 0;
            std::size_t i_ = 0;
        };
        iterator begin() const noexcept { return {&list_, 0, 0}; }
        iterator end() const noexcept { return {&list_, list_.chunks_.size(), 0}; }

      private:
        Self& list_;
    };
    Range<FreeList> items() noexcept { return Range<FreeList>(*this); }
    Range<const FreeList> items() const noexcept { return Range<const FreeList>(*this); }

  private:
    struct Chunk {
        std::unique_ptr<T[]> items;
        std::unique_ptr<std::byte[], void (*)(std::byte*)> buffers{nullptr, &free_buffers};
        std::size_t first = 0;  // index of its first item
        std::size_t count = 0;
    };
    static constexpr std::size_t line = 64;
    static void free_buffers(std::byte* p) noexcept {
        ::operator delete[](p, std::align_val_t{line});
    }

    template <typename F>
    auto locked(F f) noexcept {
        if constexpr (Policy == Locking::when_configured) {
            if (config_.locking) [[unlikely]] {
                std::lock_guard guard(mutex_);
                return f();
            }
        }
        return f();
    }

    bool may_grow(bool beyond_max) const noexcept {
        return config_.grow_by != 0 && (beyond_max || config_.max == 0 || total_ < config_.max);
    }

    T* pop(bool beyond_max) noexcept {
        if (head_ == nullptr) [[unlikely]] {
            if (!may_grow(beyond_max)) return nullptr;
            const std::size_t room = config_.max == 0 || beyond_max || total_ >= config_.max
                                         ? config_.grow_by
                                         : std::min(config_.grow_by, config_.max - total_);
            try {
                grow(room);
            } catch (...) {
                return nullptr;
            }
        }
        T* item = head_;
        head_ = item->next_free;
        item->in_use = true;
        --available_;
        return item;
    }

    bool push(T* item) noexcept {
        if (item == nullptr || !item->in_use) [[unlikely]]
            return false;
        item->in_use = false;
        item->next_free = head_;
        head_ = item;
        ++available_;
        return true;
    }

    void grow(std::size_t count) {
        Chunk c;
        c.items = std::make_unique<T[]>(count);
        if (stride_ != 0)
            c.buffers.reset(
                static_cast<std::byte*>(::operator new[](count* stride_, std::align_val_t{line})));
        c.first = total_;
        c.count = count;
        chunks_.reserve(chunks_.size() + 1);
        for (std::size_t i = 0; i < count; ++i) {
            T& item = c.items[i];
            std::byte* buffer = stride_ != 0 ? c.buffers.get() + i * stride_ : nullptr;
            if constexpr (requires {
                              {item.buffer = buffer};
                              {item.capacity = config_.buffer_size};
                          }) {
                item.buffer = buffer;
                item.capacity = config_.buffer_size;
            }
            if (init_ != nullptr) init_(item, buffer, config_.buffer_size, context_);
        }
        // Pushed in reverse so that get() hands items out in the order made.
        for (std::size_t i = count; i-- > 0;) {
            T& item = c.items[i];
            item.in_use = false;
            item.next_free = head_;
            head_ = &item;
        }
        chunks_.push_back(std::move(c));
        total_ += count;
        available_ += count;
    }

    const Chunk* find_chunk(const T* item) const noexcept {
        for (const Chunk& c : chunks_)
            if (item >= c.items.get() && item < c.items.get() + c.count) return &c;
        return nullptr;
    }

    FreeListConfig config_;
    std::size_t stride_ = 0;
    Init init_ = nullptr;
    void* context_ = nullptr;
    std::vector<Chunk> chunks_;
    T* head_ = nullptr;
    std::size_t total_ = 0;
    std::size_t available_ = 0;
    std::mutex mutex_;
};

}  // namespace transit::btl::util
