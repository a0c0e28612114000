// kill -9 of one rank in the middle of transfers.  Run under
//   transit_run -n 3 --keep-going tcp_kill_peer
// Rank 2 kills itself while ranks 0 and 1 stream messages to it, read from it
// and write into it.  The survivors must get the error callback for rank 2,
// see their pending get and put complete with an error (a put's payload going
// by reference must not raise SIGPIPE), still talk to each other, and exit 0.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/runtime.hpp"
#include "tests/tcp/tcp_job.hpp"

using namespace transit;

namespace {

constexpr Rank victim = 2;
constexpr std::size_t get_size = 4u << 20;

struct Pending {
    int outstanding = 0;
    int failed = 0;
};

void on_get(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*, void* cbdata,
            Status status) {
    auto* p = static_cast<Pending*>(cbdata);
    --p->outstanding;
    if (!ok(status)) ++p->failed;
}

int fail(Rank me, const char* what) {
    std::printf("rank %u: FAILED: %s\n", me, what);
    std::fflush(stdout);
    return 1;
}

int run() {
    auto runtime = rt::open_runtime();
    rt::Runtime& rt = *runtime;
    const Rank me = rt.rank();
    if (rt.size() != 3) return fail(me, "needs exactly 3 ranks");
    tcptest::TcpJob job(rt);

    // Everyone exposes a region for the others to read.
    std::vector<std::byte> region(get_size, std::byte{7});
    btl::Module& any = job.module(me == 0 ? 1 : 0);
    btl::RegistrationHandle* h =
        any.rdma()->register_mem(nullptr, region.data(), region.size(), btl::reg_flags::access_any);
    std::byte mine[40];
    std::memcpy(mine, static_cast<const void*>(h), 32);
    const auto base = reinterpret_cast<std::uint64_t>(region.data());
    std::memcpy(mine + 32, &base, 8);
    if (!ok(rt.modex_send("tcp.kill.region", mine)) || !ok(rt.fence()))
        return fail(me, "exchanging regions");

    if (me == victim) {
        // Die once both survivors are well into their transfers.
        job.progress_until([&] { return job.received.size() >= 100; }, 60);
        std::raise(SIGKILL);
    }

    std::vector<std::byte> theirs;
    if (!ok(rt.modex_recv(victim, "tcp.kill.region", theirs)) || theirs.size() != 40)
        return fail(me, "reading the victim's region");
    std::uint64_t victim_base;
    std::memcpy(&victim_base, theirs.data() + 32, 8);
    const auto* victim_handle = reinterpret_cast<const btl::RegistrationHandle*>(theirs.data());

    std::vector<std::byte> msg(60000, std::byte{1});
    std::vector<std::byte> sink(get_size);
    std::vector<std::byte> payload(get_size, std::byte{3});
    Pending pending;
    btl::Module& m = job.module(victim);
    btl::Endpoint* ep = job.endpoint(victim);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (job.errors.empty() && std::chrono::steady_clock::now() < end) {
        if (pending.outstanding == 0) {
            btl::RdmaRequest get{.endpoint = ep,
                                 .local = sink.data(),
                                 .remote = victim_base,
                                 .remote_handle = victim_handle,
                                 .size = get_size,
                                 .order = 0,
                                 .cb = &on_get,
                                 .cbdata = &pending};
            if (m.rdma()->get(get) == Status::success) ++pending.outstanding;
            btl::RdmaRequest put = get;
            put.local = payload.data();
            if (m.rdma()->put(put) == Status::success) ++pending.outstanding;
        }
        const Status s = job.send_bytes(victim, tcptest::TcpJob::data_tag, msg.data(), msg.size());
        if (!ok(s)) break;  // the endpoint has failed already
        job.progress().progress();
    }
    // Whatever was in flight must end, with an error, and nothing may hang.
    if (!job.progress_until([&] { return !job.errors.empty() && pending.outstanding == 0; }, 30))
        return fail(me, "no error callback for the killed rank, or a get or put never completed");
    if (job.errors.front().first != victim) return fail(me, "error reported for the wrong rank");
    std::printf("rank %u: saw \"%s\" (%d get(s) or put(s) failed)\n", me,
                job.errors.front().second.c_str(), pending.failed);

    // The survivors still talk to each other.
    // No clearing of job.received here: the other survivor may have seen the
    // error first, and its hello may already be in the list.  The survivors
    // send nothing else to each other, so any message from it is the hello.
    const Rank other = me == 0 ? 1 : 0;
    const char hello[] = "survivor";
    if (!ok(job.send_bytes(other, tcptest::TcpJob::data_tag, hello, sizeof hello)))
        return fail(me, "sending to the other survivor");
    if (!job.progress_until(
            [&] {
                for (auto& r : job.received)
                    if (r.from == other) return true;
                return false;
            },
            30))
        return fail(me, "no message from the other survivor");
    std::printf("rank %u: survived\n", me);
    std::fflush(stdout);
    // Both survivors have sent before either may close its connection.
    job.progress_until([] { return false; }, 0.5);
    return 0;
}

}  // namespace

int main() {
    try {
        return run();
    } catch (const std::exception& e) {
        std::printf("FAILED: %s\n", e.what());
        return 1;
    }
}
