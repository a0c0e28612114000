// A two-rank job that may only use self and openib.  Without a device nothing
// reaches the other rank: send must fail with a status (the bml prints the
// "no transport reaches" explanation), never crash or hang.
#include <cstdio>

#include "transit/transit.hpp"

int main(int argc, char** argv) {
    transit::Context ctx = transit::init(argc, argv);
    const transit::Rank peer = ctx.rank() == 0 ? 1 : 0;
    const char msg[] = "hello";
    const transit::Status s = ctx.send(peer, 7, msg, sizeof msg);
    std::printf("rank %u: send to rank %u: %s\n", ctx.rank(), peer,
                std::string(transit::to_string(s)).c_str());
    return s == transit::Status::unreachable ? 3 : 0;
}
