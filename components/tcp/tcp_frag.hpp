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
#include "transit/btl/util/free_list.hpp"

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

    Frag* next = nullptr;  // send queue
    Frag* next_free = nullptr;
    bool in_use = false;
    FragPool* pool = nullptr;
    TcpEndpoint* endpoint = nullptr;
    FragKind kind = FragKind::user;
    bool queued = false;        // between send() and its completion
    bool coalescing = false;    // whole frames appended back to back (a burst of sendi)
    bool by_reference = false;  // iov[1] is lent to the socket, not copied (tcp_splice.hpp)
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

// The toolkit's free list of fragments with one payload capacity.  Grows in
// chunks up to `max` fragments (0 = no limit); an empty pool at its limit
// gives nullptr, which the module turns into out_of_resource.
class FragPool : public btl::util::FreeList<Frag> {
  public:
    FragPool(std::size_t capacity, std::size_t initial, std::size_t max) {
        setup({.initial = initial,
               .max = max,
               .grow_by = 32,
               .buffer_size = capacity,
               .headroom = Frag::headroom},
              &init, this);
    }

    // ignore_limit: a control frame, which must not fail where a user's send may.
    Frag* get(bool ignore_limit = false) noexcept {
        return ignore_limit ? get_beyond_max() : FreeList::get();
    }
    bool available() const noexcept { return can_get(); }

    void put(Frag* f) noexcept {
        f->flags = 0;
        f->cbfunc = nullptr;
        f->cbdata = nullptr;
        f->context = nullptr;
        f->endpoint = nullptr;
        f->queued = false;
        f->coalescing = false;
        f->by_reference = false;
        f->iov_count = 0;
        FreeList::put(f);
    }

  private:
    static void init(Frag& f, std::byte*, std::size_t, void* pool) noexcept {
        f.pool = static_cast<FragPool*>(pool);
        f.segment = {f.payload(), 0};
        f.segments = &f.segment;
        f.segment_count = 1;
    }
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
