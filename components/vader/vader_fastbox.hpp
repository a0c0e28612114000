// Fast boxes: one single-producer single-consumer ring per (sender, receiver)
// pair, in the receiver's segment, written directly by the sender.  A small
// message costs the sender one copy and one release store, the receiver one
// acquire load; no fragment, no FIFO slot, no return trip.
//
// Layout of a box: a control line holding the receiver's read position, then
// `size` bytes of records.  A record is a 4-byte header and the payload, the
// whole rounded up to 8 bytes; small, because the sender's cost is mostly
// the cache lines it has to take from the receiver (an 8-byte message behind
// the pml's 12-byte match header fills 24 bytes, not 32).  The sender always
// zeroes the header that follows the record it publishes, so the receiver,
// reading at its position, finds either zero (nothing yet) or a complete
// header, never stale payload.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "components/vader/vader_fifo.hpp"

namespace transit::vader {

class Fastbox {
  public:
    static constexpr std::size_t header_size = 4;

    // Shared bytes of one box with `size` bytes of records (a power of two).
    static constexpr std::size_t bytes(std::uint32_t size) noexcept {
        return sizeof(Control) + size;
    }
    // The largest payload worth a box of `size` bytes: a quarter, so that a
    // few messages are always in flight.  (Boxes are at most 16 MiB, so it
    // fits the header's 22-bit length.)
    static constexpr std::uint32_t max_payload(std::uint32_t size) noexcept {
        return size / 4 - header_size;
    }

    // A header: type in the top 2 bits (never 0, so a header is never 0), the
    // btl tag, the payload length.
    static constexpr std::uint32_t type_message = 1;
    static constexpr std::uint32_t type_skip = 2;
    static constexpr std::uint32_t length_bits = 22;

    static constexpr std::uint32_t encode(std::uint32_t type, std::uint8_t tag,
                                          std::uint32_t len) noexcept {
        return (type << 30) | (std::uint32_t{tag} << length_bits) | len;
    }
    static constexpr std::uint32_t type_of(std::uint32_t h) noexcept { return h >> 30; }
    static constexpr std::uint8_t tag_of(std::uint32_t h) noexcept {
        return static_cast<std::uint8_t>(h >> length_bits);
    }
    static constexpr std::uint32_t length_of(std::uint32_t h) noexcept {
        return h & ((1u << length_bits) - 1);
    }
    // Bytes of a record with `len` bytes of payload.
    static constexpr std::uint32_t record(std::uint32_t len) noexcept {
        return (header_size + len + 7u) & ~7u;
    }

  protected:
    struct alignas(cache_line) Control {
        std::atomic<std::uint32_t> read_pos{0};
    };
    static std::atomic_ref<std::uint32_t> header_at(char* data, std::uint32_t offset) noexcept {
        return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(data + offset));
    }
};

// The sender's side.  Its cursor is private; only the receiver's read position
// is shared, and it is read only when the cached copy says the box is full.
class FastboxWriter : public Fastbox {
  public:
    FastboxWriter() = default;
    FastboxWriter(void* box, std::uint32_t size) noexcept
        : control_(static_cast<Control*>(box)),
          data_(static_cast<char*>(box) + sizeof(Control)),
          size_(size),
          has_prefetchw_(cpu_has_prefetchw()) {}

    bool valid() const noexcept { return data_ != nullptr; }

    // `header_len` bytes of header then `len` bytes that pack(dst) writes, as
    // one message.  The sender's fast path: the position stays in registers
    // and the pml's 12-byte match header is copied inline, not by a call.
    template <typename Pack>
    bool write_parts(std::uint8_t tag, const void* header, std::uint32_t header_len,
                     std::uint32_t len, Pack&& pack) noexcept {
        const std::uint32_t total = header_len + len;
        const std::uint32_t need = record(total);
        const std::uint32_t offset = claim(need);
        if (offset == full) return false;
        char* p = data_ + offset + header_size;
        if (header_len == 12)
            std::memcpy(p, header, 12);
        else if (header_len != 0)
            std::memcpy(p, header, header_len);
        if (len != 0) pack(p + header_len);
        publish(offset, need, tag, total);
        return true;
    }

    // Copies and publishes in one go.
    bool write(std::uint8_t tag, const void* payload, std::uint32_t len) noexcept {
        // an empty payload may come with no pointer: pack is not called then
        return write_parts(tag, nullptr, 0, len,
                           [&](char* dst) { std::memcpy(dst, payload, len); });
    }

  private:
    static constexpr std::uint32_t full = ~0u;

