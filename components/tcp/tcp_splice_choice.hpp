// Whether this host sends large put and get payloads by copying them into the
// socket or by lending their pages (tcp_splice.hpp).  Which is faster depends
// on the processor and the kernel, so it is measured once per host: a few
// 1 MiB transfers of each kind over a loopback connection, and the outcome is
// kept in a small file under the user's cache directory, keyed by the host's
// fingerprint (processor model, core count, kernel release).  Later starts on
// the same host read the file; a file that cannot be read back, or that was
// written on another host, is ignored (with a line saying why) and replaced.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace transit::tcp {

// The splice range a lending host uses: payloads of 256 KiB and more (below
// that the pipe's set-up costs more than the copy saves), no upper limit.
inline constexpr std::size_t lend_min = 256 * 1024;
inline constexpr std::size_t lend_max = 0;
// Size of each measured transfer, and transfers of each kind timed, the two
// kinds alternating; the median of each kind counts (on a shared host a
// single fast or slow transfer is the neighbours' doing, not the method's).
inline constexpr std::size_t probe_size = 1 << 20;
inline constexpr int probe_rounds = 9;
// Lending is chosen when it is at least this much faster: on a tie, copying
// (no pipe, no signal guard) is the simpler path.
inline constexpr double lend_margin = 1.1;

// One measurement: MB/s of 1 MiB transfers over a loopback connection (the
// median of each kind), and the median over the rounds of lending's speed-up
// on the copy just before it (rounds next to each other share the host's
// state, so this ratio is steadier than the ratio of the medians).
struct SpliceMeasurement {
    double copy_mbps = 0;
    double lend_mbps = 0;
    double speedup = 0;
    bool lends() const noexcept { return speedup > lend_margin; }
};

// Measures both ways (a receiving thread, this thread sending); nullopt with
// `why` set when it cannot (no loopback socket, no pipe, a transfer stalled).
// A series that finds lending ahead is repeated, and the lower speed-up counts.
std::optional<SpliceMeasurement> measure_splice(std::string& why);

// "cpu=AMD EPYC 7B13; cores=2; kernel=6.1.0-18-cloud-amd64".
std::string host_fingerprint();

// The cache file for `fingerprint`: <XDG_CACHE_HOME or ~/.cache>/transit/
// tcp-splice-<hash of the fingerprint>; empty when neither is set.
std::string splice_cache_path(std::string_view fingerprint);

// What the file at `path` says for `fingerprint`; nullopt with `why` set when
// it is missing, unreadable, not such a file, or written for another host.
std::optional<SpliceMeasurement> read_splice_cache(const std::string& path,
                                                   std::string_view fingerprint, std::string& why);
// Writes it (a temporary file renamed over, so a reader never sees half a
// file); false with `why` set when it cannot.
bool write_splice_cache(const std::string& path, std::string_view fingerprint,
                        const SpliceMeasurement& m, std::string& why);

// The range used and where it came from.
struct SpliceChoice {
    enum class From {
        parameter,    // btl_tcp_splice_min set by the user: nothing measured
        cache,        // read from the host's cache file
        measurement,  // measured at this start
        fallback,     // could not measure: copy
    };
    From from = From::fallback;
    std::size_t min = 0;  // 0: always copy
    std::size_t max = 0;  // 0: no limit
    SpliceMeasurement measured{};
    double measure_ms = 0;  // what measuring cost this start (From::measurement)
    std::string fingerprint;
    std::string cache_path;
    // Why a cache was not used or not written, why nothing was measured.
    std::vector<std::string> notes;

    // "lend 256 KiB..no limit (measured: copy 2100 MB/s, lend 2600 MB/s; cached in ...)".
    std::string describe() const;
};

std::string_view to_string(SpliceChoice::From f) noexcept;

// The choice for this process.  `explicit_min`, `explicit_max`: the values of
// btl_tcp_splice_min and btl_tcp_splice_max when the user set them.  An
// explicit min is used as it is with the max parameter's value (`param_max`);
// otherwise the host's measurement decides min and max, and an explicit max
// still wins over the measured one.
SpliceChoice choose_splice(std::optional<std::size_t> explicit_min,
                           std::optional<std::size_t> explicit_max, std::size_t param_max);

}  // namespace transit::tcp
