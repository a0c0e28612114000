// transit_bench: OSU-style benchmarks over the pml, or over one raw btl.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace transit {
class Context;
}

namespace transit::bench {

// How a latency test sums up its round trips (see round_trip_us).
enum class LatencyStat { block, median, mean };

struct Options {
    std::string test;
    std::string raw_btl;
    std::size_t min_size = 0;
    std::size_t max_size = 4u << 20;
    int iterations = 0;  // 0: depends on the size
    int warmup = 0;
    int window = 64;
    int trials = 0;  // streaming tests: 0 = 3 timed trials, or 1 with --iterations
    bool csv = false;
    bool mem_alloc = false;  // message buffers from Context::mem_alloc, not the heap
    bool loopback = false;   // one rank timing itself through self, asked for
    int threads = 1;         // latency, msgrate: pairs of threads, each its own tags
    LatencyStat stat = LatencyStat::block;
    bool listen = false;  // rpc: be the server
    std::string connect;  // rpc: be a client of the server at this address
    int serve = 0;        // rpc server: exit after this many clients said goodbye (0: never)
};

// A command line or a job the benchmarks cannot use (exit status 2).
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A benchmark of one rank times the process against itself: a believable
// table of nothing, so it runs only when asked for (--loopback).
inline void require_two_ranks(const Options& o, unsigned ranks) {
    if (ranks == 1 && !o.loopback)
        throw UsageError(
            "needs two ranks: transit_run -n 2 transit_bench ... (or --loopback to time "
            "one rank against itself)");
}

// One row of output.
struct Row {
    std::size_t bytes;
    double value;
};

// Sizes: min, then powers of two up to max (0 and 1 both included when min is 0).
std::vector<std::size_t> sizes(const Options& o);
int iterations_for(const Options& o, std::size_t size, bool bandwidth);
int warmup_for(const Options& o, std::size_t size);
// Round trips per timed block of a latency test: 50 up to 4 KiB, 10 up to
// 64 KiB, else 1 (the timer's own cost stays out of small messages' times).
int latency_block(std::size_t size);
// Timed trials of a streaming test, and the seconds one should last when the
// window count is calibrated (no --iterations): 0.5 s for msgrate, 0.25 s for
// bw and bibw, as an OSU-style MPI ping-pong does.
int trials_for(const Options& o);
double trial_seconds(const Options& o);
// The median of the values (sorts them).
double median(std::vector<double>& v);

// Cycles of a cheap counter: timing every round trip with steady_clock would
// add its own cost to each (~40 ns a read on a VM, against ~10 for rdtsc: a
// fifth of a shared-memory half round trip).  ucx_perftest times with rdtsc too.
inline std::uint64_t cycles() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

// The three statistics of round_trip_us, in microseconds per round trip.
template <typename RoundTrip>
double mean_round_trip_us(int iters, RoundTrip& round_trip) {
    using clock = std::chrono::steady_clock;
    const clock::time_point t0 = clock::now();
    for (int i = 0; i < iters; ++i) round_trip();
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count() / iters;
}

template <typename RoundTrip>
double median_single_round_trip_us(int iters, RoundTrip& round_trip) {
    using clock = std::chrono::steady_clock;
    std::vector<std::uint64_t> ticks(static_cast<std::size_t>(iters));
    const clock::time_point t0 = clock::now();
    std::uint64_t last = cycles();
    for (std::uint64_t& t : ticks) {
        round_trip();
        const std::uint64_t now = cycles();
        t = now - last;
        last = now;
    }
    const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
    std::uint64_t total = 0;
    for (std::uint64_t t : ticks) total += t;
    std::nth_element(ticks.begin(), ticks.begin() + iters / 2, ticks.end());
    return total == 0 ? 0 : us * static_cast<double>(ticks[iters / 2]) / total;
}

template <typename RoundTrip>
double median_block_round_trip_us(std::size_t size, int iters, RoundTrip& round_trip) {
    using clock = std::chrono::steady_clock;
    const int block = latency_block(size);
    const int blocks = iters / block > 1 ? iters / block : 1;
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(blocks));
    for (int b = 0; b < blocks; ++b) {
        const clock::time_point t0 = clock::now();
        for (int i = 0; i < block; ++i) round_trip();
        samples.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count() /
                          block);
    }
    return median(samples);
}

// Microseconds per round trip after `warm` untimed ones, by o.stat:
//  block   round_trip() timed in blocks of latency_block(size), the median of
//          the blocks' means (the statistic of the MPI ping-pong compare.sh runs:
//          a descheduled block moves the mean, not the median);
//  median  every round trip timed, their median (ucx_perftest's 50.0%ile);
//  mean    all of them timed together (fi_pingpong's usec/xfer, osu_latency).
template <typename RoundTrip>
double round_trip_us(const Options& o, std::size_t size, int iters, int warm,
                     RoundTrip&& round_trip) {
    for (int i = 0; i < warm; ++i) round_trip();
    switch (o.stat) {
        case LatencyStat::mean:
            return mean_round_trip_us(iters, round_trip);
        case LatencyStat::median:
            return median_single_round_trip_us(iters, round_trip);
        case LatencyStat::block:
            break;
    }
    return median_block_round_trip_us(size, iters, round_trip);
}

// Run over the pml; return the exit code.
int run_pml(const Options& o, int argc, char** argv);
// Run over one btl module with no pml (latency, bw, bibw, msgrate).
int run_raw(const Options& o);
// mbw_mr: N/2 pairs streaming at once, aggregate bandwidth and message rate
// (multi_pair.cpp).
int run_multi_pair(const Options& o);
// The RPC benchmark: a server (--listen) and clients outside its job (--connect).
int run_rpc(const Options& o, int argc, char** argv);

// What the bml chose for a peer ("eager vader, send vader, rdma vader"), so a
// header says what was measured.
std::string peer_transports(Context& ctx, std::uint32_t peer);

// The data check run after each size's timed loop (a configuration that
// loses or damages data must fail, not print a row): the sender fills its
// buffer with pattern `which`, the receiver asks what is wrong with what it
// got ("" when nothing).
void fill_pattern(std::span<std::byte> buf, int which) noexcept;
std::string pattern_mismatch(std::span<const std::byte> got, std::size_t size, int which);

// Prints the header (rank 0 only).
void print_header(const Options& o, const std::string& transport);
void print_row(const Options& o, const Row& r);

}  // namespace transit::bench
