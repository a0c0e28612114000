// The job's whole traffic, drawn from one seed: every rank draws every rank's
// plan, so a receiver knows exactly what each sender sends it, in which order,
// and what the final value of each atomic word must be.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "transit/transit.hpp"

namespace stress {

// splitmix64: small, fast, and the same sequence everywhere.
class Rng {
  public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() noexcept {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint64_t below(std::uint64_t n) noexcept { return n ? next() % n : 0; }
    bool chance(unsigned percent) noexcept { return below(100) < percent; }
    // 0 once in 24, else uniform in [2^k, 2^(k+1)) for k uniform: every
    // protocol's range (eager, split and RDMA rendezvous, fragments) gets as
    // many messages as the next.
    std::size_t log_size(std::size_t max) noexcept {
        if (max == 0 || below(24) == 0) return 0;
        const unsigned top = static_cast<unsigned>(std::bit_width(max)) - 1;
        const unsigned k = static_cast<unsigned>(below(top + 1));
        const std::size_t lo = std::size_t{1} << k;
        return std::min(max, lo + below(lo));
    }

  private:
    std::uint64_t state_;
};

inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept {
    return Rng(a * 0xff51afd7ed558ccdull ^ b).next();
}

struct Options {
    std::uint64_t messages = 2000;  // tagged messages in the whole job
    std::uint64_t seed = 0;
    bool seed_given = false;
    bool fault = false;
    std::size_t max_size = 4u << 20;
    std::uint32_t tags = 4;
    std::uint32_t window = 16;  // outstanding sends, and pre-posted receives
    // Sends to self stay below 8 KiB (the pml's rendezvous to self, posted
    // before its receive, used to hang; see README.md).
    bool small_self_sends = false;
    double failure_limit = 1.0;  // seconds from the victim's death to its last request's end
};

constexpr std::size_t self_send_limit = (8u << 10) - 1;

struct TaggedSend {
    transit::Rank dst;
    std::uint32_t tag;
    std::uint64_t seq;  // among the sender's messages to dst with this tag
    std::size_t size;
};

struct AmSend {
    transit::Rank dst;
    std::uint64_t seq;  // among the sender's active messages to dst
    std::size_t size;
};

// The atomic words of each target, one per (operation, width) checked.
enum class Word : std::uint32_t { ticket64, add32, xor64, xor32, or64, and64, max64, min32, count };
constexpr std::uint32_t word_count = static_cast<std::uint32_t>(Word::count);
constexpr std::size_t word_stride = 64;  // one word per cache line

struct AtomicOpPlan {
    transit::Rank dst;
    Word word;
    std::uint64_t operand;
};

struct RankPlan {
    std::vector<TaggedSend> sends;
    std::vector<AmSend> ams;
    std::vector<AtomicOpPlan> atomics;
};

inline transit::AtomicWidth width_of(Word w) noexcept {
    return w == Word::add32 || w == Word::xor32 || w == Word::min32 ? transit::AtomicWidth::bits32
                                                                    : transit::AtomicWidth::bits64;
}

inline transit::AtomicOp op_of(Word w) noexcept {
    using transit::AtomicOp;
    switch (w) {
        case Word::ticket64:
        case Word::add32:
            return AtomicOp::add;
        case Word::xor64:
        case Word::xor32:
            return AtomicOp::xor_;
        case Word::or64:
            return AtomicOp::or_;
        case Word::and64:
            return AtomicOp::and_;
        case Word::max64:
            return AtomicOp::max;
        case Word::min32:
        case Word::count:
            break;
    }
    return AtomicOp::min;
}

// and starts from all ones, min from the largest signed value, the others from zero.
inline std::uint64_t initial_value(Word w) noexcept {
    if (w == Word::and64) return ~0ull;
    if (w == Word::min32) return 0x7fffffffull;
    if (w == Word::max64) return 1ull << 63;  // the smallest signed value
    return 0;
}

inline std::uint64_t apply(Word w, std::uint64_t v, std::uint64_t x) noexcept {
    switch (w) {
        case Word::ticket64:
            return v + x;
        case Word::add32:
            return (v + x) & 0xffffffffull;
        case Word::xor64:
        case Word::xor32:
            return v ^ x;
        case Word::or64:
            return v | x;
        case Word::and64:
            return v & x;
        // min and max compare as signed integers of their width.
        case Word::max64:
            return static_cast<std::uint64_t>(
                std::max(static_cast<std::int64_t>(v), static_cast<std::int64_t>(x)));
        case Word::min32:
        case Word::count:
            break;
    }
    return static_cast<std::uint32_t>(
        std::min(static_cast<std::int32_t>(v), static_cast<std::int32_t>(x)));
}

struct JobShape {
    std::uint32_t size;
    std::uint64_t seed;
    const Options* opt;
    // In fault mode the victim sends tagged messages only, and no active
    // message or atomic is aimed at it: the survivors' counts stay exact.
    transit::Rank victim;  // any_rank when none
};

inline transit::Rank live_peer(Rng& rng, const JobShape& job) {
    for (;;) {
        const auto r = static_cast<transit::Rank>(rng.below(job.size));
        if (r != job.victim) return r;
    }
}

inline std::uint64_t share(std::uint64_t total, std::uint32_t parts, std::uint32_t index) {
    return total / parts + (index < total % parts ? 1 : 0);
}

inline RankPlan draw_plan(const JobShape& job, transit::Rank sender) {
    RankPlan p;
    Rng rng(mix(job.seed, sender));
    const std::uint64_t n = share(job.opt->messages, job.size, sender);
    std::vector<std::uint64_t> seqs(std::size_t{job.size} * job.opt->tags, 0);
    p.sends.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i) {
        const auto dst = static_cast<transit::Rank>(rng.below(job.size));
        const auto tag = static_cast<std::uint32_t>(rng.below(job.opt->tags));
        std::size_t size = rng.log_size(job.opt->max_size);
        if (dst == sender && job.opt->small_self_sends) size = std::min(size, self_send_limit);
        p.sends.push_back({dst, tag, seqs[std::size_t{dst} * job.opt->tags + tag]++, size});
    }
    if (sender == job.victim) return p;
    // One active message and one atomic for every eight tagged messages.
    std::vector<std::uint64_t> am_seqs(job.size, 0);
    for (std::uint64_t i = 0; i < n / 8 + 1; ++i) {
        const auto dst = live_peer(rng, job);
        p.ams.push_back({dst, am_seqs[dst]++,
                         rng.log_size(std::min<std::size_t>(job.opt->max_size, 1u << 20))});
    }
    for (std::uint64_t i = 0; i < n / 8 + 1; ++i) {
        const auto dst = live_peer(rng, job);
        const auto w = static_cast<Word>(rng.below(word_count));
        std::uint64_t x = rng.next();
        if (w == Word::ticket64) x = 1;
        if (width_of(w) == transit::AtomicWidth::bits32) x &= 0xffffffffull;
        p.atomics.push_back({dst, w, x});
    }
    return p;
}

// --- payloads ------------------------------------------------------------------
// Every byte of a message is a function of (sender, receiver, tag, seq) and its
// offset; messages of 48 bytes or more start with this header instead.
struct Header {
    std::uint32_t magic;
    std::uint32_t sender;
    std::uint32_t dst;
    std::uint32_t tag;
    std::uint64_t seq;
    std::uint64_t length;
    std::uint64_t checksum;  // of every byte after the header
    std::uint64_t header_check;
};
static_assert(sizeof(Header) == 48);
constexpr std::uint32_t magic = 0x5354524eu;

inline std::uint64_t message_key(std::uint32_t sender, std::uint32_t dst, std::uint32_t tag,
                                 std::uint64_t seq) noexcept {
    return mix(mix(sender, dst), mix(tag, seq));
}

inline std::uint64_t pattern_word(std::uint64_t key, std::size_t index) noexcept {
    return key ^ (index * 0x9e3779b97f4a7c15ull);
}

inline std::uint64_t header_check(const Header& h) noexcept {
    return mix(mix(h.magic ^ h.sender, h.dst ^ (std::uint64_t{h.tag} << 32)),
               mix(h.seq, h.length ^ h.checksum));
}

// Writes the pattern of `key` over [from, buf.size()) and returns its checksum.
// The first word of `buf` is word `word0` of the pattern.
inline std::uint64_t fill(std::span<std::byte> buf, std::uint64_t key, std::size_t from,
                          std::size_t word0 = 0) noexcept {
    std::uint64_t sum = 0;
    for (std::size_t off = from & ~std::size_t{7}; off < buf.size(); off += 8) {
        const std::uint64_t w = pattern_word(key, word0 + off / 8);
        sum = std::rotl(sum, 5) ^ w;
        if (off >= from && off + 8 <= buf.size()) [[likely]] {
            std::memcpy(buf.data() + off, &w, 8);
            continue;
        }
        const std::size_t lo = std::max(off, from), hi = std::min(off + 8, buf.size());
        std::memcpy(buf.data() + lo, reinterpret_cast<const std::byte*>(&w) + (lo - off), hi - lo);
    }
    return sum;
}

// Checks [from, buf.size()) against the pattern of `key`; the checksum of what
// was seen goes to `sum`.  False at the first wrong byte.
inline bool matches(std::span<const std::byte> buf, std::uint64_t key, std::size_t from,
                    std::uint64_t& sum, std::size_t word0 = 0) noexcept {
    sum = 0;
    for (std::size_t off = from & ~std::size_t{7}; off < buf.size(); off += 8) {
        const std::uint64_t w = pattern_word(key, word0 + off / 8);
        sum = std::rotl(sum, 5) ^ w;
        if (off >= from && off + 8 <= buf.size()) [[likely]] {
            std::uint64_t got;
            std::memcpy(&got, buf.data() + off, 8);
            if (got != w) return false;
            continue;
        }
        const std::size_t lo = std::max(off, from), hi = std::min(off + 8, buf.size());
        if (std::memcmp(buf.data() + lo, reinterpret_cast<const std::byte*>(&w) + (lo - off),
                        hi - lo) != 0)
            return false;
    }
    return true;
}

inline void write_message(std::span<std::byte> buf, std::uint32_t sender, const TaggedSend& s) {
    const std::uint64_t key = message_key(sender, s.dst, s.tag, s.seq);
    if (buf.size() < sizeof(Header)) {
        fill(buf, key, 0);
        return;
    }
    Header h{magic, sender, s.dst, s.tag, s.seq, buf.size(), fill(buf, key, sizeof(Header)), 0};
    h.header_check = header_check(h);
    std::memcpy(buf.data(), &h, sizeof h);
}

}  // namespace stress
