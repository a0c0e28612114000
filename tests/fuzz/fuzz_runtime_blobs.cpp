// libFuzzer target for what the runtime reads from its launcher and the other
// ranks: the launcher's local-peer list (PMIX_LOCAL_PEERS, parse_rank_list),
// and a peer's secret blob and rank 0's seed (secret_from_bytes, to_hex and
// derive_secret, as learn_peers runs them).  See runtime_blobs.cmake.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "runtime/job_secret.hpp"
#include "runtime/rank_list.hpp"

namespace rt = transit::rt;
using transit::Rank;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    // The first two bytes give the job size the list is read against.
    const std::uint32_t job_size = static_cast<std::uint32_t>(data[0]) << 8 | data[1];
    const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);

    // Every rank kept is below the job size and written as such in the text.
    for (const Rank r : rt::parse_rank_list(text, job_size)) {
        if (r >= job_size) __builtin_trap();
        if (text.find(std::to_string(r)) == std::string_view::npos) __builtin_trap();
    }

    const std::span<const std::byte> blob(reinterpret_cast<const std::byte*>(data), size);
    // A blob becomes a secret only when it has the secret's size, and unchanged.
    if (const auto secret = rt::secret_from_bytes(blob)) {
        if (size != secret->size()) __builtin_trap();
        if (rt::to_hex(*secret) != rt::to_hex(blob)) __builtin_trap();
    } else if (size == rt::Secret{}.size()) {
        __builtin_trap();
    }
    // The seed of any length, in hex, gives one secret whatever the job id.
    const std::string hex = rt::to_hex(blob);
    if (hex.size() != 2 * size) __builtin_trap();
    if (rt::derive_secret(text, hex) != rt::derive_secret(text, hex)) __builtin_trap();
    return 0;
}
