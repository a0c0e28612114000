// vader driven at the btl level by jobs of fork()ed processes: sends of every
// size by every method, put/get/atomics, many-to-one stress, CMA fallbacks,
// peer death, and no file left in /dev/shm.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "components/vader/vader_cma.hpp"
#include "tests/vader/fork_util.hpp"
#include "tests/vader/vader_job.hpp"
#include "transit/btl/region_table.hpp"

namespace transit::vader::test {
namespace {

namespace fs = std::filesystem;
using btl::AmTable;
using btl::TagRange;

constexpr btl::Tag tag_data = AmTable::tag(TagRange::pml, 1);
constexpr btl::Tag tag_ctl = AmTable::tag(TagRange::pml, 2);

std::size_t leftovers(const std::string& job) {
    std::size_t n = 0;
    for (const auto& e : fs::directory_iterator("/dev/shm"))
        if (e.path().filename().string().rfind("transit-" + job + "-", 0) == 0) ++n;
    return n;
}

// Runs body(rank, area, job) in `n` children; returns their exit codes.
template <typename Body>
std::vector<int> run_job(std::uint32_t n, const std::string& job, Body body) {
    SharedArea area(sizeof(JobArea));
    auto* job_area = new (area.get()) JobArea{};
    std::vector<pid_t> pids;
    for (Rank r = 0; r < n; ++r)
        pids.push_back(spawn([&, r] {
            ::alarm(120);  // a hang becomes a failure
            return body(r, job_area, job);
        }));
    std::vector<int> codes;
    for (pid_t p : pids) codes.push_back(join(p));
    return codes;
}

std::string job_name(const char* what) {
    static int counter = 0;
    return fmt::format("vt{}{}x{}", what, ::getpid(), counter++);
}

// --- message content ------------------------------------------------------------

constexpr std::array<std::size_t, 21> sizes = {0,    1,    3,    4,    7,    8,     9,
                                               63,   64,   65,   255,  256,  1000,  1024,
                                               2048, 4000, 4096, 4097, 8192, 16384, 32768};

void fill(char* p, std::size_t len, std::uint32_t seq) {
    for (std::size_t j = 0; j < len; ++j) p[j] = static_cast<char>(seq * 31 + j);
    if (len >= 4) std::memcpy(p, &seq, 4);
}

bool matches(const char* p, std::size_t len, std::uint32_t seq) {
    if (len >= 4 && std::memcmp(p, &seq, 4) != 0) return false;
    for (std::size_t j = 4; j < len; ++j)
        if (p[j] != static_cast<char>(seq * 31 + j)) return false;
    return true;
}

// Message k: its size and the method that sends it.
std::size_t size_of(std::uint32_t k, std::size_t max) {
    return std::min(sizes[k % sizes.size()], max);
}
int method_of(std::uint32_t k) {
    return static_cast<int>(k / sizes.size()) % 3;
}

struct Receiver {
    std::uint32_t expected = 0;
    std::uint32_t bad = 0;
    std::size_t max = 0;
    bool done = false;
};

// Sends message k by method 0 (sendi), 1 (alloc + send), 2 (prepare_src over
// three pieces + send).
bool send_one(Proc& p, Rank to, std::uint32_t k, std::vector<char>& buf) {
    const std::size_t len = size_of(k, p.module().attributes().max_send_size);
    fill(buf.data(), len, k);
    btl::Module& m = p.module();
    if (method_of(k) == 0) return ok(p.send(to, tag_data, buf.data(), len));
    for (;;) {
        btl::Descriptor* d = nullptr;
        if (method_of(k) == 1) {
            d = m.alloc(p.ep(to), btl::no_order, len, btl::des_flags::btl_ownership);
            if (d != nullptr) {
                if (!check(d->segments[0].len == len, "alloc gave the size asked", len))
                    return false;
                std::memcpy(d->segments[0].addr, buf.data(), len);
            }
        } else {
            const std::size_t a = len / 3, b = len / 3;
            const iovec pieces[3] = {
                {buf.data(), a}, {buf.data() + a, b}, {buf.data() + a + b, len - a - b}};
            btl::Convertor conv(pieces);
            std::size_t size = len;
            d = m.prepare_src(p.ep(to), conv, btl::no_order, 0, size,
                              btl::des_flags::btl_ownership);
            if (d != nullptr && !check(size == len, "prepare_src took everything", size))
                return false;
        }
        if (d == nullptr) {
            p.progress();
            continue;
        }
        Status s = m.send(p.ep(to), d, tag_data);
        if (ok(s)) return true;
        m.free(d);
        if (s != Status::out_of_resource) return check(false, "send failed", static_cast<int>(s));
        p.progress();
    }
}

struct Exposed {
    std::uint64_t buffer;
    std::uint64_t counter;
    std::uint64_t counter32;
    // Their registrations: without one a peer can do nothing.
    btl::RegionKey buffer_key;
    btl::RegionKey counter_key;
    btl::RegionKey counter32_key;
};

btl::RegionKey expose(btl::Module& m, void* base, std::size_t size) {
    btl::RegionKey key{btl::no_slot, 0, 0};
    if (btl::RegistrationHandle* h =
            m.rdma()->register_mem(nullptr, base, size, btl::reg_flags::access_any))
        std::memcpy(&key, static_cast<const void*>(h), sizeof key);
    return key;
}

const btl::RegistrationHandle* handle(const btl::RegionKey& key) {
    return reinterpret_cast<const btl::RegistrationHandle*>(&key);
}

struct RdmaWait {
    int done = 0;
    Status status = Status::success;
};

void rdma_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*, void* cbdata,
               Status status) {
    auto* w = static_cast<RdmaWait*>(cbdata);
    ++w->done;
    w->status = status;
}

// Posts (again while the transport says out_of_resource: its queue to the peer
// is full, which a loaded machine makes likely) and waits for the completion.
template <typename Post>
Status wait_rdma(Proc& p, Post post, RdmaWait& w) {
    Status posted = post();
    while (posted == Status::out_of_resource) {
        p.progress();
        posted = post();
    }
    if (posted == Status::completed) return Status::completed;
    if (posted != Status::success) return posted;
    while (w.done == 0) p.progress();
    w.done = 0;
    return w.status;
}

constexpr std::size_t rdma_size = (1 << 20) + 13;

// Rank 0 drives, rank 1 receives, checks and serves put/get/atomics.
bool exchange(Rank rank, JobArea* area, const std::string& job, const Params& params,
              bool expect_cma) {
    Proc p(area, rank, 2, job, params);
    if (!check(p.has_module(), "init returned a module")) return false;
    const std::size_t max = p.module().attributes().max_send_size;
    constexpr std::uint32_t total = sizes.size() * 3 * 40;
    const bool cma = (p.module().attributes().flags & btl::flags::get) != 0;
    if (!check(cma == expect_cma, "single copy as expected", cma)) return false;

    if (rank == 1) {
        Receiver r;
        r.max = max;
        std::vector<char> exposed(rdma_size);
        fill(exposed.data(), rdma_size, 77);
        alignas(8) std::uint64_t counter = 0;
        alignas(8) std::uint32_t counter32 = 0;
        auto on_data = [](btl::Module*, const btl::ReceiveDescriptor& d, void* cb) {
            auto* r = static_cast<Receiver*>(cb);
            const std::uint32_t k = r->expected++;
            const std::size_t len = d.segments[0].len;
            if (d.segment_count != 1 || len != size_of(k, r->max) ||
                !matches(static_cast<const char*>(d.segments[0].addr), len, k))
                ++r->bad;
        };
        auto on_ctl = [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
            static_cast<Receiver*>(cb)->done = true;
        };
        p.am().register_callback(tag_data, on_data, &r);
        p.am().register_callback(tag_ctl, on_ctl, &r);
        const Exposed ex{reinterpret_cast<std::uint64_t>(exposed.data()),
                         reinterpret_cast<std::uint64_t>(&counter),
                         reinterpret_cast<std::uint64_t>(&counter32),
                         expose(p.module(), exposed.data(), rdma_size),
                         expose(p.module(), &counter, sizeof counter),
                         expose(p.module(), &counter32, sizeof counter32)};
        if (!ok(p.send(0, tag_ctl, &ex, sizeof ex))) return false;
        while (!r.done) p.progress();
        bool good = check(r.bad == 0, "messages arrived intact and in order", r.bad) &&
                    check(r.expected == total, "every message arrived", r.expected);
        if (cma) {
            std::vector<char> want(rdma_size);
            fill(want.data(), rdma_size, 99);
            good = good && check(exposed == want, "put landed");
        }
        good = good &&
               check(counter == 100 + 5, "atomics applied", static_cast<long long>(counter)) &&
               check(counter32 == 0xffffffffu, "32-bit atomic applied", counter32);
        const std::uint32_t verdict = good ? 1 : 0;
        if (!ok(p.send(0, tag_ctl, &verdict, sizeof verdict))) return false;
        // Stay until rank 0 saw the verdict: our fragment must come back.
        p.runtime().fence();
        return good;
    }

    struct Ctl {
        Exposed ex{};
        int got = 0;
        std::uint32_t verdict = 0;
    } ctl;
    p.am().register_callback(
        tag_ctl,
        [](btl::Module*, const btl::ReceiveDescriptor& d, void* cb) {
            auto* c = static_cast<Ctl*>(cb);
            if (c->got++ == 0)
                std::memcpy(&c->ex, d.segments[0].addr, sizeof c->ex);
            else
                std::memcpy(&c->verdict, d.segments[0].addr, sizeof c->verdict);
        },
        &ctl);
    while (ctl.got == 0) p.progress();
    std::vector<char> buf(max + 8);
    for (std::uint32_t k = 0; k < total; ++k)
        if (!send_one(p, 1, k, buf)) return false;

    btl::Module& m = p.module();
    RdmaWait w;
    if (cma) {
        std::vector<char> got(rdma_size);
        // The peer's exposed buffer, completing into w.
        const btl::RdmaRequest whole{.endpoint = p.ep(1),
                                     .local = got.data(),
                                     .remote = ctl.ex.buffer,
                                     .remote_handle = handle(ctl.ex.buffer_key),
                                     .size = rdma_size,
                                     .cb = rdma_done,
                                     .cbdata = &w};
        Status s = wait_rdma(
            p, [&] { return m.rdma()->get(whole); }, w);
        if (!check(ok(s), "get", static_cast<int>(s))) return false;
        std::vector<char> want(rdma_size);
        fill(want.data(), rdma_size, 77);
        if (!check(got == want, "get read the peer's buffer")) return false;
        fill(got.data(), rdma_size, 99);
        s = wait_rdma(
            p, [&] { return m.rdma()->put(whole); }, w);
        if (!check(ok(s), "put", static_cast<int>(s))) return false;
    } else {
        char c[8];
        if (!check(m.rdma()->get({.endpoint = p.ep(1),
                                  .local = c,
                                  .remote = ctl.ex.buffer,
                                  .remote_handle = handle(ctl.ex.buffer_key),
                                  .size = 8,
                                  .cb = rdma_done,
                                  .cbdata = &w}) == Status::not_supported,
                   "get without single copy says not supported"))
            return false;
    }
    for (std::uint64_t i = 0; i < 100; ++i) {
        std::uint64_t old = 12345;
        Status s = wait_rdma(
            p,
            [&] {
                return m.atomics()->atomic_fop({.endpoint = p.ep(1),
                                                .local = &old,
                                                .remote = ctl.ex.counter,
                                                .remote_handle = handle(ctl.ex.counter_key),
                                                .op = btl::AtomicOp::add,
                                                .operand = 1,
                                                .cb = rdma_done,
                                                .cbdata = &w});
            },
            w);
        if (!check(ok(s) && old == i, "fetch-add returns the old value",
                   static_cast<long long>(old)))
            return false;
    }
    std::uint64_t old = 0;
    auto cswap = [&](std::uint64_t compare, std::uint64_t value) {
        return wait_rdma(
            p,
            [&] {
                return m.atomics()->atomic_cswap({.endpoint = p.ep(1),
                                                  .local = &old,
                                                  .remote = ctl.ex.counter,
                                                  .remote_handle = handle(ctl.ex.counter_key),
                                                  .operand = value,
                                                  .compare = compare,
                                                  .cb = rdma_done,
                                                  .cbdata = &w});
            },
            w);
    };
    Status s = cswap(100, 105);
    if (!check(ok(s) && old == 100, "cswap", static_cast<long long>(old))) return false;
    s = cswap(1, 7);
    if (!check(ok(s) && old == 105, "failed cswap leaves the value", static_cast<long long>(old)))
        return false;
    while ((s = m.atomics()->atomic_op({.endpoint = p.ep(1),
                                        .remote = ctl.ex.counter32,
                                        .remote_handle = handle(ctl.ex.counter32_key),
                                        .op = btl::AtomicOp::or_,
                                        .operand = 0xffffffffu,
                                        .flags = btl::atomic_flags::bits32})) ==
           Status::out_of_resource)
        p.progress();  // the queue to the peer is full: retry, as the contract asks
    if (!check(ok(s), "32-bit atomic posted", static_cast<int>(s))) return false;
    if (!check(m.rdma()->flush(p.ep(1)) == Status::success, "flush")) return false;

    const std::uint32_t done = 1;
    if (!ok(p.send(1, tag_ctl, &done, sizeof done))) return false;
    while (ctl.got < 2) p.progress();
    p.runtime().fence();
    return check(ctl.verdict == 1, "the receiver's verdict");
}

TEST(VaderBtl, EveryMethodEverySizePutGetAtomics) {
    const std::string job = job_name("ex");
    const auto codes = run_job(2, job, [](Rank r, JobArea* a, const std::string& j) {
        return exchange(r, a, j, {}, cma_self_probe().empty());
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

TEST(VaderBtl, WithoutSingleCopy) {
    const std::string job = job_name("none");
    const auto codes = run_job(2, job, [](Rank r, JobArea* a, const std::string& j) {
        return exchange(r, a, j, {{"single_copy_mechanism", "none"}}, false);
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

TEST(VaderBtl, CmaProbeForcedToFail) {
    const std::string job = job_name("fail");
    const auto codes = run_job(2, job, [](Rank r, JobArea* a, const std::string& j) {
        return exchange(r, a, j, {{"cma_probe_fail", "true"}}, false);
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

TEST(VaderBtl, SmallBoxesAndFifoStillCarryEverything) {
    const std::string job = job_name("tiny");
    const auto codes = run_job(2, job, [](Rank r, JobArea* a, const std::string& j) {
        return exchange(r, a, j,
                        {{"fbox_size", "256"},
                         {"fbox_threshold", "0"},
                         {"segment_size", "64k"},
                         {"max_send_size", "8k"}},
                        cma_self_probe().empty());
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

// --- mem_alloc ---------------------------------------------------------------------

// Rank 1 exposes memory from its module's mem_alloc; rank 0 reaches it with
// single copy off, so only direct access through the shared mapping can
// complete put, get and atomics, and they must complete at once.
bool direct_access(Rank rank, JobArea* area, const std::string& job) {
    Proc p(area, rank, 2, job, {{"single_copy_mechanism", "none"}, {"heap_size", "4M"}});
    if (!check(p.has_module(), "init returned a module")) return false;
    btl::Module& m = p.module();

    constexpr std::size_t block = (1 << 20) + 100;
    struct Ctl {
        Exposed ex{};
        int got = 0;
    } ctl;
    p.am().register_callback(
        tag_ctl,
        [](btl::Module*, const btl::ReceiveDescriptor& d, void* cb) {
            auto* c = static_cast<Ctl*>(cb);
            if (c->got++ == 0) std::memcpy(&c->ex, d.segments[0].addr, sizeof c->ex);
        },
        &ctl);
    if (rank == 1) {
        const bool refused = m.rdma()->mem_alloc(8u << 20) == nullptr;
        auto* mem = static_cast<char*>(m.rdma()->mem_alloc(block));
        auto* counter = static_cast<std::uint64_t*>(m.rdma()->mem_alloc(8));
        if (!check(refused, "more than heap_size is refused") ||
            !check(mem != nullptr && counter != nullptr, "mem_alloc gave memory") ||
            !check(reinterpret_cast<std::uintptr_t>(mem) % 4096 == 0, "page aligned")) {
            const Exposed none{};
            (void)p.send(0, tag_ctl, &none, sizeof none);  // so rank 0 stops too
            return false;
        }
        fill(mem, block, 77);
        *counter = 0;
        alignas(8) std::uint64_t outside = 0;  // registered, but not in mem_alloc's pages
        const Exposed ex{
            reinterpret_cast<std::uint64_t>(mem),      reinterpret_cast<std::uint64_t>(counter),
            reinterpret_cast<std::uint64_t>(&outside), expose(m, mem, block),
            expose(m, counter, sizeof *counter),       expose(m, &outside, sizeof outside)};
        if (!ok(p.send(0, tag_ctl, &ex, sizeof ex))) return false;
        while (ctl.got == 0) p.progress();  // rank 0 is done
        std::vector<char> want(block);
        fill(want.data(), block, 99);
        bool good = check(std::memcmp(mem, want.data(), block) == 0, "put landed") &&
                    check(*counter == 1000, "fetch-adds applied", static_cast<long long>(*counter));
        int foreign = 0;
        good = good &&
               check(!m.rdma()->mem_free(&foreign), "a pointer it did not give is not freed") &&
               check(m.rdma()->mem_free(mem), "its own block is freed") &&
               check(!m.rdma()->mem_free(mem), "the same block is not freed twice") &&
               check(m.rdma()->mem_free(counter), "the counter is freed");
        p.runtime().fence();
        return good;
    }
    while (ctl.got == 0) p.progress();
    if (!check(ctl.ex.buffer != 0, "rank 1 exposed its memory")) return false;
    // No endpoint (a peer vader does not reach): an error, not a crash.
    std::uint64_t none = 0;
    if (!check(m.atomics()->atomic_fop({.local = &none,
                                        .remote = ctl.ex.counter,
                                        .remote_handle = handle(ctl.ex.counter_key),
                                        .op = btl::AtomicOp::add,
                                        .operand = 1,
                                        .cb = rdma_done}) == Status::bad_param &&
                   m.rdma()->get({.local = &none,
                                  .remote = ctl.ex.buffer,
                                  .remote_handle = handle(ctl.ex.buffer_key),
                                  .size = 8,
                                  .cb = rdma_done}) == Status::bad_param,
               "one-sided operations without an endpoint are refused"))
        return false;
    std::vector<char> got(block);
    if (!check(m.rdma()->get({.endpoint = p.ep(1),
                              .local = got.data(),
                              .remote = ctl.ex.buffer,
                              .remote_handle = handle(ctl.ex.buffer_key),
                              .size = block,
                              .cb = rdma_done}) == Status::completed,
               "get from mem_alloc memory completes at once"))
        return false;
    std::vector<char> want(block);
    fill(want.data(), block, 77);
    if (!check(got == want, "get read the peer's memory")) return false;
    char outside[8];
    if (!check(m.rdma()->get({.endpoint = p.ep(1),
                              .local = outside,
                              .remote = ctl.ex.counter32,
                              .remote_handle = handle(ctl.ex.counter32_key),
                              .size = 8,
                              .cb = rdma_done}) == Status::not_supported,
               "an address outside the peer's mem_alloc pages needs single copy"))
        return false;
    // Through the mapping too, the registration bounds what a peer can do.
    if (!check(m.rdma()->get({.endpoint = p.ep(1),
                              .local = outside,
                              .remote = ctl.ex.buffer - 8,
                              .remote_handle = handle(ctl.ex.buffer_key),
                              .size = 8,
                              .cb = rdma_done}) == Status::bad_param &&
                   m.rdma()->put({.endpoint = p.ep(1),
                                  .local = outside,
                                  .remote = ctl.ex.buffer + block,
                                  .remote_handle = handle(ctl.ex.buffer_key),
                                  .size = 8,
                                  .cb = rdma_done}) == Status::bad_param &&
                   m.atomics()->atomic_op({.endpoint = p.ep(1),
                                           .remote = ctl.ex.counter + 8,
                                           .remote_handle = handle(ctl.ex.counter_key),
                                           .op = btl::AtomicOp::add,
                                           .operand = 1}) == Status::bad_param,
               "operations outside the peer's registrations are refused"))
        return false;
    fill(got.data(), block, 99);
    if (!check(m.rdma()->put({.endpoint = p.ep(1),
                              .local = got.data(),
                              .remote = ctl.ex.buffer,
                              .remote_handle = handle(ctl.ex.buffer_key),
                              .size = block,
                              .cb = rdma_done}) == Status::completed,
               "put completes at once"))
        return false;
    for (std::uint64_t i = 0; i < 1000; ++i) {
        std::uint64_t old = ~0ull;
        const Status s = m.atomics()->atomic_fop({.endpoint = p.ep(1),
                                                  .local = &old,
                                                  .remote = ctl.ex.counter,
                                                  .remote_handle = handle(ctl.ex.counter_key),
                                                  .op = btl::AtomicOp::add,
                                                  .operand = 1,
                                                  .cb = rdma_done});
        if (!check(s == Status::completed && old == i, "fetch-add completes at once, in order",
                   static_cast<long long>(old)))
            return false;
    }
    const std::uint32_t done = 1;
    if (!ok(p.send(1, tag_ctl, &done, sizeof done))) return false;
    p.runtime().fence();
    return true;
}

TEST(VaderBtl, MemAllocMemoryIsReachedDirectly) {
    const std::string job = job_name("mem");
    const auto codes = run_job(2, job, direct_access);
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

// --- many to one ------------------------------------------------------------------

constexpr std::uint32_t stress_messages = 100000;

std::size_t stress_size(std::uint32_t seq) {
    return seq % 97 == 0 ? 20000 : 4 + (seq * 7919u) % 600;
}

bool many_to_one(Rank rank, JobArea* area, const std::string& job) {
    constexpr std::uint32_t n = 4;
    Proc p(area, rank, n, job, {});
    if (!check(p.has_module(), "init returned a module")) return false;
    struct State {
        std::array<std::uint32_t, n> next{};
        std::uint32_t bad = 0;
        std::uint32_t total = 0;
        bool done = false;
    } st;
    if (rank == 0) {
        p.am().register_callback(
            tag_data,
            [](btl::Module*, const btl::ReceiveDescriptor& d, void* cb) {
                auto* s = static_cast<State*>(cb);
                const Rank from = d.endpoint->peer();
                const std::uint32_t seq = s->next[from]++;
                const std::size_t len = d.segments[0].len;
                if (len != stress_size(seq) ||
                    !matches(static_cast<const char*>(d.segments[0].addr), len, seq + from))
                    ++s->bad;
                ++s->total;
            },
            &st);
        while (st.total < (n - 1) * stress_messages) p.progress();
        const std::uint32_t done = 1;
        for (Rank r = 1; r < n; ++r)
            if (!ok(p.send(r, tag_ctl, &done, sizeof done))) return false;
        p.runtime().fence();
        return check(st.bad == 0, "every message intact and in order per sender", st.bad);
    }
    p.am().register_callback(
        tag_ctl,
        [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
            static_cast<State*>(cb)->done = true;
        },
        &st);
    std::vector<char> buf(20000);
    for (std::uint32_t seq = 0; seq < stress_messages; ++seq) {
        const std::size_t len = stress_size(seq);
        // The pattern's seed includes the rank: a message credited to the wrong
        // sender fails the check.
        fill(buf.data(), len, seq + rank);
        if (!ok(p.send(0, tag_data, buf.data(), len))) return false;
    }
    while (!st.done) p.progress();
    p.runtime().fence();
    return true;
}

TEST(VaderBtl, ThreeSendersToOneReceiverKeepOrder) {
    const std::string job = job_name("m21");
    const auto codes = run_job(4, job, many_to_one);
    EXPECT_EQ(codes, (std::vector<int>{0, 0, 0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

// --- peer death -------------------------------------------------------------------

bool survivor_or_victim(Rank rank, JobArea* area, const std::string& job) {
    Proc p(area, rank, 2, job, {});
    if (!check(p.has_module(), "init returned a module")) return false;
    std::uint32_t received = 0;
    if (rank == 1) {
        p.am().register_callback(
            tag_data,
            [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
                ++*static_cast<std::uint32_t*>(cb);
            },
            &received);
        while (received < 1000) p.progress();
        // The ack names a word for rank 0's atomic, which we never serve.
        alignas(8) std::uint64_t word = 0;
        const Exposed ack{reinterpret_cast<std::uint64_t>(&word), 0,  0,
                          expose(p.module(), &word, sizeof word), {}, {}};
        if (!ok(p.send(0, tag_ctl, &ack, sizeof ack))) return false;
        // Stop serving: once rank 0 has posted its atomic (it stays pending
        // at rank 0), die hard.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (area->signal.load(std::memory_order_acquire) == 0 &&
               std::chrono::steady_clock::now() < give_up)
            std::this_thread::yield();
        ::raise(SIGKILL);
        return false;
    }
    struct Seen {
        int errors = 0;
        Rank peer = any_rank;
        std::chrono::steady_clock::time_point when{};
    } seen;
    p.module().register_error(
        [](btl::Module*, std::uint32_t, Rank peer, const char*, void* cb) {
            auto* s = static_cast<Seen*>(cb);
            if (s->errors++ == 0) s->when = std::chrono::steady_clock::now();
            s->peer = peer;
        },
        &seen);
    std::vector<char> buf(64, 'x');
    struct Ack {
        bool got = false;
        Exposed ex{};
    } acked;
    p.am().register_callback(
        tag_ctl,
        [](btl::Module*, const btl::ReceiveDescriptor& d, void* cb) {
            auto* a = static_cast<Ack*>(cb);
            std::memcpy(&a->ex, d.segments[0].addr, sizeof a->ex);
            a->got = true;
        },
        &acked);
    for (int i = 0; i < 1000; ++i)
        if (!ok(p.send(1, tag_data, buf.data(), buf.size()))) return false;
    while (!acked.got) p.progress();
    RdmaWait w;
    std::uint64_t old = 0;
    const Status posted =
        p.module().atomics()->atomic_fop({.endpoint = p.ep(1),
                                          .local = &old,
                                          .remote = acked.ex.buffer,
                                          .remote_handle = handle(acked.ex.buffer_key),
                                          .op = btl::AtomicOp::add,
                                          .operand = 1,
                                          .cb = rdma_done,
                                          .cbdata = &w});
    area->signal.store(1, std::memory_order_release);  // rank 1 may die now
    if (!check(posted == Status::success, "atomic queued", static_cast<int>(posted))) return false;
    const auto start = std::chrono::steady_clock::now();
    while (seen.errors == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
        p.progress();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(seen.when - start);
    btl::Convertor conv(buf.data(), 8);
    btl::Descriptor* d = nullptr;
    const Status after =
        p.module().sendi(p.ep(1), &conv, nullptr, 0, 8, btl::no_order, 0, tag_data, &d);
    return check(seen.errors == 1 && seen.peer == 1, "one error callback for rank 1",
                 seen.errors) &&
           check(took.count() < 1200, "death seen within a second of it (ms)", took.count()) &&
           check(w.done == 1 && w.status == Status::peer_failed,
                 "the pending atomic completed with peer_failed", w.done) &&
           check(after == Status::peer_failed, "sends to the dead peer fail",
                 static_cast<int>(after));
}

TEST(VaderBtl, PeerKilledMidTransferIsReported) {
    const std::string job = job_name("kill");
    const auto codes = run_job(2, job, survivor_or_victim);
    EXPECT_EQ(codes, (std::vector<int>{0, 128 + SIGKILL}));
    EXPECT_EQ(leftovers(job), 0u);
}

// --- what a killed process leaves ----------------------------------------------------

// A rank killed before its peer mapped its segment leaves the name; the next
// process on the node that opens vader (here one alone, which declines)
// removes it.
TEST(VaderBtl, SegmentOfAKilledProcessIsRemovedByTheNext) {
    const std::string job = job_name("dead");
    const auto killed = run_job(1, job, [](Rank r, JobArea* a, const std::string& j) {
        ForkRuntime rt(a, r, 2, j);  // the peer never comes
        std::unique_ptr<btl::Component> component(
            static_cast<btl::Component*>(transit_btl_vader_component.create()));
        component->register_params(params::registry());
        ProgressEngine progress;
        btl::AmTable am;
        btl::InitContext ctx{rt, progress, am};
        const auto modules = component->init(ctx);
        if (modules.empty()) return false;
        ::raise(SIGKILL);
        return true;
    });
    ASSERT_EQ(killed, (std::vector<int>{128 + SIGKILL}));
    ASSERT_EQ(leftovers(job), 1u);
    const auto next = run_job(1, job_name("next"), [](Rank r, JobArea* a, const std::string& j) {
        Proc p(a, r, 1, j, {});
        return !p.has_module();
    });
    EXPECT_EQ(next, (std::vector<int>{0}));
    EXPECT_EQ(leftovers(job), 0u);
}

// --- alone on the node ------------------------------------------------------------

TEST(VaderBtl, AloneOnTheNodeDeclinesAndCostsNothing) {
    const std::string job = job_name("solo");
    const auto codes = run_job(1, job, [](Rank r, JobArea* a, const std::string& j) {
        Proc p(a, r, 1, j, {});
        return check(!p.has_module(), "no module without local peers") &&
               check(!p.decline().empty(), "a decline reason") &&
               check(p.engine().size() == 0, "no progress callback");
    });
    EXPECT_EQ(codes, (std::vector<int>{0}));
    EXPECT_EQ(leftovers(job), 0u);
}

TEST(VaderBtl, ProgressOnlyOnceAPeerIsAdded) {
    const std::string job = job_name("prog");
    const auto codes = run_job(2, job, [](Rank r, JobArea* a, const std::string& j) {
        Proc p(a, r, 2, j, {});
        return check(p.has_module(), "a module") &&
               check(p.engine().size() == 2, "progress and peer watch registered",
                     static_cast<long long>(p.engine().size()));
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

// Bytes of tmpfs pages behind this process's own segment (it keeps the file
// open, unlinked), or -1 when it cannot be found.
long long own_segment_bytes(Rank rank) {
    const std::string mark = fmt::format("-vader-{}-", rank);
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
        if (ec || target.find(mark) == std::string::npos) continue;
        struct stat st {};
        if (::stat(e.path().c_str(), &st) == 0) return static_cast<long long>(st.st_blocks) * 512;
    }
    return -1;
}

// The segment (8 MiB of fragments by default) gets pages as fragments are
// used: a job with few sends in flight pays for a few fragments only.
// (A burst of sends still uses as many fragments as it needs.)
TEST(VaderBtl, SegmentPagesFollowUse) {
    const std::string job = job_name("pages");
    const auto codes = run_job(2, job, [](Rank r, JobArea* a, const std::string& j) {
        Proc p(a, r, 2, j, {});
        if (!check(p.has_module(), "a module")) return false;
        const long long at_start = own_segment_bytes(r);
        if (!check(at_start > 0 && at_start < (1 << 20), "under 1 MiB of pages at start", at_start))
            return false;
        Receiver rcv;
        auto on_data = [](btl::Module*, const btl::ReceiveDescriptor&, void* cb) {
            ++static_cast<Receiver*>(cb)->expected;
        };
        p.am().register_callback(tag_data, on_data, &rcv);
        constexpr std::uint32_t count = 200;
        const std::size_t len = p.module().attributes().max_send_size;
        std::vector<char> buf(len, 'x');
        // A ping-pong: one message in flight at a time.
        for (std::uint32_t k = 0; k < count; ++k) {
            if (r == 0) {
                if (!check(ok(p.send(1, tag_data, buf.data(), len)), "send", k)) return false;
                while (rcv.expected == k) p.progress();
            } else {
                while (rcv.expected == k) p.progress();
                if (!check(ok(p.send(0, tag_data, buf.data(), len)), "send", k)) return false;
            }
        }
        const long long after = own_segment_bytes(r);
        return check(after < (2 << 20), "under 2 MiB of pages after a 200-message ping-pong",
                     after);
    });
    EXPECT_EQ(codes, (std::vector<int>{0, 0}));
    EXPECT_EQ(leftovers(job), 0u);
}

}  // namespace
}  // namespace transit::vader::test
