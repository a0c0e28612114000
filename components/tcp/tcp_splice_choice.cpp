#include "tcp_splice_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <sstream>
#include <system_error>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "tcp_fd.hpp"
#include "tcp_splice.hpp"
#include "transit/name_hash.hpp"

namespace transit::tcp {

namespace {

using Clock = std::chrono::steady_clock;

// A transfer that makes no progress for this long means the host cannot
// measure (a loopback that drops, a frozen process): copy, and say so.
constexpr int stall_ms = 1000;

std::string errno_text(std::string_view what) {
    return fmt::format("{}: {}", what, std::strerror(errno));
}

// Both ends of a loopback TCP connection.  The sending end is non-blocking
// (as tcp's sockets are, so splice behaves as it does in a module).
bool connect_loopback(Fd& sender, Fd& receiver, std::string& why) {
    Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!listener) return why = errno_text("socket"), false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        ::listen(listener.get(), 1) != 0)
        return why = errno_text("loopback listener"), false;
    sender = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!sender || ::connect(sender.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
        return why = errno_text("connect to loopback"), false;
    receiver = Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!receiver) return why = errno_text("accept on loopback"), false;
    const int one = 1;
    ::setsockopt(sender.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(receiver.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // The receiving thread gives up rather than hang when the sender stops.
    const timeval limit{stall_ms / 1000, 0};
    ::setsockopt(receiver.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    ::fcntl(sender.get(), F_SETFL, ::fcntl(sender.get(), F_GETFL) | O_NONBLOCK);
    return true;
}

// The peer: reads each transfer whole, then answers one byte.  It runs on
// the other processors of the process (`cpus`), as a peer process would:
// sharing the sender's processor favours lending, which saves the sender's
// copy, more than two processes do.
void receive_transfers(int fd, int transfers, cpu_set_t cpus) {
    if (CPU_COUNT(&cpus) > 0) ::pthread_setaffinity_np(::pthread_self(), sizeof cpus, &cpus);
    std::vector<std::byte> into(probe_size);
    for (int t = 0; t < transfers; ++t) {
        std::size_t got = 0;
        while (got < probe_size) {
            const ssize_t n = ::recv(fd, into.data() + got, probe_size - got, 0);
            if (n <= 0) return;
            got += static_cast<std::size_t>(n);
        }
        const char ack = 1;
        if (::send(fd, &ack, 1, MSG_NOSIGNAL) != 1) return;
    }
}

bool wait_for(int fd, short event) {
    pollfd p{fd, event, 0};
    return ::poll(&p, 1, stall_ms) == 1;
}

// One transfer of `data` to the receiving thread, copied or lent, until its
// answer is back; seconds, or a negative value when it stalled or failed.
double timed_transfer(int fd, std::span<const std::byte> data, SplicePipe* pipe) {
    const auto start = Clock::now();
    iovec left{const_cast<std::byte*>(data.data()), data.size()};
    while (left.iov_len > 0) {
        if (pipe != nullptr) {
            const SplicePipe::Result r = pipe->write(pipe, fd, left);
            if (r == SplicePipe::Result::done) break;
            if (r != SplicePipe::Result::partial) return -1;
        } else {
            const ssize_t n = ::send(fd, left.iov_base, left.iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && !would_block(errno)) return -1;
            if (n > 0) {
                left.iov_base = static_cast<char*>(left.iov_base) + n;
                left.iov_len -= static_cast<std::size_t>(n);
                continue;
            }
        }
        if (!wait_for(fd, POLLOUT)) return -1;
    }
    char ack = 0;
    if (!wait_for(fd, POLLIN) || ::recv(fd, &ack, 1, 0) != 1) return -1;
    return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string first_cpuinfo_value(std::string_view key) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, key.size(), key) != 0) continue;
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const auto begin = line.find_first_not_of(" \t", colon + 1);
        return begin == std::string::npos ? std::string() : line.substr(begin);
    }
    return {};
}

// Cache file format, line by line (a version line first, so a later format
// is told apart from a damaged file).
constexpr std::string_view cache_magic = "transit tcp splice 2";

std::string size_text(std::size_t n) {
    if (n == 0) return "no limit";
    if (n % (1 << 20) == 0) return fmt::format("{} MiB", n >> 20);
    if (n % 1024 == 0) return fmt::format("{} KiB", n >> 10);
    return fmt::format("{} B", n);
}

double median(std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
}

