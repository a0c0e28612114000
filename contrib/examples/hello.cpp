// A first Transit program in C++: rank 0 sends a greeting to every other
// rank, which prints it.  Build and run (with an installed Transit):
//   c++ hello.cpp $(pkg-config --cflags --libs transit-cxx) -o hello
//   transit_run -n 3 ./hello
#include <cstdio>
#include <exception>
#include <string>

#include <transit/transit.hpp>

int main(int argc, char** argv) try {
    transit::Context ctx = transit::init(argc, argv);  // throws, saying why, on failure
    const transit::Rank me = ctx.rank();
    constexpr std::uint32_t tag = 7;
    transit::Status s = transit::Status::success;
    if (me == 0) {
        const std::string text = "hello from rank 0 of " + std::to_string(ctx.size());
        for (transit::Rank peer = 1; peer < ctx.size() && transit::ok(s); ++peer)
            s = ctx.send(peer, tag, text.c_str(), text.size() + 1);
    } else {
        char text[64];
        s = ctx.recv(0, tag, text, sizeof text);
        if (transit::ok(s)) std::printf("rank %u: %s\n", me, text);
    }
    if (!transit::ok(s)) {
        std::fprintf(stderr, "hello: rank %u: %.*s\n", me,
                     static_cast<int>(transit::last_error().size()), transit::last_error().data());
        return 1;
    }
    return 0;  // ~Context waits until no rank still sends to this one
} catch (const std::exception& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return 1;
}
