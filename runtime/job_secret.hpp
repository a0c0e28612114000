// The job secret: 128 bits every rank of a job shares and no other job knows.
// transit_run makes it and hands it to its ranks through an inherited
// descriptor (never through PMIx, whose TCP server believes the user id a
// client claims); other launchers get one derived as described in README.md.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "transit/runtime.hpp"

namespace transit::rt {

// Names the descriptor number, inherited from transit_run, of a sealed
// in-memory file holding the 16 bytes.
inline constexpr const char* secret_fd_var = "TRANSIT_JOB_SECRET_FD";
// The modex key under which rank 0 publishes a random seed when the launcher
// gave no secret and no per-job random value either.
inline constexpr const char* secret_seed_key = "transit.secret.seed";

// 128 bits from the kernel's random source; throws std::runtime_error if it fails.
Secret random_secret();

// A deterministic secret from job-unique inputs (e.g. the PMIx namespace and a
// launcher's per-job random value).  Not a cryptographic hash: its inputs are
// what must stay private, this only folds them to 128 well-mixed bits.
Secret derive_secret(std::string_view a, std::string_view b);

// A sealed, close-on-exec in-memory file holding `secret`, for the launcher
// to pass to its ranks; throws std::runtime_error on failure.  Other users
// cannot open it: /proc/<pid>/fd of a process is its owner's only.
int secret_file(const Secret& secret);

// The secret in the inherited descriptor `fd_text` names (secret_fd_var's
// value); marks it close-on-exec, so the rank's own children do not inherit
// it.  Throws std::runtime_error, naming the reason, when it cannot be read.
Secret read_secret_file(std::string_view fd_text);

std::string to_hex(std::span<const std::byte> bytes);
std::optional<Secret> secret_from_bytes(std::span<const std::byte> bytes);

}  // namespace transit::rt