std::optional<SpliceMeasurement> measure_series(std::string& why) {
    Fd sender;
    Fd receiver;
    if (!connect_loopback(sender, receiver, why)) return std::nullopt;
    SplicePipe pipe;
    if (pipe.capacity() == 0) {
        why = "no pipe for lending";
        return std::nullopt;
    }
    // Two warm-up transfers of each kind (first-touch faults, the socket's
    // buffers growing), then the two kinds alternating.
    constexpr int warm_up = 4;
    constexpr int transfers = warm_up + 2 * probe_rounds;
    // Page-aligned, as a large payload usually is: 1 MiB fills the pipe's
    // 256 pages in one vmsplice.
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<std::byte> block(probe_size + page, std::byte{0x5a});
    const std::span<const std::byte> data(
        block.data() + (page - reinterpret_cast<std::uintptr_t>(block.data()) % page) % page,
        probe_size);
    // Any online processor but this one, even when this process is bound to
    // one core (a rank under transit_run --bind-to core): a peer rank has its own.
    cpu_set_t others;
    CPU_ZERO(&others);
    const int here = ::sched_getcpu();
    const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; here >= 0 && online > 1 && cpu < online && cpu < CPU_SETSIZE; ++cpu)
        if (cpu != here) CPU_SET(static_cast<int>(cpu), &others);
    std::thread peer;
    try {
        peer = std::thread(receive_transfers, receiver.get(), transfers, others);
    } catch (const std::system_error& e) {
        why = std::string("no thread for the receiving side: ") + e.what();
        return std::nullopt;
    }
    std::vector<double> copy;
    std::vector<double> lend;
    std::vector<double> ratios;
    double copy_time = 0;
    bool failed = false;
    for (int t = 0; t < transfers && !failed; ++t) {
        const bool lending = t % 2 == 1;
        const double s = timed_transfer(sender.get(), data, lending ? &pipe : nullptr);
        if (s <= 0) {
            failed = true;
            why = fmt::format("a {} transfer over loopback stalled or failed",
                              lending ? "lent" : "copied");
            break;
        }
        if (t < warm_up) continue;
        if (lending)
            ratios.push_back(copy_time / s);  // this pair: lending's speed-up
        else
            copy_time = s;
        (lending ? lend : copy).push_back(s);
    }
    ::shutdown(sender.get(), SHUT_RDWR);
    peer.join();
    if (failed) return std::nullopt;
    return SpliceMeasurement{probe_size / median(copy) / 1e6, probe_size / median(lend) / 1e6,
                             median(ratios)};
}

}  // namespace

std::optional<SpliceMeasurement> measure_splice(std::string& why) {
    std::optional<SpliceMeasurement> m = measure_series(why);
    if (!m || !m->lends()) return m;
    // The verdict is kept for the host: lending, the less common one, must
    // win a second series too (a neighbour's burst on one processor can
    // favour it for a whole series); the lower speed-up counts.
    const std::optional<SpliceMeasurement> again = measure_series(why);
    if (!again) return again;
    return again->speedup < m->speedup ? again : m;
}

std::string host_fingerprint() {
    std::string cpu = first_cpuinfo_value("model name");
    if (cpu.empty()) cpu = first_cpuinfo_value("CPU part");  // arm64 names no model
    if (cpu.empty()) cpu = "unknown";
    const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
    utsname u{};
    const std::string kernel = ::uname(&u) == 0 ? u.release : "unknown";
    return fmt::format("cpu={}; cores={}; kernel={}", cpu, cores, kernel);
}

std::string splice_cache_path(std::string_view fingerprint) {
    std::filesystem::path dir;
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/')  // the XDG rule: a relative value is ignored
        dir = xdg;
    else if (home != nullptr && home[0] != '\0')
        dir = std::filesystem::path(home) / ".cache";
    else
        return {};
    return (dir / "transit" / fmt::format("tcp-splice-{:08x}", name_hash(fingerprint))).string();
}

std::optional<SpliceMeasurement> read_splice_cache(const std::string& path,
                                                   std::string_view fingerprint, std::string& why) {
    std::ifstream in(path);
    if (!in) {
        why = fmt::format("no cache {} yet", path);
        return std::nullopt;
    }
    std::string magic;
    std::string host;
    std::string figures;
    std::getline(in, magic);
    std::getline(in, host);
    std::getline(in, figures);
    if (magic != cache_magic) {
        why = fmt::format("ignored the cache {}: not a tcp splice cache of this version", path);
        return std::nullopt;
    }
    if (host != fmt::format("host {}", fingerprint)) {
        why = fmt::format("ignored the cache {}: written for another host ({})", path,
                          host.substr(0, 200));
        return std::nullopt;
    }
    std::istringstream f(figures);
    std::string words[3];
    SpliceMeasurement m;
    std::string rest;
    const auto in_range = [](double v) { return v > 0 && v < 1e9; };
    if (!(f >> words[0] >> m.copy_mbps >> words[1] >> m.lend_mbps >> words[2] >> m.speedup) ||
        words[0] != "copy" || words[1] != "lend" || words[2] != "speedup" || (f >> rest) ||
        !in_range(m.copy_mbps) || !in_range(m.lend_mbps) || !in_range(m.speedup)) {
        why = fmt::format("ignored the cache {}: damaged figures line '{}'", path,
                          figures.substr(0, 200));
        return std::nullopt;
    }
    return m;
}

