// The part of a vader segment handed out by mem_alloc: whole pages, first fit,
// neighbours merged on release.  mem_alloc is setup-time work (buffers and
// windows), so two ordered maps are plenty; nothing here is on a message path.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>

namespace transit::vader {

class SegmentHeap {
  public:
    static constexpr std::size_t page = 4096;

    SegmentHeap() = default;
    // Manages [begin, begin + size), both multiples of the page size.
    SegmentHeap(std::size_t begin, std::size_t size) {
        if (size >= page) free_.emplace(begin, size - size % page);
    }

    static constexpr std::size_t rounded(std::size_t bytes) noexcept {
        return bytes == 0 ? page : (bytes + page - 1) / page * page;
    }

    // The offset of rounded(bytes) free bytes, or nothing when no gap is that
    // large.  May throw std::bad_alloc (the maps).
    std::optional<std::size_t> take(std::size_t bytes) {
        if (bytes > max_request) return std::nullopt;
        const std::size_t need = rounded(bytes);
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < need) continue;
            const std::size_t offset = it->first;
            const std::size_t rest = it->second - need;
            used_.emplace(offset, need);
            free_.erase(it);
            if (rest > 0) free_.emplace(offset + need, rest);
            in_use_ += need;
            return offset;
        }
        return std::nullopt;
    }

    // Releases the block that take() returned at `offset`; returns its size,
    // 0 when no such block is in use (a foreign or repeated release).
    std::size_t give(std::size_t offset) {
        auto u = used_.find(offset);
        if (u == used_.end()) return 0;
        const std::size_t size = u->second;
        used_.erase(u);
        in_use_ -= size;
        auto [it, inserted] = free_.emplace(offset, size);
        merge_with_next(it);
        if (it != free_.begin()) merge_with_next(std::prev(it));
        return size;
    }

    bool owns(std::size_t offset) const { return used_.count(offset) != 0; }
    std::size_t in_use() const noexcept { return in_use_; }
    std::size_t blocks() const noexcept { return used_.size(); }

  private:
    // Larger requests would overflow rounded(); no segment is that big anyway.
    static constexpr std::size_t max_request = std::size_t{1} << 60;

    void merge_with_next(std::map<std::size_t, std::size_t>::iterator it) {
        auto next = std::next(it);
        if (next != free_.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_.erase(next);
        }
    }

    std::map<std::size_t, std::size_t> free_;  // offset -> bytes
    std::map<std::size_t, std::size_t> used_;  // offset -> bytes
    std::size_t in_use_ = 0;
};

}  // namespace transit::vader
