// Sizes, iteration counts and the table / CSV output.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "tools/transit_bench/bench.hpp"

namespace transit::bench {

std::vector<std::size_t> sizes(const Options& o) {
    std::vector<std::size_t> out;
    // A bandwidth of empty messages means nothing: those start at 1 byte.
    const bool bandwidth = o.test == "bw" || o.test == "bibw" || o.test == "mbw_mr";
    if (!(bandwidth && o.min_size == 0)) out.push_back(o.min_size);
    std::size_t s = 1;
    while (s <= o.min_size) s <<= 1;
    for (; s <= o.max_size; s <<= 1) out.push_back(s);
    return out;
}

int iterations_for(const Options& o, std::size_t size, bool bandwidth) {
    if (o.iterations > 0) return o.iterations;
    if (bandwidth) return size <= 65536 ? 100 : 20;
    if (size <= 8192) return 10000;
    if (size <= (1u << 20)) return 1000;
    return 100;
}

int warmup_for(const Options& o, std::size_t size) {
    if (o.warmup > 0 || o.iterations > 0) return o.warmup;
    return size <= 8192 ? 1000 : 10;
}

int latency_block(std::size_t size) {
    return size <= 4096 ? 50 : size <= 65536 ? 10 : 1;
}

int trials_for(const Options& o) {
    if (o.trials > 0) return o.trials;
    return o.iterations > 0 ? 1 : 3;
}

double trial_seconds(const Options& o) {
    return o.test == "msgrate" ? 0.5 : 0.25;
}

double median(std::vector<double>& v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

bool is_latency(const Options& o) {
    return o.test.find("latency") != std::string::npos;
}

std::string unit(const Options& o) {
    if (is_latency(o)) return "latency (us)";
    if (o.test == "msgrate") return "rate (M msg/s)";
    return "bandwidth (MB/s)";
}

// The value column's name in --csv output.
std::string csv_column(const Options& o) {
    if (is_latency(o)) return "latency_us";
    if (o.test == "msgrate") return "rate_mmsg_per_s";
    return "bandwidth_mb_per_s";
}

}  // namespace

void print_header(const Options& o, const std::string& transport) {
    // CSV's first line is its column names (what a spreadsheet or pandas
    // reads): what ran goes to stderr then.
    std::FILE* about = o.csv ? stderr : stdout;
    fmt::print(about, "# transit_bench {} over {}\n", o.test, transport);
    if (o.threads > 1)
        fmt::print(about, "# {} pairs of threads, thread level multiple\n", o.threads);
    std::fflush(about);
    if (o.csv)
        fmt::print("bytes,{}\n", csv_column(o));
    else
        fmt::print("{:>12}  {:>18}\n", "# bytes", unit(o));
    std::fflush(stdout);
}

void print_row(const Options& o, const Row& r) {
    if (o.csv)
        fmt::print("{},{:.3f}\n", r.bytes, r.value);
    else
        fmt::print("{:>12}  {:>18.2f}\n", r.bytes, r.value);
    std::fflush(stdout);
}

}  // namespace transit::bench
