// transit::last_error: a per-thread buffer written only when a call fails.
#include "pml/last_error.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "transit/transit.hpp"

namespace transit {

namespace {

// NUL-terminated for transit_last_error; a plain array, so publishing a
// reason never allocates (out_of_resource may fail a call in a loop).
constexpr std::size_t capacity = 1024;
thread_local char published[capacity + 1];
thread_local std::size_t published_length = 0;

}  // namespace

std::string_view last_error() noexcept {
    return {published, published_length};
}

namespace pml {

void set_last_error(std::string_view reason) noexcept {
    published_length = std::min(reason.size(), capacity);
    std::copy_n(reason.data(), published_length, published);
    published[published_length] = '\0';
}

Status call_failed(Status s, std::uint64_t mark, std::string_view call, Rank peer,
                   const Context* ctx) noexcept {
    if (log::wrote_error_since(mark)) {
        set_last_error(log::last_error_line());
        return s;
    }
    const auto end =
        peer == any_rank ? fmt::format_to_n(published, capacity, "{}: {}", call, to_string(s))
        : ctx == nullptr
            ? fmt::format_to_n(published, capacity, "{} (peer {}): {}", call, peer, to_string(s))
        : peer >= ctx->size()
            ? fmt::format_to_n(published, capacity,
                               "{} (peer {}, outside this job's ranks 0..{}): {}", call, peer,
                               ctx->size() - 1, to_string(s))
            : fmt::format_to_n(published, capacity, "{} (rank {}): {}", call, peer, to_string(s));
    published_length = std::min(end.size, capacity);
    published[published_length] = '\0';
    return s;
}

}  // namespace pml

}  // namespace transit
