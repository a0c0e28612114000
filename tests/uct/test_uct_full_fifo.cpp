// A burst far larger than the peer's FIFO, over uct: rank 0 posts every
// message of the burst while rank 1 is not progressing (its FIFO fills, and
// the rest waits in the sender), then rank 1 receives them one by one in the
// order they were sent and checks each one's index and every byte.  Sizes go
// from 4 bytes to 4000 (UCT's am_short and am_bcopy both carry some), so the
// messages that waited for room are of both kinds.
//
// Rank 1 starts receiving when rank 0 says the burst is posted, through a
// file in TMPDIR (named by the launcher's pid, which both ranks share),
// not through transit: anything through transit would let rank 1 progress.
// The ctest entry requires rank 0's closing line (btl_base_verbose 10) to
// count sends that waited for the peer's FIFO.
//
//   uct_full_fifo [messages]   (default 4096)
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "transit/transit.hpp"

namespace {

using namespace transit;

constexpr std::uint32_t burst_tag = 5;
constexpr std::size_t largest = 4000;

std::size_t size_of(std::size_t i) {
    return sizeof(std::uint32_t) + (i * 37) % (largest - sizeof(std::uint32_t));
}

std::byte pattern(std::size_t index, std::size_t at) {
    return static_cast<std::byte>((index * 131 + at * 7 + 3) & 0xff);
}

std::filesystem::path signal_file() {
    const char* dir = std::getenv("TMPDIR");
    return std::filesystem::path(dir != nullptr && *dir != '\0' ? dir : "/tmp") /
           ("uct_full_fifo." + std::to_string(getppid()));
}

int sender(Context& ctx, std::size_t count) {
    std::vector<std::vector<std::byte>> bufs(count);
    std::vector<Request*> reqs(count, nullptr);
    for (std::size_t i = 0; i < count; ++i) {
        std::vector<std::byte>& b = bufs[i];
        b.resize(size_of(i));
        const auto index = static_cast<std::uint32_t>(i);
        std::memcpy(b.data(), &index, sizeof index);
        for (std::size_t at = sizeof index; at < b.size(); ++at) b[at] = pattern(i, at);
        const Status s = ctx.isend(1, burst_tag, b.data(), b.size(), reqs[i]);
        if (s != Status::completed && s != Status::success) {
            std::fprintf(stderr, "uct_full_fifo: isend %zu of %zu: %s\n", i, count,
                         to_string(s).data());
            return 1;
        }
    }
    { std::ofstream(signal_file()) << "posted\n"; }
    const Status s = ctx.wait_all(reqs);
    std::filesystem::remove(signal_file());
    if (s != Status::success) {
        std::fprintf(stderr, "uct_full_fifo: wait_all: %s\n", to_string(s).data());
        return 1;
    }
    return 0;
}

int receiver(Context& ctx, std::size_t count) {
    // Not a timing assumption: rank 1 must not progress before the burst is
    // posted, whatever the time that takes (60 s at most: then it says so).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(signal_file())) {
        if (std::chrono::steady_clock::now() >= give_up) {
            std::fprintf(stderr, "uct_full_fifo: rank 0 posted no burst within 60 s\n");
            return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<std::byte> buf(largest);
    for (std::size_t i = 0; i < count; ++i) {
        RequestStatus st{};
        const Status s = ctx.recv(0, burst_tag, buf.data(), buf.size(), &st);
        if (s != Status::success) {
            std::fprintf(stderr, "uct_full_fifo: recv %zu: %s\n", i, to_string(s).data());
            return 1;
        }
        std::uint32_t index = 0;
        std::memcpy(&index, buf.data(), sizeof index);
        if (index != i || st.length != size_of(i)) {
            std::fprintf(stderr,
                         "uct_full_fifo: message %zu arrived as number %u of %zu bytes "
                         "(sent %zu bytes): out of order\n",
                         i, index, static_cast<std::size_t>(st.length), size_of(i));
            return 1;
        }
        for (std::size_t at = sizeof index; at < st.length; ++at)
            if (buf[at] != pattern(i, at)) {
                std::fprintf(stderr, "uct_full_fifo: message %zu: byte %zu is wrong\n", i, at);
                return 1;
            }
    }
    std::printf("uct_full_fifo: %zu messages in order, every byte checked\n", count);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    auto ctx = transit::init(argc, argv);
    const std::size_t count = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4096;
    if (ctx.size() != 2 || count == 0) {
        std::fprintf(stderr, "uct_full_fifo: needs 2 ranks and a positive count\n");
        return 2;
    }
    return ctx.rank() == 0 ? sender(ctx, count) : receiver(ctx, count);
}
