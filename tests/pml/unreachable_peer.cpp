// unreachable_peer c|cxx: rank 0 sends to rank 1, which receives.  Run where
// no selected transport joins the ranks (btl=self), init must fail on every
// rank, naming the ranks it cannot reach, through the C API (transit_init's
// status and transit_last_error) or the C++ one (InitError); the program
// prints that line and exits 3.  Where they are joined it prints "done".
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transit/transit.h"
#include "transit/transit.hpp"

namespace {

const char* rank_text() {
    const char* r = std::getenv("TRANSIT_RANK");
    return r ? r : "?";
}

int exchange(transit::Context& ctx) {
    char msg[6] = "hello";
    const transit::Status s =
        ctx.rank() == 0 ? ctx.send(1, 7, msg, sizeof msg) : ctx.recv(0, 7, msg, sizeof msg);
    std::printf("rank %u: %s\n", ctx.rank(), transit::ok(s) ? "done" : "exchange failed");
    return transit::ok(s) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string api = argc > 1 ? argv[1] : "";
    if (api == "c") {
        transit_context* ctx = nullptr;
        const int rc = transit_init(&argc, &argv, &ctx);
        if (rc != TRANSIT_SUCCESS) {
            std::printf("rank %s: transit_init returned %d: %s\n", rank_text(), rc,
                        transit_last_error());
            return 3;
        }
        const bool single = transit_size(ctx) == 1;
        transit_finalize(ctx);
        std::printf("rank %s: %s\n", rank_text(), single ? "done" : "init worked");
        return 0;
    }
    if (api != "cxx") {
        std::fprintf(stderr, "usage: unreachable_peer c|cxx\n");
        return 2;
    }
    try {
        transit::Context ctx = transit::init(argc, argv);
        return ctx.size() == 1 ? (std::printf("rank 0: done\n"), 0) : exchange(ctx);
    } catch (const transit::InitError& e) {
        std::printf("rank %s: InitError (%s): %s\n", rank_text(),
                    std::string(transit::to_string(e.status())).c_str(), e.what());
        return 3;
    }
}
