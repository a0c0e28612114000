// A two-rank job that may only use self and openib.  Without a device nothing
// reaches the other rank: init must fail with InitError (the bml prints the
// "no transport reaches" explanation first), never crash or hang.
#include <cstdio>
#include <string>

#include "transit/transit.hpp"

int main(int argc, char** argv) {
    try {
        transit::Context ctx = transit::init(argc, argv);
        std::printf("rank %u: init worked without a path to the other rank\n", ctx.rank());
        return 0;
    } catch (const transit::InitError& e) {
        std::printf("init: %s: %s\n", std::string(transit::to_string(e.status())).c_str(),
                    e.what());
        return 3;
    }
}
