// The job secret: 128 bits every rank of a job shares and no other job knows.
// transit_run makes it and hands it to its ranks as the job-level PMIx key
// "transit.secret"; other launchers get one derived as described in README.md.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "transit/runtime.hpp"

namespace transit::rt {

// The job-level PMIx key transit_run registers (a 16-byte PMIX_BYTE_OBJECT).
inline constexpr const char* secret_job_key = "transit.secret";
// The modex key under which rank 0 publishes a random seed when the launcher
// gave no secret and no per-job random value either.
inline constexpr const char* secret_seed_key = "transit.secret.seed";

// 128 bits from the kernel's random source; throws std::runtime_error if it fails.
Secret random_secret();

// A deterministic secret from job-unique inputs (e.g. the PMIx namespace and a
// launcher's per-job random value).  Not a cryptographic hash: its inputs are
// what must stay private, this only folds them to 128 well-mixed bits.
Secret derive_secret(std::string_view a, std::string_view b);

std::string to_hex(std::span<const std::byte> bytes);
std::optional<Secret> secret_from_bytes(std::span<const std::byte> bytes);

}  // namespace transit::rt
