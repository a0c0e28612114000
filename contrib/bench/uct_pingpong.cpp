// UCT's own ping-pong, timed exactly as transit_bench times one: the
// reference raw_vs_library.sh sets the raw uct btl against.  ucx_perftest is
// the other reference, but its figures come from a different statistic and
// with a clock read after every round trip, which costs a loop a different
// amount depending on its shape; here both sides differ only in the btl.
//
// Two processes (a fork), each bound to its own CPU, one UCT interface each;
// the addresses go through a socket pair.  8-byte messages: am_short's header
// word alone, as ucx_perftest -s 8 sends them.  The transport names its memory
// domain too (posix, sysv, tcp).
//
//   uct_pingpong [round trips] [transport] [device]   (default 200000 posix memory)
//
// Timed by transit_bench's own code (tools/transit_bench/bench.hpp) as
// `transit_bench latency --min 8 --max 8 -i <round trips>` times, so the two
// figures differ only in what moves the message.
#include <sys/socket.h>
#include <sys/wait.h>
#include <uct/api/uct.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "contrib/bench/bind_to.hpp"
#include "tools/transit_bench/bench.hpp"

namespace {

constexpr std::uint8_t am_id = 5;

void check(ucs_status_t s, const char* what) {
    if (s != UCS_OK) throw std::runtime_error(std::string(what) + ": " + ucs_status_string(s));
}

void write_all(int fd, const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w <= 0) throw std::runtime_error("the socket to the other process failed");
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void read_all(int fd, void* data, std::size_t n) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
        const ssize_t r = ::read(fd, p, n);
        if (r <= 0) throw std::runtime_error("the other process went away");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

template <typename T, auto Destroy>
struct Deleter {
    void operator()(T* p) const noexcept { Destroy(p); }
};
template <typename T, auto Destroy>
using Owned = std::unique_ptr<T, Deleter<T, Destroy>>;

// One process's side: a worker, an interface and an endpoint to the other.
class Side {
  public:
    Side(const std::string& tl, const std::string& dev, int sock) {
        ucs_async_context_t* async = nullptr;
        check(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &async), "async context");
        async_.reset(async);
        uct_worker_h worker = nullptr;
        check(uct_worker_create(async_.get(), UCS_THREAD_MODE_SINGLE, &worker), "worker");
        worker_.reset(worker);
        open_interface(tl, dev);
        connect(sock);
    }

    // Receives are counted by the handler; the loop waits on the count.
    void send() {
        while (uct_ep_am_short(ep_.get(), am_id, 0x1234, nullptr, 0) != UCS_OK)
            uct_worker_progress(worker_.get());
    }
    void wait_for(std::uint64_t n) {
        while (received_ < n) uct_worker_progress(worker_.get());
    }

  private:
    static ucs_status_t on_am(void* arg, void*, std::size_t, unsigned) {
        ++static_cast<Side*>(arg)->received_;
        return UCS_OK;
    }

