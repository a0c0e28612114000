// transit_btl_departure: how a btl takes a peer's exit.
//
//   transit_run -n 2 transit_btl_departure --component NAME --mode finalize|abandon|rejoin|flush
//
// Rank 1 sends rank 0 a few messages, waits for rank 0's acknowledgement and
// leaves, closing its runtime either way:
//   finalize  after finalizing its btl modules, as every upper layer does at
//             the end of a job.  Rank 0 must see no error at all: the first
//             rank of a job to exit is seen by the others while they are still
//             in their own finalize, and Open MPI's ob1 aborts the whole job on
//             any error a btl reports (it did so, in CI, over uct).
//   abandon   without finalizing them (_exit): rank 0 must hear of the lost
//             peer through its error callback, once, within two seconds.
//   rejoin    as abandon, but first rank 1 deletes rank 0 (del_procs: the
//             module says goodbye), adds it again (add_procs), sends it more
//             messages and waits for a second acknowledgement over the new
//             endpoint.  The goodbye was taken back: rank 1's exit is a loss
//             again, reported once, like abandon's.
//   flush     rank 1 registers memory and leaves without serving it while
//             rank 0 has gets of it in flight: once rank 0 hears of the loss,
//             every get has ended and flush (to rank 1, then to all) returns,
//             not success if a get failed.  (A flush that waited for a lost
//             peer's operations spun for good over libfabric's shm, which
//             never completes them.)
// Rank 0 watches rank 1's process, so the verdict is given only after rank 1
// has really gone, a full second of progress has passed and rank 0 has
// finalized its own modules (they must not report the peer that left either).
//
// Exit status: 0 passed, 1 failed, 77 the component declined (ctest: skipped).
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "framework/btl_framework.hpp"
#include "runtime/runtime.hpp"
#include "transit/btl/am_table.hpp"
#include "transit/btl/util/process_watch.hpp"
#include "transit/progress.hpp"

namespace {

using namespace transit;
using Clock = std::chrono::steady_clock;

constexpr int skipped = 77;
constexpr int message_count = 20;
constexpr int rejoin_count = 4;  // sent again after rejoining (rejoin mode)
constexpr btl::Tag tag_data = btl::AmTable::tag(btl::TagRange::user, 1);
constexpr btl::Tag tag_ack = btl::AmTable::tag(btl::TagRange::user, 2);

struct State {
    int received = 0;
    int acks = 0;
    int errors = 0;
    Rank error_peer = any_rank;
    std::string error_info;
};

int failed(Rank me, const std::string& what) {
    fmt::print("rank {}: FAILED: {}\n", me, what);
    std::fflush(stdout);
    return 1;
}

// Progresses until done() or the time is up; true when done() held.
template <typename Pred>
bool progress_until(ProgressEngine& engine, Pred done, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (!done()) {
        if (Clock::now() > end) return false;
        engine.progress();
    }
    return true;
}

// One message of `size` bytes by alloc + send, retried while the module has no
// descriptor to give or no room to send it.
Status send_message(btl::Module& m, ProgressEngine& engine, btl::Endpoint* ep, btl::Tag tag,
                    std::size_t size) {
    size = std::min(size, m.attributes().max_send_size);
    const auto end = Clock::now() + std::chrono::seconds(30);
    btl::Descriptor* d = nullptr;
    for (;;) {
        if (d == nullptr) d = m.alloc(ep, btl::no_order, size, btl::des_flags::btl_ownership);
        if (d != nullptr) {
            std::memset(d->segments[0].addr, 0x5a, d->segments[0].len);
            const Status s = m.send(ep, d, tag);
            if (s != Status::out_of_resource) return s == Status::completed ? Status::success : s;
        }
        if (Clock::now() > end) return Status::timeout;
        engine.progress();
    }
}

struct Options {
    std::string component;
    std::string mode;
};

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string_view a = argv[i];
        if (a == "--component")
            o.component = argv[i + 1];
        else if (a == "--mode")
            o.mode = argv[i + 1];
        else
            return false;
    }
    return argc % 2 == 1 && !o.component.empty() &&
           (o.mode == "finalize" || o.mode == "abandon" || o.mode == "rejoin" || o.mode == "flush");
}

constexpr int get_count = 16;
constexpr std::size_t get_size = 64 * 1024;

struct Gets {
    int ended = 0;
    int failed = 0;
};

