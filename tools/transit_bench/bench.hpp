// transit_bench: OSU-style benchmarks over the pml, or over one raw btl.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace transit::bench {

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
};

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
// bw and bibw, as ../shared/bench's mpi_pingpong does.
int trials_for(const Options& o);
double trial_seconds(const Options& o);
// The median of the values (sorts them).
double median(std::vector<double>& v);

// Microseconds per round trip: round_trip() timed in blocks of
// latency_block(size) after `warm` untimed ones, the median of the blocks'
// means (the statistic of ../shared/bench's mpi_pingpong: a descheduled block
// moves the mean, not the median).
template <typename RoundTrip>
double median_round_trip_us(std::size_t size, int iters, int warm, RoundTrip&& round_trip) {
    using clock = std::chrono::steady_clock;
    const int block = latency_block(size);
    const int blocks = iters / block > 1 ? iters / block : 1;
    const int warm_blocks = (warm + block - 1) / block;
    std::vector<double> samples;
    samples.reserve(static_cast<std::size_t>(blocks));
    for (int b = 0; b < warm_blocks + blocks; ++b) {
        const clock::time_point t0 = clock::now();
        for (int i = 0; i < block; ++i) round_trip();
        const double us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
        if (b >= warm_blocks) samples.push_back(us / block);
    }
    return median(samples);
}

// Run over the pml; return the exit code.
int run_pml(const Options& o, int argc, char** argv);
// Run over one btl module with no pml (latency, bw, bibw, msgrate).
int run_raw(const Options& o);

// Prints the header (rank 0 only).
void print_header(const Options& o, const std::string& transport);
void print_row(const Options& o, const Row& r);

}  // namespace transit::bench
