#include "params/suggest.hpp"

#include <algorithm>
#include <numeric>

namespace transit::params {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // Levenshtein with one rolling row.
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
            row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
            diagonal = above;
        }
    }
    return row[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
    // Two edits always count as a typo; longer names may carry a few more.
    const std::size_t limit = std::max<std::size_t>(2, name.size() / 5);
    std::string best;
    std::size_t best_distance = limit + 1;
    for (const std::string& c : candidates) {
        std::size_t d = edit_distance(name, c);
        if (d < best_distance || (d == best_distance && !best.empty() && c < best)) {
            best = c;
            best_distance = d;
        }
    }
    // A name of two letters is "close" to everything; suggest nothing then.
    if (best_distance >= name.size()) return {};
    return best;
}

}  // namespace transit::params