void on_get(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*, void* cbdata,
            Status status) {
    auto* g = static_cast<Gets*>(cbdata);
    ++g->ended;
    if (!ok(status)) ++g->failed;
}

// Where rank 0 says its gets are in flight: the job's directory on this node
// (transit_run's; "" under another launcher, and rank 1 does not wait).
std::string gets_posted_file() {
    const char* dir = std::getenv("TRANSIT_JOB_TMPDIR");
    return dir != nullptr ? fmt::format("{}/departure.gets_posted", dir) : "";
}

// Rank 1: registers a buffer, publishes it and leaves without ever serving it.
int leave_unserved(rt::Runtime& runtime, btl::Module& module, std::unique_ptr<rt::Runtime> owned) {
    btl::Rdma* rdma = module.rdma();
    static std::vector<std::byte> exposed(get_count * get_size, std::byte{0x3c});
    btl::RegistrationHandle* h =
        rdma->register_mem(nullptr, exposed.data(), exposed.size(), btl::reg_flags::access_any);
    const std::size_t hs = module.attributes().registration_handle_size;
    std::vector<std::byte> key(sizeof(std::uint64_t) + hs);
    const auto address = reinterpret_cast<std::uint64_t>(exposed.data());
    std::memcpy(key.data(), &address, sizeof address);
    if (h != nullptr) std::memcpy(key.data() + sizeof address, h, hs);
    if (!ok(runtime.modex_send("departure.key", key)) || !ok(runtime.fence()))
        return failed(1, "publishing the registration");
    // No progress (nothing served) until rank 0's gets are in flight: it says
    // so with a file, outside the transport and the runtime (whose fence
    // would run our progress).
    const std::string posted = gets_posted_file();
    struct stat st {};
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!posted.empty() && ::stat(posted.c_str(), &st) != 0 &&
           std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    owned.reset();
    std::_Exit(0);
}

// Rank 0: gets from rank 1 until it is lost, then flushes.
int flush_after_loss(rt::Runtime& runtime, btl::Module& module, ProgressEngine& engine,
                     btl::Endpoint* ep, const State& st, pid_t rank1_pid) {
    btl::Rdma* rdma = module.rdma();
    if (!ok(runtime.fence())) return failed(0, "fence for the registration");
    std::vector<std::byte> key;
    if (!ok(runtime.modex_recv(1, "departure.key", key)) || key.size() < sizeof(std::uint64_t))
        return failed(0, "reading rank 1's registration");
    std::uint64_t remote = 0;
    std::memcpy(&remote, key.data(), sizeof remote);
    alignas(std::max_align_t) std::byte handle[btl::max_registration_handle_size] = {};
    std::memcpy(handle, key.data() + sizeof remote,
                std::min(key.size() - sizeof remote, sizeof handle));
    static std::vector<std::byte> local(get_count * get_size);
    btl::RegistrationHandle* lh =
        rdma->register_mem(nullptr, local.data(), local.size(), btl::reg_flags::access_any);
    Gets gets;
    // Rank 1 leaves once told that the gets are in flight.  A transport that
    // runs out of resources before all are posted (uct: the peer serves
    // nothing) is told at that point: the gets left are posted to a peer
    // that is gone.
    bool told = false;
    const auto tell_rank1 = [&told] {
        if (told) return;
        told = true;
        if (const std::string posted = gets_posted_file(); !posted.empty())
            if (std::FILE* f = std::fopen(posted.c_str(), "w")) std::fclose(f);
    };
    for (int i = 0; i < get_count; ++i) {
        const btl::RdmaRequest r{
            .endpoint = ep,
            .local = local.data() + i * get_size,
            .remote = remote + i * get_size,
            .local_handle = lh,
            .remote_handle = reinterpret_cast<const btl::RegistrationHandle*>(handle),
            .size = get_size,
            .cb = on_get,
            .cbdata = &gets};
        Status s;
        while ((s = rdma->get(r)) == Status::out_of_resource) {
            tell_rank1();
            engine.progress();
        }
        if (s == Status::completed) {
            ++gets.ended;
        } else if (!ok(s)) {
            ++gets.ended, ++gets.failed;
        }
    }
    tell_rank1();
    const btl::util::ProcessWatch rank1(rank1_pid);
    if (!progress_until(
            engine, [&] { return rank1.exited() && st.errors > 0; }, std::chrono::seconds(30)))
        return failed(0, "rank 1's loss was not reported");
    ::alarm(20);  // a flush that never returns ends the test
    const Status to_peer = rdma->flush(ep);
    const Status to_all = rdma->flush(nullptr);
    ::alarm(0);
    progress_until(
        engine, [&] { return gets.ended == get_count; }, std::chrono::seconds(2));
    if (gets.ended != get_count)
        return failed(0,
                      fmt::format("{} of {} gets ended after the flushes", gets.ended, get_count));
    if (gets.failed > 0 && ok(to_peer))
        return failed(
            0, fmt::format("{} get(s) failed, yet the flush to rank 1 said success", gets.failed));
    fmt::print("rank 0: {} of {} gets failed; flush to rank 1: {}, to all: {}\n", gets.failed,
               get_count, to_string(to_peer), to_string(to_all));
    return 0;
}

