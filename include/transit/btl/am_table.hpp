// The active-message tag table: maps each 8-bit tag to the upper layer's receive
// callback.  One table per process, shared by every module, with the tag space
// split into ranges so that layers cannot collide.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "transit/btl/types.hpp"

namespace transit::btl {

enum class TagRange : std::uint8_t { btl, pml, osc, user };

class AmTable {
public:
    static constexpr int range_size = 32;

    // First tag of a range: btl 0x20, pml 0x40, osc 0x60, user 0x80..0xff.
    static constexpr Tag first(TagRange r) noexcept {
        return static_cast<Tag>(0x20 + 0x20 * static_cast<int>(r));
    }
    static constexpr int size(TagRange r) noexcept { return r == TagRange::user ? 128 : range_size; }
    static constexpr Tag tag(TagRange r, int offset) noexcept {
        return static_cast<Tag>(first(r) + offset);
    }

    // Registers a callback; exists if the tag is taken, bad_param if outside any
    // range (tags below 0x20 are reserved).
    Status register_callback(Tag tag, ReceiveFn fn, void* cbdata) noexcept;
    void unregister_callback(Tag tag) noexcept;
    bool registered(Tag tag) const noexcept { return entries_[tag].fn != nullptr; }

    // Delivers a received message.  Returns false (and delivers nothing) when no
    // callback holds the tag: the transport reports that as a protocol error.
    bool dispatch(Module* module, const ReceiveDescriptor& d) const noexcept {
        const Entry& e = entries_[d.tag];
        if (e.fn == nullptr) [[unlikely]]
            return false;
        e.fn(module, d, e.cbdata);
        return true;
    }

private:
    struct Entry {
        ReceiveFn fn = nullptr;
        void* cbdata = nullptr;
    };
    std::array<Entry, 256> entries_{};
};

// The process-wide table.
AmTable& am_table();

}  // namespace transit::btl
