// tcp descriptors (fragments) and the pools they come from.
//
// A fragment owns a buffer with `headroom` bytes in front of its payload, so
// the frame header (and a request body) is written just before the data and a
// copy-in send is one contiguous write.  Fragments that point at user or
// target memory (put data, get replies) carry it as a second iovec instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <sys/uio.h>

#include "tcp_wire.hpp"
#include "transit/btl/types.hpp"

namespace transit::tcp {

class TcpEndpoint;
class FragPool;

enum class FragKind : std::uint8_t {
    user,     // from alloc/prepare_src/sendi: completion goes to the upper layer
    control,  // requests, replies, goodbye, sendi leftovers: back to the pool once written
};

struct Frag : btl::Descriptor {
    static constexpr std::size_t headroom = 64;  // frame header + largest body, rounded up
    static_assert(headroom >= wire::header_size + wire::atomic_request_size);

    Frag* next = nullptr;  // free list or send queue
    FragPool* pool = nullptr;
    TcpEndpoint* endpoint = nullptr;
    FragKind kind = FragKind::user;
    bool queued = false;      // between send() and its completion
    bool coalescing = false;  // whole frames appended back to back (a burst of sendi)
    btl::Segment segment{};
    std::byte* buffer = nullptr;  // headroom + capacity bytes
    std::size_t capacity = 0;

    // Write state: what is left to send of this frame.
    iovec iov[2]{};
    int iov_count = 0;
    int iov_index = 0;

    std::byte* payload() noexcept { return buffer + headroom; }
    // Points iov[0] at `front` bytes before the payload plus `payload_len` bytes of it.
    void set_contiguous(std::size_t front, std::size_t payload_len) noexcept {
        iov[0] = {payload() - front, front + payload_len};
        iov_count = 1;
        iov_index = 0;
    }
};

// A free list of fragments with one payload capacity.  Grows in chunks up to
// `max` fragments (0 = no limit); an empty pool at its limit gives nullptr,
// which the module turns into out_of_resource.
class FragPool {
  public:
    FragPool() = default;
    FragPool(std::size_t capacity, std::size_t initial, std::size_t max)
        : capacity_(capacity), max_(max) {
        grow(initial);
    }
    FragPool(const FragPool&) = delete;
    FragPool& operator=(const FragPool&) = delete;

    std::size_t capacity() const noexcept { return capacity_; }

    Frag* get(bool ignore_limit = false) noexcept {
        if (free_ == nullptr && !grow_noexcept(ignore_limit)) return nullptr;
        Frag* f = free_;
        free_ = f->next;
        f->next = nullptr;
        return f;
    }
    bool available() const noexcept { return free_ != nullptr || max_ == 0 || total_ < max_; }

    void put(Frag* f) noexcept {
        f->flags = 0;
        f->cbfunc = nullptr;
        f->cbdata = nullptr;
        f->context = nullptr;
        f->endpoint = nullptr;
        f->queued = false;
        f->coalescing = false;
        f->iov_count = 0;
        f->next = free_;
        free_ = f;
    }

  private:
    static constexpr std::size_t chunk = 32;

    bool grow_noexcept(bool ignore_limit) noexcept {
        if (!ignore_limit && max_ != 0 && total_ >= max_) return false;
        try {
            grow(chunk);
        } catch (...) {
            return false;
        }
        return free_ != nullptr;
    }

    void grow(std::size_t n) {
        if (n == 0) return;
        auto frags = std::make_unique<Frag[]>(n);
        auto bytes = std::make_unique<std::byte[]>(n * (Frag::headroom + capacity_));
        for (std::size_t i = 0; i < n; ++i) {
            Frag& f = frags[i];
            f.pool = this;
            f.buffer = bytes.get() + i * (Frag::headroom + capacity_);
            f.capacity = capacity_;
            f.segment = {f.payload(), 0};
            f.segments = &f.segment;
            f.segment_count = 1;
            put(&f);
        }
        frag_chunks_.push_back(std::move(frags));
        byte_chunks_.push_back(std::move(bytes));
        total_ += n;
    }

    std::size_t capacity_ = 0;
    std::size_t max_ = 0;
    std::size_t total_ = 0;
    Frag* free_ = nullptr;
    std::vector<std::unique_ptr<Frag[]>> frag_chunks_;
    std::vector<std::unique_ptr<std::byte[]>> byte_chunks_;
};

// A FIFO of fragments waiting for the socket.
struct FragQueue {
    Frag* head = nullptr;
    Frag* tail = nullptr;
    bool empty() const noexcept { return head == nullptr; }
    void push(Frag* f) noexcept {
        f->next = nullptr;
        if (tail)
            tail->next = f;
        else
            head = f;
        tail = f;
    }
    Frag* pop() noexcept {
        Frag* f = head;
        if (f) {
            head = f->next;
            if (!head) tail = nullptr;
            f->next = nullptr;
        }
        return f;
    }
};

}  // namespace transit::tcp
