// An echo server for clients outside its job: prints its address, then sends
// every message back to whoever sent it, until a client sends tag 9 (quit).
//   echo_server > address.txt &
//   echo_client "$(cat address.txt)" hello
#include <cstdio>
#include <vector>

#include "transit/transit.hpp"

int main(int argc, char** argv) {
    auto ctx = transit::init(argc, argv);
    std::printf("%s\n", ctx.listen().c_str());
    std::fflush(stdout);
    constexpr std::uint32_t quit = 9;
    std::vector<char> buf(1 << 20);
    for (;;) {
        // A new client needs no call here: its first message arrives like any
        // other, and the status names the peer id it was given.
        transit::RequestStatus st;
        if (ctx.recv(transit::any_rank, transit::any_tag, buf.data(), buf.size(), &st) !=
            transit::Status::success) {
            std::fprintf(stderr, "echo_server: receive from %u: %s\n", st.source,
                         std::string(transit::to_string(st.status)).c_str());
            continue;
        }
        std::fprintf(stderr, "echo_server: %zu bytes from peer %u\n", st.length, st.source);
        ctx.send(st.source, st.tag, buf.data(), st.length);
        if (st.tag == quit) return 0;
    }
}
