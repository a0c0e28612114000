// Plain types of the BTL contract: tags, flags, segments, descriptors, callbacks.
// The contract itself (what each return value means) is documented on Module.
#pragma once

#include <sys/uio.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "transit/runtime.hpp"
#include "transit/status.hpp"

namespace transit::btl {

class Module;
class Endpoint;
struct Descriptor;

// Opaque registration handle.  Its first Module::attributes().registration_handle_size
// bytes are its packed form: copied as-is to a peer, which passes them back as
// the remote handle of put/get/atomics.  A module is given a remote handle only
// when it has exactly its own registration_handle_size bytes: the pml refuses a
// key or rendezvous whose handle for a transport loaded here has another size.
// A component with several modules (one per provider, device...) puts one
// handle per module in a key; a module given a handle another module of its
// component packed returns not_available, and the pml tries the next one.
struct RegistrationHandle;

using Tag = std::uint8_t;
inline constexpr std::uint8_t no_order = 255;

// Module capability flags (Attributes::flags).
namespace flags {
inline constexpr std::uint32_t send = 0x0001;
inline constexpr std::uint32_t put = 0x0002;
inline constexpr std::uint32_t get = 0x0004;
inline constexpr std::uint32_t rdma = put | get;
inline constexpr std::uint32_t send_inplace = 0x0008;  // prepare_src may point at user data
inline constexpr std::uint32_t need_ack = 0x0010;
inline constexpr std::uint32_t need_csum = 0x0020;
inline constexpr std::uint32_t rdma_matched = 0x0040;
inline constexpr std::uint32_t rdma_completion = 0x0080;
inline constexpr std::uint32_t heterogeneous_rdma = 0x0100;
inline constexpr std::uint32_t failover_support = 0x0200;
inline constexpr std::uint32_t signaled = 0x4000;
inline constexpr std::uint32_t atomic_ops = 0x08000;
inline constexpr std::uint32_t atomic_fops = 0x10000;
inline constexpr std::uint32_t single_add_procs = 0x20000;
inline constexpr std::uint32_t progress_thread_enabled = 0x40000;
inline constexpr std::uint32_t rdma_flush = 0x80000;
// put and get complete without the target process taking part (a NIC's RDMA,
// vader's CMA): a target busy computing does not delay them.  Without it they
// are carried out by the target's progress (active messages).
inline constexpr std::uint32_t rdma_without_target = 0x100000;
// Every operation of the module (the core, Rdma, Atomics, its progress
// callback) may be called by several threads at once, with no lock above it.
// Without it the pml serialises its calls (at ThreadLevel::multiple it holds
// its lock around every call into the module).
inline constexpr std::uint32_t thread_safe = 0x200000;
// The module carries peers outside the job (rt::DynamicPeers): it connects to
// a server from the modex blobs of its address and accepts clients that
// present the listening context's token.  Modules without it are never asked
// about such peers.
inline constexpr std::uint32_t dynamic_peers = 0x400000;
// put is the transport's own (one zero-copy transfer for the whole range,
// UCT tcp's put_zcopy) while get is emulated: requested piece by piece and
// answered by the target's progress (active messages).  Both still need the
// target's progress (so no rdma_without_target); a rendezvous receiver asks
// the sender to put the whole message rather than get it (pml: offer_split
// with nothing kept for itself).
inline constexpr std::uint32_t prefer_put = 0x800000;
// The module reports a peer's death itself (the error callback, naming the
// peer) within about a second, whether or not anything is in flight to it: a
// connection the peer's kernel closes, a watch of the peer's process.  The
// pml's keep-alive leaves a peer alone when a module of its path says this
// (pml_base_keepalive_all probes them too).
inline constexpr std::uint32_t reports_peer_loss = 0x1000000;
// The one-sided capabilities, for comparing what two modules offer.
inline constexpr std::uint32_t one_sided = put | get | atomic_ops | atomic_fops;
}  // namespace flags

// Which peers a module can reach at most, known before any peer is asked
// (Attributes::reach, Component::Prospect::reach).  0: not said.
namespace reach {
inline constexpr std::uint32_t own_process = 0x1;
inline constexpr std::uint32_t node = 0x2;    // other processes on this node
inline constexpr std::uint32_t remote = 0x4;  // processes on other nodes
inline constexpr std::uint32_t any = own_process | node | remote;
}  // namespace reach

// Which atomics a module supports (Attributes::atomic_flags).
namespace atomic_support {
inline constexpr std::uint32_t add = 0x00000001;
inline constexpr std::uint32_t and_ = 0x00000200;
inline constexpr std::uint32_t or_ = 0x00000400;
inline constexpr std::uint32_t xor_ = 0x00000800;
inline constexpr std::uint32_t land = 0x00001000;
inline constexpr std::uint32_t lor = 0x00002000;
inline constexpr std::uint32_t lxor = 0x00004000;
inline constexpr std::uint32_t swap = 0x00010000;
inline constexpr std::uint32_t min = 0x00100000;
inline constexpr std::uint32_t max = 0x00200000;
inline constexpr std::uint32_t bits32 = 0x01000000;
inline constexpr std::uint32_t floating = 0x02000000;
inline constexpr std::uint32_t cswap = 0x10000000;
// Atomics through the module are coherent with CPU atomics on the target memory.
inline constexpr std::uint32_t global = 0x20000000;
}  // namespace atomic_support

// Per-operation atomic flags.
namespace atomic_flags {
inline constexpr int bits32 = 0x1;  // operate on 32-bit integers
}

enum class AtomicOp : std::uint16_t {
    add = 0x0001,
    and_ = 0x0011,
    or_ = 0x0012,
    xor_ = 0x0014,
    land = 0x0015,
    lor = 0x0016,
    lxor = 0x0017,
    swap = 0x001a,
    min = 0x0020,  // signed
    max = 0x0021,  // signed
};

// Whether a value off the wire (or from a caller) names an AtomicOp: a target
// must refuse anything else before it touches memory.
constexpr bool is_atomic_op(std::uint16_t v) noexcept {
    switch (static_cast<AtomicOp>(v)) {
        case AtomicOp::add:
        case AtomicOp::and_:
        case AtomicOp::or_:
        case AtomicOp::xor_:
        case AtomicOp::land:
        case AtomicOp::lor:
        case AtomicOp::lxor:
        case AtomicOp::swap:
        case AtomicOp::min:
        case AtomicOp::max:
            return true;
    }
    return false;
}
constexpr bool is_atomic_op(AtomicOp op) noexcept {
    return is_atomic_op(static_cast<std::uint16_t>(op));
}

// Applies `op` to `target` (64- or 32-bit) and returns the old value.  For
// components that perform atomics on the target's behalf (self, tcp, emulation).
std::uint64_t apply_atomic(void* target, AtomicOp op, std::uint64_t operand,
                           int atomic_flags) noexcept;
std::uint64_t apply_cswap(void* target, std::uint64_t compare, std::uint64_t value,
                          int atomic_flags) noexcept;

// Descriptor flags (Descriptor::flags).
namespace des_flags {
inline constexpr std::uint32_t priority = 0x0001;
// The module frees the descriptor itself after the completion callback.
inline constexpr std::uint32_t btl_ownership = 0x0002;
// Call the completion callback even when send() completed inline (returned 1).
inline constexpr std::uint32_t send_always_callback = 0x0004;
inline constexpr std::uint32_t put = 0x0010;
inline constexpr std::uint32_t get = 0x0020;
inline constexpr std::uint32_t signal = 0x0040;
}  // namespace des_flags

// Memory registration access flags.
namespace reg_flags {
inline constexpr std::uint32_t local_write = 0x1;
inline constexpr std::uint32_t remote_read = 0x2;
inline constexpr std::uint32_t remote_write = 0x4;
inline constexpr std::uint32_t remote_atomic = 0x8;
inline constexpr std::uint32_t access_any = 0xf;
}  // namespace reg_flags

// Error callback flags.
namespace error_flags {
inline constexpr std::uint32_t fatal = 0x1;
inline constexpr std::uint32_t nonfatal = 0x2;
// With nonfatal: a peer outside the job closed on purpose (it disconnected).
inline constexpr std::uint32_t departed = 0x4;
// With nonfatal: a server refused us (our access token); operations with it
// end access_denied.
inline constexpr std::uint32_t refused = 0x8;
}  // namespace error_flags

inline constexpr std::uint32_t exclusivity_high = 64 * 1024;  // own process
inline constexpr std::uint32_t exclusivity_default = 1024;
inline constexpr std::uint32_t exclusivity_low = 0;

inline constexpr std::size_t max_segments = 16;
inline constexpr std::size_t max_registration_handle_size = 256;

struct Segment {
    void* addr;
    std::uint64_t len;
};

// Local completion of a send.  After it the descriptor may be reused or freed
// (unless des_flags::btl_ownership was set: then the module frees it).
using CompletionFn = void (*)(Module* module, Endpoint* endpoint, Descriptor* descriptor,
                              Status status);

// Completion of put/get/atomics: the data is remotely visible (put) or local (get).
using RdmaCompletionFn = void (*)(Module* module, Endpoint* endpoint, void* local_address,
                                  RegistrationHandle* local_handle, void* context, void* cbdata,
                                  Status status);

// A send descriptor, allocated by the module (alloc / prepare_src / sendi) from
// its own free lists.  Modules derive their fragment type from it.
struct Descriptor {
    Segment* segments = nullptr;
    std::uint32_t segment_count = 0;
    std::uint32_t flags = 0;
    CompletionFn cbfunc = nullptr;
    void* cbdata = nullptr;
    void* context = nullptr;
    std::uint8_t order = no_order;
};

// What a receive callback sees.  Valid only during the callback: copy what you keep.
// Segments have no alignment promised (tcp hands frames over where they fall in its
// stream buffer, vader's fast boxes at 4 bytes): read headers with memcpy, not
// through a cast pointer.
struct ReceiveDescriptor {
    Endpoint* endpoint;  // the sender's endpoint on this module (may be null)
    const Segment* segments;
    std::size_t segment_count;
    Tag tag;
    std::uint32_t cbdata_reserved = 0;
};

using ReceiveFn = void (*)(Module* module, const ReceiveDescriptor& descriptor, void* cbdata);

// A descriptor's segments as a span, and what the upper layers do with them
// when a message is split: its length and a copy into one block.
inline std::span<const Segment> segments_of(const Descriptor& d) noexcept {
    return {d.segments, d.segment_count};
}
inline std::span<const Segment> segments_of(const ReceiveDescriptor& d) noexcept {
    return {d.segments, d.segment_count};
}
inline std::uint64_t total_length(std::span<const Segment> segments) noexcept {
    std::uint64_t len = 0;
    for (const Segment& s : segments) len += s.len;
    return len;
}
// `out` holds total_length(segments) bytes.
inline void gather_segments(std::span<const Segment> segments, std::byte* out) noexcept {
    for (const Segment& s : segments) {
        if (s.len == 0) continue;  // its address may be null
        std::memcpy(out, s.addr, s.len);
        out += s.len;
    }
}

// Error report from a module about a peer.  `peer` is any_rank when the error
// is not tied to one peer.
using ErrorFn = void (*)(Module* module, std::uint32_t error_flags, Rank peer, const char* info,
                         void* cbdata);

// The source of a send: a list of contiguous pieces and a position, advanced by
// prepare_src/sendi as they consume it (the role of Open MPI's convertor).
class Convertor {
  public:
    Convertor() = default;
    explicit Convertor(std::span<const iovec> pieces) : pieces_(pieces) {
        for (const iovec& v : pieces) total_ += v.iov_len;
        advance(nullptr, 0);  // step over leading empty pieces
    }
    Convertor(const void* data, std::size_t size)
        : single_{const_cast<void*>(data), size}, pieces_(&single_, 1), total_(size) {}
    Convertor(const Convertor&) = delete;
    Convertor& operator=(const Convertor&) = delete;