int run(const Options& opt) {
    auto runtime = rt::open_runtime();
    const Rank me = runtime->rank();
    if (runtime->size() != 2) return failed(me, "needs exactly 2 ranks (transit_run -n 2)");

    ProgressEngine engine;
    btl::AmTable am;
    State st;  // before the framework: its modules may call back as they finalize
    auto fw = std::make_unique<btl::Framework>(*runtime, engine, am);
    fw->open();
    fw->init();
    btl::Module* module = nullptr;
    for (btl::Module* m : fw->modules()) {
        if (m->component().name() != opt.component) continue;
        module = m;  // the first (tcp: loopback before the other interfaces)
        break;
    }
    // Publish our pid and whether we have a module; both ranks fence once
    // whatever happened, so neither waits for the other in vain.
    const std::uint64_t mine[2] = {static_cast<std::uint64_t>(::getpid()), module ? 1u : 0u};
    if (!ok(runtime->modex_send("departure", std::as_bytes(std::span(mine)))) ||
        !ok(runtime->fence()))
        return failed(me, "exchanging pids");
    std::vector<std::byte> blob;
    std::uint64_t theirs[2] = {};
    const Rank peer = 1 - me;
    if (!ok(runtime->modex_recv(peer, "departure", blob)) || blob.size() != sizeof theirs)
        return failed(me, "reading the peer's pid");
    std::memcpy(theirs, blob.data(), sizeof theirs);
    if (module == nullptr || theirs[1] == 0) {
        for (const mca::ComponentRecord& r : fw->records())
            if (r.name == opt.component) fmt::print("rank {}: skipped: {}\n", me, r.reason);
        return skipped;
    }

    module->register_error(
        [](btl::Module*, std::uint32_t, Rank from, const char* info, void* cb) {
            auto* s = static_cast<State*>(cb);
            ++s->errors;
            s->error_peer = from;
            s->error_info = info ? info : "";
        },
        &st);
    am.register_callback(
        tag_data,
        [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
            ++static_cast<State*>(cb)->received;
        },
        &st);
    am.register_callback(
        tag_ack,
        [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
            ++static_cast<State*>(cb)->acks;
        },
        &st);
    const std::vector<Rank> peers = {0, 1};
    std::vector<btl::Endpoint*> eps(2, nullptr);
    btl::Reachability reachable(2);
    if (!ok(module->add_procs(peers, eps, reachable)) || eps[peer] == nullptr)
        return failed(me, fmt::format("{} does not reach rank {}", opt.component, peer));
    if (!ok(runtime->fence())) return failed(me, "fence after add_procs");
    if (opt.mode == "flush") {
        if (module->rdma() == nullptr || !(module->attributes().flags & btl::flags::get)) {
            fmt::print("rank {}: skipped: {} has no get\n", me, opt.component);
            return skipped;
        }
        if (me == 1) {
            rt::Runtime& r = *runtime;
            return leave_unserved(r, *module, std::move(runtime));
        }
        const int rc =
            flush_after_loss(*runtime, *module, engine, eps[1], st, static_cast<pid_t>(theirs[0]));
        fw.reset();
        return rc;
    }

    if (me == 1) {
        // Small and eager-sized messages: every receive path of the module.
        for (int i = 0; i < message_count; ++i) {
            const std::size_t size = i % 2 ? 64 : module->attributes().eager_limit;
            if (Status s = send_message(*module, engine, eps[0], tag_data, size); !ok(s))
                return failed(me, fmt::format("sending {} bytes: {}", size, to_string(s)));
        }
        if (!progress_until(
                engine, [&] { return st.acks == 1; }, std::chrono::seconds(30)))
            return failed(me, "no acknowledgement from rank 0");
        if (opt.mode == "rejoin") {
            // Delete rank 0 (the module says goodbye), add it again and prove
            // the new endpoint works both ways.
            const Rank zero = 0;
            if (Status s = module->del_procs(std::span(&zero, 1), std::span(&eps[0], 1)); !ok(s))
                return failed(me, fmt::format("del_procs: {}", to_string(s)));
            btl::Endpoint* again = nullptr;
            btl::Reachability reach_again(1);
            if (!ok(module->add_procs(std::span(&zero, 1), std::span(&again, 1), reach_again)) ||
                again == nullptr)
                return failed(me, "add_procs of rank 0 again did not reach it");
            for (int i = 0; i < rejoin_count; ++i)
                if (Status s = send_message(*module, engine, again, tag_data, 64); !ok(s))
                    return failed(me, fmt::format("sending after rejoining: {}", to_string(s)));
            if (!progress_until(
                    engine, [&] { return st.acks == 2; }, std::chrono::seconds(30)))
                return failed(me, "no acknowledgement from rank 0 after rejoining");
        }
        if (opt.mode == "abandon" || opt.mode == "rejoin") {
            runtime.reset();  // the launcher sees a clean end ...
            std::_Exit(0);    // ... of a process whose transports never finalized
        }
        fw.reset();
        return 0;
    }

    if (!progress_until(
            engine, [&] { return st.received == message_count; }, std::chrono::seconds(30)))
        return failed(me, fmt::format("{} of {} messages arrived", st.received, message_count));
    if (Status s = send_message(*module, engine, eps[1], tag_ack, 8); !ok(s))
        return failed(me, fmt::format("acknowledging: {}", to_string(s)));
    const bool lost_expected = opt.mode != "finalize";
    if (opt.mode == "rejoin") {
        const int total = message_count + rejoin_count;
        if (!progress_until(
                engine, [&] { return st.received == total; }, std::chrono::seconds(30)))
            return failed(
                me, fmt::format("{} of {} messages arrived (rank 1 rejoined)", st.received, total));
        if (st.errors != 0)
            return failed(me, fmt::format("rank 1 rejoined, yet {} error(s) were reported: \"{}\"",
                                          st.errors, st.error_info));
        if (Status s = send_message(*module, engine, eps[1], tag_ack, 8); !ok(s))
            return failed(me, fmt::format("acknowledging after rank 1 rejoined: {}", to_string(s)));
    }
    const btl::util::ProcessWatch rank1(static_cast<pid_t>(theirs[0]));
    if (!progress_until(
            engine, [&] { return rank1.exited(); }, std::chrono::seconds(30)))
        return failed(me, "rank 1 did not exit");
    // Every transport here looks for a lost local peer at least every 100 ms
    // and promises to report it within a second.
    const auto exited = Clock::now();
    progress_until(
        engine, [&] { return lost_expected && st.errors > 0; }, std::chrono::milliseconds(1500));
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - exited).count();
    // Our own finalize, toward a peer that has gone, must not report either.
    fw.reset();
    if (opt.mode == "finalize") {
        if (st.errors != 0)
            return failed(me, fmt::format("rank 1 finalized, yet {} error(s) were reported, "
                                          "the first for rank {}: \"{}\"",
                                          st.errors, st.error_peer, st.error_info));
        fmt::print("rank 0: rank 1 finalized and left; no error reported\n");
    } else {
        if (st.errors != 1 || st.error_peer != 1)
            return failed(me, fmt::format("rank 1 left without finalizing: {} error(s) reported "
                                          "(expected one, for rank 1){}",
                                          st.errors,
                                          opt.mode == "rejoin" ? "; it had said goodbye, then "
                                                                 "rejoined before it left"
                                                               : ""));
        fmt::print("rank 0: rank 1's loss reported after {} ms: \"{}\"\n", took, st.error_info);
    }
    std::fflush(stdout);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    if (!parse(argc, argv, opt)) {
        std::fputs(
            "usage: transit_run -n 2 transit_btl_departure --component NAME "
            "--mode finalize|abandon|rejoin|flush\n",
            stderr);
        return 2;
    }
    try {
        return run(opt);
    } catch (const std::exception& e) {
        fmt::print("FAILED: {}\n", e.what());
        return 1;
    }
}
