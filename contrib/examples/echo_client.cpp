// The echo server's client: connects by address, sends each argument and
// prints the answer, then disconnects.  --quit stops the server.
//   echo_client ADDRESS hello world
//   echo_client ADDRESS --quit
#include <cstdio>
#include <string>
#include <vector>

#include "transit/transit.hpp"

int main(int argc, char** argv) {
    auto ctx = transit::init(argc, argv);
    if (argc < 3) {
        std::fprintf(stderr, "usage: echo_client ADDRESS (MESSAGE... | --quit)\n");
        return 2;
    }
    transit::Rank server;
    if (!transit::ok(ctx.connect(argv[1], server))) {
        std::fprintf(stderr, "echo_client: %s\n", std::string(transit::last_error()).c_str());
        return 1;
    }
    const bool quit = std::string(argv[2]) == "--quit";
    for (int i = 2; i < argc; ++i) {
        const std::string msg = quit ? "quit" : argv[i];
        const std::uint32_t tag = quit ? 9 : 1;
        std::vector<char> answer(msg.size());
        transit::RequestStatus st;
        transit::Status s = ctx.send(server, tag, msg.data(), msg.size());
        if (s == transit::Status::success)
            s = ctx.recv(server, tag, answer.data(), answer.size(), &st);
        if (s != transit::Status::success) {
            std::fprintf(stderr, "echo_client: %s\n", std::string(transit::last_error()).c_str());
            return 1;
        }
        std::printf("%.*s\n", static_cast<int>(st.length), answer.data());
        if (quit) break;
    }
    ctx.disconnect(server);
    return 0;
}