    std::size_t total() const noexcept { return total_; }
    std::size_t position() const noexcept { return position_; }
    std::size_t remaining() const noexcept { return total_ - position_; }
    bool contiguous() const noexcept { return pieces_.size() <= 1; }

    // Address of the next unconsumed byte when it is followed by at least `len`
    // contiguous bytes; nullptr otherwise (then pack()).
    const void* contiguous_at(std::size_t len) const noexcept {
        if (index_ >= pieces_.size()) return len == 0 ? static_cast<const void*>(this) : nullptr;
        const iovec& v = pieces_[index_];
        if (v.iov_len - offset_ < len) return nullptr;
        return static_cast<const char*>(v.iov_base) + offset_;
    }
    // Consumes `len` bytes without copying (after contiguous_at succeeded).
    void skip(std::size_t len) noexcept {
        if (pieces_.size() == 1) [[likely]] {
            move_within_single(len);
            return;
        }
        advance(nullptr, len);
    }
    // Copies up to `max` bytes into dst and advances; returns the bytes copied.
    std::size_t pack(void* dst, std::size_t max) noexcept {
        std::size_t n = max < remaining() ? max : remaining();
        if (pieces_.size() == 1 && n != 0) [[likely]] {
            std::memcpy(dst, static_cast<const char*>(single_piece().iov_base) + position_, n);
            move_within_single(n);
            return n;
        }
        advance(static_cast<char*>(dst), n);
        return n;
    }
    // Moves back to an absolute position (e.g. to resend after a failure).
    void seek(std::size_t pos) noexcept {
        index_ = 0;
        offset_ = 0;
        position_ = 0;
        advance(nullptr, pos < total_ ? pos : total_);
    }