    void open_interface(const std::string& tl, const std::string& dev) {
        uct_component_h* components = nullptr;
        unsigned count = 0;
        check(uct_query_components(&components, &count), "components");
        uct_component_h found = nullptr;
        for (unsigned i = 0; i < count && !found; ++i) {
            uct_component_attr_t a{};
            a.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
            if (uct_component_query(components[i], &a) == UCS_OK && tl == a.name)
                found = components[i];
        }
        uct_release_component_list(components);
        if (!found) throw std::runtime_error("no UCT memory domain named " + tl);
        uct_md_config_t* md_config = nullptr;
        check(uct_md_config_read(found, nullptr, nullptr, &md_config), "md config");
        uct_md_h md = nullptr;
        const ucs_status_t s = uct_md_open(found, tl.c_str(), md_config, &md);
        uct_config_release(md_config);
        check(s, "md open");
        md_.reset(md);
        uct_iface_config_t* config = nullptr;
        check(uct_md_iface_config_read(md_.get(), tl.c_str(), nullptr, nullptr, &config),
              "iface config");
        uct_iface_params_t params{};
        params.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
                            UCT_IFACE_PARAM_FIELD_RX_HEADROOM;
        params.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
        params.mode.device.tl_name = tl.c_str();
        params.mode.device.dev_name = dev.c_str();
        params.rx_headroom = 0;
        uct_iface_h iface = nullptr;
        const ucs_status_t o = uct_iface_open(md_.get(), worker_.get(), &params, config, &iface);
        uct_config_release(config);
        check(o, "iface open");
        iface_.reset(iface);
        check(uct_iface_query(iface_.get(), &attr_), "iface query");
        check(uct_iface_set_am_handler(iface_.get(), am_id, &Side::on_am, this, 0), "am handler");
        uct_iface_progress_enable(iface_.get(), UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
    }

    void connect(int sock) {
        const std::size_t dev_len = attr_.device_addr_len;
        std::vector<char> mine(dev_len + attr_.iface_addr_len);
        std::vector<char> theirs(mine.size());
        check(uct_iface_get_device_address(iface_.get(),
                                           reinterpret_cast<uct_device_addr_t*>(mine.data())),
              "device address");
        check(uct_iface_get_address(iface_.get(),
                                    reinterpret_cast<uct_iface_addr_t*>(mine.data() + dev_len)),
              "iface address");
        write_all(sock, mine.data(), mine.size());
        read_all(sock, theirs.data(), theirs.size());
        uct_ep_params_t params{};
        params.field_mask =
            UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR | UCT_EP_PARAM_FIELD_IFACE_ADDR;
        params.iface = iface_.get();
        params.dev_addr = reinterpret_cast<const uct_device_addr_t*>(theirs.data());
        params.iface_addr = reinterpret_cast<const uct_iface_addr_t*>(theirs.data() + dev_len);
        uct_ep_h ep = nullptr;
        check(uct_ep_create(&params, &ep), "endpoint");
        ep_.reset(ep);
    }

    // Declared in creation order, so destroyed endpoint first, async context last.
    Owned<ucs_async_context_t, ucs_async_context_destroy> async_;
    Owned<uct_worker, uct_worker_destroy> worker_;
    Owned<uct_md, uct_md_close> md_;
    Owned<uct_iface, uct_iface_close> iface_;
    Owned<uct_ep, uct_ep_destroy> ep_;
    uct_iface_attr_t attr_{};
    std::uint64_t received_ = 0;  // re-read after every uct_worker_progress call
};

// Half round trips in microseconds, by transit_bench's own timing code and
// its default statistic (meaningful on rank 0).
double run(int rank, int sock, long trips, const std::string& tl, const std::string& dev) {
    bind_to(rank);
    Side side(tl, dev, sock);
    char go = 0;
    write_all(sock, &go, 1);  // both endpoints exist before the first message
    read_all(sock, &go, 1);
    std::uint64_t expect = 0;
    auto round_trip = [&] {
        if (rank == 0) {
            side.send();
            side.wait_for(++expect);
        } else {
            side.wait_for(++expect);
            side.send();
        }
    };
    namespace tb = transit::bench;
    tb::Options o;  // as transit_bench latency --min 8 --max 8 -i trips
    o.iterations = static_cast<int>(trips);
    constexpr std::size_t size = 8;
    const double us = tb::round_trip_us(o, size, tb::iterations_for(o, size, false),
                                        tb::warmup_for(o, size), round_trip);
    write_all(sock, &go, 1);  // neither side closes while the other still sends
    read_all(sock, &go, 1);
    return us / 2;
}

}  // namespace

int main(int argc, char** argv) {
    const long trips = argc > 1 ? std::atol(argv[1]) : 200000;
    const std::string tl = argc > 2 ? argv[2] : "posix";
    const std::string dev = argc > 3 ? argv[3] : "memory";
    if (trips <= 0 || trips > INT_MAX) {
        std::fprintf(stderr, "usage: %s [round trips > 0] [transport] [device]\n", argv[0]);
        return 2;
    }
    std::array<int, 2> sv{};
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv.data()) != 0) {
        std::perror("socketpair");
        return 1;
    }
    const pid_t child = ::fork();
    if (child < 0) {
        std::perror("fork");
        return 1;
    }
    const int rank = child == 0 ? 1 : 0;
    ::close(sv[rank == 0 ? 1 : 0]);
    try {
        const double us = run(rank, sv[rank], trips, tl, dev);
        if (rank == 1) ::_exit(0);
        int status = 0;
        ::waitpid(child, &status, 0);
        std::printf("uct %s/%s 8 B half round trip: %.3f us\n", tl.c_str(), dev.c_str(), us);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "uct_pingpong (%s): %s\n", rank == 0 ? "first" : "second", e.what());
        if (rank == 1) ::_exit(1);
        ::waitpid(child, nullptr, 0);
        return 1;
    }
}
