#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "tools/transit_bench/bench.hpp"
#include "transit/params.hpp"
#include "transit/version.hpp"

namespace tb = transit::bench;

namespace {

constexpr const char* tests[] = {"latency",        "bw",          "bibw",
                                 "msgrate",        "put_latency", "get_latency",
                                 "atomic_latency", "rpc",         "mbw_mr"};

// A usage error (exit status 2, as CLI11's own), not any exception (1).
std::size_t size_arg(const std::string& s, const char* what) {
    try {
        return transit::params::parse_size(s);
    } catch (const std::exception&) {
        throw tb::UsageError(std::string(what) + ": '" + s +
                             "' is not a size (examples: 8, 4k, 1M)");
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        transit::params::parse_command_line(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "transit_bench: %s\n", e.what());
        return 2;
    }
    CLI::App app{
        "transit_bench: latency, bandwidth, message rate and one-sided benchmarks.\n"
        "Run with two ranks: transit_run -n 2 transit_bench latency\n"
        "mbw_mr: N ranks in N/2 pairs (rank i sends to rank i+N/2), all at once; "
        "aggregate bandwidth and message rate"};
    tb::Options o;
    std::string min_s = "0", max_s = "4M";
    std::vector<std::string> names(std::begin(tests), std::end(tests));
    app.add_option("test", o.test, "Benchmark to run")->required()->check(CLI::IsMember(names));
    app.add_option("--min", min_s, "Smallest message size (e.g. 0, 8, 4k)");
    app.add_option("--max", max_s, "Largest message size (e.g. 1M)");
    app.add_option("--iterations,-i", o.iterations, "Timed iterations per size (default: by size)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--warmup,-w", o.warmup, "Untimed iterations per size (default: by size)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--window", o.window, "Messages in flight for bw, bibw, msgrate and mbw_mr")
        ->check(CLI::Range(1, 4096));
    app.add_option("--trials", o.trials,
                   "Timed trials of bw, bibw and msgrate; the median is printed (default 3, "
                   "each calibrated to 0.25 s, 0.5 s for msgrate; 1 with --iterations)")
        ->check(CLI::Range(1, 1000));
    app.add_option("--threads", o.threads,
                   "latency and msgrate: T pairs of threads between ranks 0 and 1, each pair "
                   "with its own tags, at thread level multiple (latency: the mean of all round "
                   "trips of each pair, averaged over the pairs; msgrate: all pairs' messages "
                   "together)")
        ->check(CLI::Range(1, 64));
    app.add_flag("--csv", o.csv,
                 "Print CSV: a bytes,<unit> header line, then bytes,value lines (us for "
                 "latencies, MB/s for bandwidths, M msg/s for msgrate); the line saying what "
                 "ran goes to stderr");
    app.add_flag("--mem-alloc", o.mem_alloc,
                 "Message buffers from the transports' own memory (mem_alloc: shared and "
                 "pre-registered where possible) instead of the heap");
    std::string stat = "block";
    app.add_option(
           "--stat", stat,
           "What a latency row is: block (default), the median of the means of "
           "blocks of round trips (as an OSU-style MPI ping-pong); median, of every round trip "
           "timed alone (ucx_perftest's 50.0%ile); mean, of all of them "
           "(fi_pingpong, osu_latency)")
        ->check(CLI::IsMember({"block", "median", "mean"}));
    app.add_flag("--loopback", o.loopback,
                 "Allow a single rank, timing itself through self (no peer: not a "
                 "measurement of any transport between processes)");
    app.add_option("--raw-btl", o.raw_btl,
                   "Time one transport (self, vader, tcp, ...) directly, without the pml");
    app.add_flag("--listen", o.listen,
                 "rpc: be the server; print the address clients connect to, then answer every "
                 "request with an echo of it");
    app.add_option("--connect", o.connect,
                   "rpc: be a client (each rank of a job one) of the server at this address; "
                   "time 8 B, 4 KiB and 1 MiB calls");
    app.add_option("--serve", o.serve,
                   "rpc server: exit after this many clients have finished (default: never)")
        ->check(CLI::NonNegativeNumber);
    app.set_version_flag("--version", std::string("transit_bench ") + transit::version_string);
    app.footer("Also accepts --mca NAME VALUE to set any Transit parameter.");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;  // 2 for a bad command line, as every tool here
    }
    o.stat = stat == "median" ? tb::LatencyStat::median
             : stat == "mean" ? tb::LatencyStat::mean
                              : tb::LatencyStat::block;
    try {
        o.min_size = size_arg(min_s, "--min");
        o.max_size = size_arg(max_s, "--max");
        if (o.min_size > o.max_size) {
            std::fprintf(stderr, "transit_bench: --min (%zu) is larger than --max (%zu)\n",
                         o.min_size, o.max_size);
            return 2;
        }
        if (o.threads > 1 && (!o.raw_btl.empty() || (o.test != "latency" && o.test != "msgrate"))) {
            std::fprintf(stderr, "transit_bench: --threads is for the pml's latency and msgrate\n");
            return 2;
        }
        if (!o.raw_btl.empty() && o.mem_alloc) {
            std::fprintf(stderr,
                         "transit_bench: --mem-alloc is for the pml tests, not --raw-btl\n");
            return 2;
        }
        if ((o.listen || !o.connect.empty() || o.serve > 0) && o.test != "rpc") {
            std::fprintf(stderr, "transit_bench: --listen, --connect and --serve are for rpc\n");
            return 2;
        }
        if (o.test == "mbw_mr" && !o.raw_btl.empty()) {
            std::fprintf(stderr, "transit_bench: mbw_mr runs over the pml, not --raw-btl\n");
            return 2;
        }
        if (o.test == "rpc") return tb::run_rpc(o, argc, argv);
        if (o.test == "mbw_mr") return tb::run_multi_pair(o);
        if (!o.raw_btl.empty()) return tb::run_raw(o);
        return tb::run_pml(o, argc, argv);
    } catch (const tb::UsageError& e) {
        std::fprintf(stderr, "transit_bench: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "transit_bench: %s\n", e.what());
        return 1;
    }
}