    // The offset of `need` free bytes (a skip record first when they would
    // wrap), with the header after them zeroed; `full` when there is no room.
    std::uint32_t claim(std::uint32_t need) noexcept {
        std::uint32_t offset = write_pos_ & (size_ - 1);
        const std::uint32_t skip = offset + need > size_ ? size_ - offset : 0;
        // +header_size: the header after this message is zeroed now.
        const std::uint32_t total = skip + need + header_size;
        if (size_ - (write_pos_ - read_cache_) < total) {
            read_cache_ = control_->read_pos.load(std::memory_order_acquire);
            if (size_ - (write_pos_ - read_cache_) < total) return full;
        }
        if (skip != 0) [[unlikely]] {
            header_at(data_, 0).store(0, std::memory_order_relaxed);
            header_at(data_, offset).store(encode(type_skip, 0, 0), std::memory_order_release);
            write_pos_ += skip;
            offset = 0;
        }
        header_at(data_, (offset + need) & (size_ - 1)).store(0, std::memory_order_relaxed);
        return offset;
    }

    void publish(std::uint32_t offset, std::uint32_t need, std::uint8_t tag,
                 std::uint32_t len) noexcept {
        header_at(data_, offset).store(encode(type_message, tag, len), std::memory_order_release);
        write_pos_ += need;
        // The line after the next header's, asked for now: the next claim()
        // zeroes a header there, and x86 stores leave the store buffer in
        // order, so a zeroing store that waits for its line from the receiver
        // would hold up the publication behind it.  (+1.5-2% on latency and
        // message rate in alternating runs.)
        prefetch_for_write(data_ + ((offset + need + header_size + cache_line) & (size_ - 1)));
    }

    void prefetch_for_write(const char* p) const noexcept {
#if defined(__x86_64__)
        if (has_prefetchw_) asm volatile("prefetchw %0" ::"m"(*p));
#else
        __builtin_prefetch(p, 1);
#endif
    }
    // PREFETCHW is not in the x86-64 baseline (CPUID 0x80000001, ECX bit 8).
    static bool cpu_has_prefetchw() noexcept {
#if defined(__x86_64__)
        static const bool has = [] {
            unsigned a = 0, b = 0, c = 0, d = 0;
            return __get_cpuid(0x80000001u, &a, &b, &c, &d) != 0 && (c & (1u << 8)) != 0;
        }();
        return has;
#else
        return false;
#endif
    }

    Control* control_ = nullptr;
    char* data_ = nullptr;
    std::uint32_t size_ = 0;
    std::uint32_t write_pos_ = 0;
    std::uint32_t read_cache_ = 0;
    bool has_prefetchw_ = false;
};

// The receiver's side.
class FastboxReader : public Fastbox {
  public:
    FastboxReader() = default;
    // Formats the box (the receiver owns the memory) and reads from it.
    FastboxReader(void* box, std::uint32_t size) noexcept
        : control_(new (box) Control{}),
          data_(static_cast<char*>(box) + sizeof(Control)),
          size_(size) {
        header_at(data_, 0).store(0, std::memory_order_release);
    }

    bool valid() const noexcept { return data_ != nullptr; }

    bool ready() const noexcept {
        return !broken_ &&
               header_at(data_, read_pos_ & (size_ - 1)).load(std::memory_order_acquire) != 0;
    }
    bool broken() const noexcept { return broken_; }

    // Delivers up to `max` messages to deliver(const char* payload, uint32_t len,
    // uint8_t tag); the payload is valid during the call only.  Returns the count.
    // A record no writer could have made (unknown type, a length past the
    // box's limit or end) stops the box for good: broken() says so.
    template <typename Deliver>
    int poll(Deliver&& deliver, int max) noexcept {
        int count = 0;
        const std::uint32_t start = read_pos_;
        while (count < max && !broken_) {
            const std::uint32_t offset = read_pos_ & (size_ - 1);
            const std::uint32_t h = header_at(data_, offset).load(std::memory_order_acquire);
            if (h == 0) break;
            if (type_of(h) == type_skip) {
                // A writer skips only to wrap: a skip at the start would never end.
                if (offset == 0) [[unlikely]] {
                    broken_ = true;
                    break;
                }
                read_pos_ += size_ - offset;
                continue;
            }
            const std::uint32_t len = length_of(h);
            if (type_of(h) != type_message || len > max_payload(size_) ||
                offset + record(len) > size_) [[unlikely]] {
                broken_ = true;
                break;
            }
            deliver(static_cast<const char*>(data_ + offset + header_size), len, tag_of(h));
            read_pos_ += record(len);
            ++count;
        }
        if (read_pos_ != start) control_->read_pos.store(read_pos_, std::memory_order_release);
        return count;
    }

  private:
    Control* control_ = nullptr;
    char* data_ = nullptr;
    std::uint32_t size_ = 0;
    std::uint32_t read_pos_ = 0;
    bool broken_ = false;
};

}  // namespace transit::vader
