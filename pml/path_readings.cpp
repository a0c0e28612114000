// Both ranks' path figures as one (path_readings.hpp): the wire's form and
// the merge.
#include "pml/path_readings.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "pml/headers.hpp"

namespace transit::pml {

namespace {

// A figure as sent: any negative is "none", so a rank's -1 stays -1.
double sent(double v) noexcept {
    return v < 0 ? -1.0 : v;
}

// A figure as read: finite, and either none or a plausible size (a round
// trip under an hour, a bandwidth under an exabyte per second).
bool plausible(double v) noexcept {
    return std::isfinite(v) && v >= -1.0 && v < 1e12;
}

}  // namespace

std::vector<std::byte> PathReadings::encode(std::span<const std::string_view> names,
                                            std::span<const double> small_us,
                                            std::span<const double> bulk_mbps, std::size_t room) {
    std::vector<std::byte> out;
    const std::size_t n = std::min({names.size(), small_us.size(), bulk_mbps.size(), max_entries});
    for (std::size_t i = 0; i < n; ++i) {
        // A longer name could not be matched on the other side: left out.
        if (names[i].empty() || names[i].size() > max_name) continue;
        wire::PathReadingHdr h{};
        h.small_us = sent(small_us[i]);
        h.bulk_mbps = sent(bulk_mbps[i]);
        h.name_len = static_cast<std::uint8_t>(names[i].size());
        if (out.size() + sizeof h + names[i].size() > room) break;
        const auto* hb = reinterpret_cast<const std::byte*>(&h);
        out.insert(out.end(), hb, hb + sizeof h);
        const auto* nb = reinterpret_cast<const std::byte*>(names[i].data());
        out.insert(out.end(), nb, nb + names[i].size());
    }
    return out;
}

bool PathReadings::decode(std::span<const std::byte> bytes, std::span<const std::string_view> names,
                          std::vector<double>& small_us, std::vector<double>& bulk_mbps) {
    small_us.assign(names.size(), -1.0);
    bulk_mbps.assign(names.size(), -1.0);
    std::vector<double> small(names.size(), -1.0), bulk(names.size(), -1.0);
    std::array<std::string_view, max_entries> seen;
    std::size_t at = 0, entries = 0;
    while (at < bytes.size()) {
        wire::PathReadingHdr h;
        if (bytes.size() - at < sizeof h || ++entries > max_entries) return false;
        std::memcpy(&h, bytes.data() + at, sizeof h);
        at += sizeof h;
        if (h.name_len == 0 || h.name_len > max_name || bytes.size() - at < h.name_len)
            return false;
        if (!plausible(h.small_us) || !plausible(h.bulk_mbps)) return false;
        const std::string_view name(reinterpret_cast<const char*>(bytes.data() + at), h.name_len);
        at += h.name_len;
        if (std::find(seen.begin(), seen.begin() + entries - 1, name) != seen.begin() + entries - 1)
            return false;  // one key twice
        seen[entries - 1] = name;
        const auto it = std::find(names.begin(), names.end(), name);
        if (it == names.end()) continue;  // a module we do not have for this peer
        const auto i = static_cast<std::size_t>(it - names.begin());
        small[i] = sent(h.small_us);
        bulk[i] = sent(h.bulk_mbps);
    }
    small_us = std::move(small);
    bulk_mbps = std::move(bulk);
    return true;
}

void PathReadings::merge(std::span<double> ours, std::span<const double> theirs) noexcept {
    for (std::size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i)
        if (theirs[i] >= 0 && (ours[i] < 0 || theirs[i] < ours[i])) ours[i] = theirs[i];
}

}  // namespace transit::pml
