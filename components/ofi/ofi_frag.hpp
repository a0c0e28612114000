// Everything an ofi module hands to libfabric as an operation context: send
// fragments, receive buffers and one-sided operations.  Each starts with the
// fi_context2 the provider may use (FI_CONTEXT / FI_CONTEXT2 modes) and a kind,
// so a completion entry leads back to its object without a lookup.
//
// All of them come from bounded pools filled at module setup: the send,
// receive and progress paths only pop and push intrusive lists.
#pragma once

#include <rdma/fabric.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transit/btl/types.hpp"

namespace transit::ofi {

class OfiEndpoint;

enum class OpKind : std::uint8_t { send, recv, rdma };

struct OpContext {
    fi_context2 fi{};  // first: the provider sees a pointer to it
    OpKind kind = OpKind::send;
};

// What travels in front of every active message.
enum class WireKind : std::uint8_t {
    message = 0,  // for the tag's callback
    goodbye = 1,  // no payload: the sender is leaving; its exit is no failure
    hello = 2,    // no payload: the sender added us again; its goodbye is taken back
};
struct WireHeader {
    std::uint8_t tag;
    std::uint8_t version;
    WireKind kind;
    std::uint8_t reserved;
    Rank source;  // the sender's rank, to find its endpoint
};
static_assert(sizeof(WireHeader) == 8);
// 2: the kind (goodbye).  3: hello.  Both travel in order with the messages
// (FI_ORDER_SAS), so a hello is never taken before the goodbye it takes back.
inline constexpr std::uint8_t wire_version = 3;

// A send fragment: buffer = WireHeader + up to `capacity` bytes of payload.
struct OfiFrag : OpContext, btl::Descriptor {
    btl::Segment seg{};
    std::byte* buffer = nullptr;
    std::size_t capacity = 0;
    OfiEndpoint* endpoint = nullptr;
    void* desc = nullptr;      // local registration descriptor (FI_MR_LOCAL)
    bool internal = false;     // sendi's own fragment: freed at completion, no callback
    bool posted = false;       // in the provider's hands until its completion
    bool abandoned = false;    // its peer was lost: completed already, the provider's
                               // completion only frees it
    bool freed_early = false;  // freed by its owner while still posted
    bool in_use = false;       // catches double frees
    OfiFrag* next_free = nullptr;
};

// A preposted receive buffer.
struct OfiRecv : OpContext {
    std::byte* buffer = nullptr;
    std::size_t size = 0;
    OfiRecv* next_repost = nullptr;  // queued when reposting met FI_EAGAIN
};

// A put, get or atomic in flight.
struct OfiRdma : OpContext {
    btl::RdmaCompletionFn cbfunc = nullptr;
    void* cbcontext = nullptr;
    void* cbdata = nullptr;
    OfiEndpoint* endpoint = nullptr;
    void* local_address = nullptr;
    btl::RegistrationHandle* local_handle = nullptr;
    std::uint64_t operand = 0;  // atomics read these until completion
    std::uint64_t compare = 0;
    void* temp_registration = nullptr;  // a CacheEntry held until completion
    bool abandoned = false;             // its peer was lost: completed already
    bool in_use = false;
    OfiRdma* next_free = nullptr;
};

// A bounded free list of T (OfiFrag or OfiRdma), all created at setup.
template <typename T>
class Pool {
  public:
    Pool() = default;
    Pool(const Pool&) = delete;
    Pool& operator=(const Pool&) = delete;

    void setup(std::size_t count) {
        items_ = std::vector<T>(count);
        head_ = nullptr;
        for (std::size_t i = count; i-- > 0;) {
            items_[i].next_free = head_;
            head_ = &items_[i];
        }
        available_ = count;
    }
    T* get() noexcept {
        T* t = head_;
        if (t == nullptr) [[unlikely]]
            return nullptr;
        head_ = t->next_free;
        t->next_free = nullptr;
        t->in_use = true;
        --available_;
        return t;
    }
    bool put(T* t) noexcept {
        if (!t->in_use) [[unlikely]]
            return false;
        t->in_use = false;
        t->next_free = head_;
        head_ = t;
        ++available_;
        return true;
    }
    std::vector<T>& items() noexcept { return items_; }
    std::size_t size() const noexcept { return items_.size(); }
    std::size_t available() const noexcept { return available_; }

  private:
    std::vector<T> items_;
    T* head_ = nullptr;
    std::size_t available_ = 0;
};

// Send fragments of one size class, with their buffers in one block (one
// registration when the provider needs local registrations).
class FragPool {
  public:
    void setup(std::size_t count, std::size_t capacity) {
        stride_ = (sizeof(WireHeader) + capacity + 63) & ~std::size_t{63};
        storage_ = std::make_unique<std::byte[]>(count * stride_ + 64);
        pool_.setup(count);
        capacity_ = capacity;
        for (std::size_t i = 0; i < count; ++i) {
            OfiFrag& f = pool_.items()[i];
            f.kind = OpKind::send;
            f.buffer = storage_.get() + i * stride_;
            f.capacity = capacity;
        }
    }
    void set_desc(void* desc) noexcept {
        for (OfiFrag& f : pool_.items()) f.desc = desc;
    }
    OfiFrag* get() noexcept { return pool_.get(); }
    std::vector<OfiFrag>& items() noexcept { return pool_.items(); }
    bool put(OfiFrag* f) noexcept { return pool_.put(f); }
    bool owns(const OfiFrag* f) const noexcept {
        return !pool_items_empty() && f >= &first() && f <= &last();
    }
    std::byte* storage() const noexcept { return storage_.get(); }
    std::size_t storage_size() const noexcept { return pool_.size() * stride_; }
    std::size_t capacity() const noexcept { return capacity_; }
    std::size_t size() const noexcept { return pool_.size(); }
    std::size_t available() const noexcept { return pool_.available(); }

  private:
    bool pool_items_empty() const noexcept { return pool_.size() == 0; }
    const OfiFrag& first() const noexcept {
        return const_cast<FragPool*>(this)->pool_.items().front();
    }
    const OfiFrag& last() const noexcept {
        return const_cast<FragPool*>(this)->pool_.items().back();
    }

    Pool<OfiFrag> pool_;
    std::unique_ptr<std::byte[]> storage_;
    std::size_t stride_ = 0;
    std::size_t capacity_ = 0;
};

}  // namespace transit::ofi
