// What one rank of a pair measured over each path to the other
// (path_measure.hpp), sent to that other with its word that its probes are
// over (wire::turn_done), so that both ranks decide on the same figures.
//
// Why: each rank alone times only half of what its choice governs.  The
// receiver of a rendezvous reads the data with its own choice of module, but
// its own bulk probes timed the peer reading from it: data flowing the other
// way.  And two ranks deciding alone on noisy figures choose differently
// now and then (tcp one way, UCT's tcp the other), which keeps two paths
// warm for one conversation.  Merged per candidate, both ranks hold the same
// figures and choose alike.  The merge takes the lesser of the two:
// - a round trip is the same round trip whichever end times it, and noise
//   only lengthens it;
// - each rank's bulk figure is already the best of its samples (a busy
//   moment only narrows a sample), but a single transfer can also read far
//   above what a stream of them sustains: over tcp between two namespaces
//   one rank read 5,700-8,100 MB/s where the other read 2,100-3,300 in the
//   same run, and 1 MiB messages then moved at 3,000-3,200 MB/s (UCT's tcp:
//   4,200-4,650 read on both sides, 4,150 moved; Xeon, 2026-12-04).  A
//   path is as wide as both directions found it.
// A candidate is matched by a key both sides can compute, its component's
// name (a module's own name holds a local device's, which differs from node
// to node), since the peer's list of candidates for us need not be in our
// order nor hold the same ones; one named only on one side, or an empty key,
// keeps that side's figures.  The bytes come from a job rank and are checked
// all the same: a malformed list (one key twice among them) is refused whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace transit::pml {

class PathReadings {
  public:
    // What a list may hold: more candidates, or longer names, are left out
    // when writing and refused when reading.
    static constexpr std::size_t max_entries = 16;
    static constexpr std::size_t max_name = 63;

    // Our figures per candidate (microseconds and MB/s; < 0: none) under
    // their keys, in the wire's form, at most `room` bytes (the entries that
    // fit; an empty key is left out).
    static std::vector<std::byte> encode(std::span<const std::string_view> names,
                                         std::span<const double> small_us,
                                         std::span<const double> bulk_mbps, std::size_t room);

    // The peer's figures for the candidates we key `names`, in our order
    // (-1 where the peer named none, or read none); false, with both left at
    // -1, when the bytes are not a well-formed list.
    static bool decode(std::span<const std::byte> bytes, std::span<const std::string_view> names,
                       std::vector<double>& small_us, std::vector<double>& bulk_mbps);

    // Both ranks' figures as one: per candidate the lesser of the two (a
    // side's -1 is no figure).
    static void merge(std::span<double> ours, std::span<const double> theirs) noexcept;
};

}  // namespace transit::pml