bool write_splice_cache(const std::string& path, std::string_view fingerprint,
                        const SpliceMeasurement& m, std::string& why) {
    const std::filesystem::path target(path);
    std::error_code ec;
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) {
        why = fmt::format("cannot create {}: {}", target.parent_path().string(), ec.message());
        return false;
    }
    // Ranks of one job starting together each write their own file and
    // rename it over: the last one stays, and a reader sees a whole file.
    const std::string temporary = fmt::format("{}.{}.tmp", path, ::getpid());
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << cache_magic << "\nhost " << fingerprint << "\n"
            << fmt::format("copy {:.0f} lend {:.0f} speedup {:.3f}\n", m.copy_mbps, m.lend_mbps,
                           m.speedup);
        out.close();
        if (!out) {
            why = fmt::format("cannot write {}", temporary);
            std::filesystem::remove(temporary, ec);
            return false;
        }
    }
    std::filesystem::rename(temporary, target, ec);
    if (ec) {
        why = fmt::format("cannot rename {} to {}: {}", temporary, path, ec.message());
        std::filesystem::remove(temporary, ec);
        return false;
    }
    return true;
}

std::string_view to_string(SpliceChoice::From f) noexcept {
    switch (f) {
        case SpliceChoice::From::parameter:
            return "set by btl_tcp_splice_min";
        case SpliceChoice::From::cache:
            return "measured earlier on this host";
        case SpliceChoice::From::measurement:
            return "measured at this start";
        case SpliceChoice::From::fallback:
            return "not measured";
    }
    return "?";
}

std::string SpliceChoice::describe() const {
    const std::string what =
        min == 0 ? std::string("copy put/get payloads into the socket")
                 : fmt::format("lend put/get payloads of {}..{} to the socket (splice)",
                               size_text(min), size_text(max));
    std::string inputs;
    if (from == From::cache || from == From::measurement)
        inputs = fmt::format(
            ": 1 MiB over loopback copy {:.0f} MB/s, lend {:.0f} MB/s, lending {:.2f}x "
            "(lends above {:.2f}x); {}",
            measured.copy_mbps, measured.lend_mbps, measured.speedup, lend_margin, fingerprint);
    if (from == From::measurement) inputs += fmt::format("; took {:.1f} ms", measure_ms);
    return fmt::format("{} ({}{})", what, to_string(from), inputs);
}

SpliceChoice choose_splice(std::optional<std::size_t> explicit_min,
                           std::optional<std::size_t> explicit_max, std::size_t param_max) {
    SpliceChoice c;
    if (explicit_min) {
        c.from = SpliceChoice::From::parameter;
        c.min = *explicit_min;
        c.max = param_max;
        return c;
    }
    c.fingerprint = host_fingerprint();
    c.cache_path = splice_cache_path(c.fingerprint);
    std::string why;
    std::optional<SpliceMeasurement> m;
    if (c.cache_path.empty()) {
        constexpr std::string_view no_dir =
            "no cache directory (neither XDG_CACHE_HOME nor HOME is set)";
        c.notes.emplace_back(no_dir);
    } else {
        m = read_splice_cache(c.cache_path, c.fingerprint, why);
        if (m)
            c.from = SpliceChoice::From::cache;
        else
            c.notes.push_back(why);
    }
    if (!m) {
        const auto start = Clock::now();
        m = measure_splice(why);
        c.measure_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (!m) {
            c.notes.push_back("could not measure: " + why);
            c.from = SpliceChoice::From::fallback;
            c.max = explicit_max.value_or(param_max);
            return c;
        }
        c.from = SpliceChoice::From::measurement;
        if (!c.cache_path.empty() && !write_splice_cache(c.cache_path, c.fingerprint, *m, why))
            c.notes.push_back("measured at each start: " + why);
    }
    c.measured = *m;
    if (m->lends()) {
        c.min = lend_min;
        c.max = explicit_max.value_or(lend_max);
    } else {
        c.min = 0;
        c.max = explicit_max.value_or(param_max);
    }
    return c;
}

}  // namespace transit::tcp