  private:
    const iovec& single_piece() const noexcept { return pieces_[0]; }
    // One buffer (the common case): position and offset are the same, and
    // the end is index 1.  n <= remaining().
    void move_within_single(std::size_t n) noexcept {
        position_ += n;
        offset_ = position_;
        if (position_ == total_) {
            index_ = 1;
            offset_ = 0;
        }
    }
    void advance(char* dst, std::size_t n) noexcept {
        position_ += n;
        while (n > 0 && index_ < pieces_.size()) {
            const iovec& v = pieces_[index_];
            std::size_t take = v.iov_len - offset_;
            if (take > n) take = n;
            if (dst) {
                std::memcpy(dst, static_cast<const char*>(v.iov_base) + offset_, take);
                dst += take;
            }
            n -= take;
            offset_ += take;
            if (offset_ == v.iov_len) {
                ++index_;
                offset_ = 0;
            }
        }
        while (index_ < pieces_.size() && pieces_[index_].iov_len == 0) ++index_;
    }

    iovec single_{};
    std::span<const iovec> pieces_;
    std::size_t total_ = 0;
    std::size_t position_ = 0;
    std::size_t index_ = 0;
    std::size_t offset_ = 0;
};

// Set of peers a module can reach, indexed like the peers passed to add_procs.
class Reachability {
  public:
    explicit Reachability(std::size_t n) : bits_(n, false) {}
    void set(std::size_t i) { bits_.at(i) = true; }
    bool test(std::size_t i) const { return bits_.at(i); }
    std::size_t size() const noexcept { return bits_.size(); }

  private:
    std::vector<bool> bits_;
};

}  // namespace transit::btl
