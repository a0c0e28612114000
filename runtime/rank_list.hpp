// The launcher's list of the ranks on this node (PMIX_LOCAL_PEERS): decimal
// ranks separated by commas, e.g. "0,1,2".
#pragma once

#include <charconv>
#include <string_view>
#include <vector>

#include "transit/runtime.hpp"

namespace transit::rt {

// The ranks of `text` below `size`, in its order; an item that is not a whole
// decimal number below `size` is left out.
inline std::vector<Rank> parse_rank_list(std::string_view text, std::uint32_t size) {
    std::vector<Rank> ranks;
    while (!text.empty()) {
        const std::size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        Rank r = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), r);
        if (ec == std::errc{} && end == item.data() + item.size() && r < size) ranks.push_back(r);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    }
    return ranks;
}

}  // namespace transit::rt
