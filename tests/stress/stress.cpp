// transit_stress: a randomized stress test of the public API (see README.md).
//
//   transit_run -n 3 transit_stress [--messages N] [--seed S] [--fault] ...
//
// Every rank prints "stress: rank R PASS ..." or "stress: rank R FAIL: ..." and
// exits 0 or 1.  Rank 0 prints the seed first; the same seed draws the same
// traffic again.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>

#include <unistd.h>

#include "tests/stress/traffic.hpp"

namespace {

using namespace stress;

void usage() {
    std::puts(
        "usage: transit_stress [--messages N] [--seed S] [--fault] [--failure-limit S]\n"
        "                      [--max-size BYTES]\n"
        "                      [--tags N] [--window N] [--small-self-sends]\n"
        "  --messages N        tagged messages in the whole job (default 2000)\n"
        "  --seed S            draw the traffic from S (default: random, printed)\n"
        "  --fault             one rank (drawn from the seed) raises SIGKILL midway;\n"
        "                      the others check that their requests with it end with\n"
        "                      peer_failed within 1 s and that their own traffic completes\n"
        "  --failure-limit S   with --fault: the longest a request with the killed rank\n"
        "                      may take to end after its death (default 1 s)\n"
        "  --max-size BYTES    largest tagged message (default 4194304)\n"
        "  --tags N            distinct tags (default 4)\n"
        "  --window N          outstanding sends, and pre-posted receives (default 16)\n"
        "  --small-self-sends  keep sends to self below 8 KiB");
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto number = [&](auto& out) {
            if (i + 1 >= argc) return false;
            char* end = nullptr;
            const unsigned long long v = std::strtoull(argv[++i], &end, 0);
            if (!end || *end) return false;
            out = static_cast<std::remove_reference_t<decltype(out)>>(v);
            return true;
        };
        bool good = true;
        if (a == "--messages")
            good = number(o.messages);
        else if (a == "--seed")
            good = number(o.seed), o.seed_given = true;
        else if (a == "--max-size")
            good = number(o.max_size);
        else if (a == "--tags")
            good = number(o.tags) && o.tags > 0;
        else if (a == "--window")
            good = number(o.window) && o.window > 0;
        else if (a == "--failure-limit")
            good = i + 1 < argc && (o.failure_limit = std::atof(argv[++i])) > 0;
        else if (a == "--fault")
            o.fault = true;
        else if (a == "--small-self-sends")
            o.small_self_sends = true;
        else
            good = false;
        if (!good) {
            std::fprintf(stderr, "transit_stress: bad argument '%s'\n", a.c_str());
            usage();
            return false;
        }
    }
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    try {
        bool passed = false;
        std::string death_file;
        {
            auto ctx = transit::init(argc, argv);
            if (!parse(argc, argv, opt)) return 2;
            if (!opt.seed_given)
                opt.seed = std::random_device{}() ^ (std::uint64_t{std::random_device{}()} << 32);
            Traffic t(ctx, opt);
            passed = t.run();
            death_file = t.death_file();
        }
        // Past the Context's final barrier every survivor has read it.
        if (opt.fault) ::unlink(death_file.c_str());
        return passed ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "transit_stress: %s\n", e.what());
        return 2;
    }
}
