// Several threads through one module at once, for the modules that announce
// btl::flags::thread_safe (opened with the framework's multi_threaded): each
// thread sends numbered pings of several sizes and progresses until their
// pongs are back, in its own order and intact (whichever thread's progress
// delivers them); puts its own slice of the target region and gets it back;
// and all threads add to shared words with fetch-add, add and compare-and-swap,
// checked exactly: the final values and every value a fetch-add returned.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/conformance/btl_test.hpp"
#include "tests/conformance/suite_env.hpp"

namespace transit::conformance {
namespace {

constexpr std::uint32_t threads = 4;
constexpr std::uint32_t pings = 400;              // per thread
constexpr std::uint32_t window = 8;               // pings a thread has out at once
constexpr std::uint32_t transfers = 50;           // put + get rounds per thread
constexpr std::size_t slice = 1024;               // region bytes of each thread
constexpr std::uint64_t adds = 200;               // per thread and kind of atomic
constexpr std::uint64_t words = threads * slice;  // the atomics' three words

struct Completion {
    std::atomic<bool> called{false};
    std::atomic<Status> status{Status::success};
};

void on_done(btl::Module*, btl::Endpoint*, void*, btl::RegistrationHandle*, void*, void* cbdata,
             Status s) {
    auto* c = static_cast<Completion*>(cbdata);
    c->status.store(s);
    if (c->called.exchange(true)) ADD_FAILURE() << "a completion callback came twice";
}

class Concurrent : public BtlTest {
  protected:
    bool multi_threaded() const override { return true; }

    using clock = std::chrono::steady_clock;
    bool late(clock::time_point deadline, const std::string& what) {
        if (clock::now() < deadline) return false;
        ADD_FAILURE() << "timed out: " << what;
        return true;
    }
    clock::time_point deadline() const { return clock::now() + suite_env().timeout; }

    // Issues with on_done (retrying while out of resources), then progresses
    // until it completed; the final status.
    template <typename Issue>
    Status complete(Issue issue, const std::string& what) {
        Completion c;
        const auto until = deadline();
        Status s;
        while ((s = issue(&c)) == Status::out_of_resource) {
            progress_concurrent();
            if (late(until, what)) return Status::timeout;
        }
        if (s == Status::completed || s != Status::success) return s;
        while (!c.called.load()) {
            progress_concurrent();
            if (late(until, what)) return Status::timeout;
        }
        return c.status.load();
    }

    btl::RegistrationHandle* register_mine(void* base, std::size_t size) {
        if (attr().registration_handle_size == 0) return nullptr;
        btl::RegistrationHandle* h =
            rdma().register_mem(target(), base, size, btl::reg_flags::access_any);
        if (h == nullptr) ADD_FAILURE() << "register_mem of " << size << " bytes failed";
        return h;
    }

    void exchange(std::uint32_t t) {
        ThreadsEcho& echo = threads_echo();
        const auto until = deadline();
        std::uint32_t sent = 0;
        while (sent < pings) {
            if (sent - echo.pongs(t) < window && echo.ping(t, sent)) {
                ++sent;
                continue;
            }
            progress_concurrent();
            if (late(until, fmt::format("thread {}: room for ping {}", t, sent))) return;
        }
        while (echo.pongs(t) < pings) {
            progress_concurrent();
            if (late(until, fmt::format("thread {}: pongs ({} of {})", t, echo.pongs(t), pings)))
                return;
        }
    }

    Status rdma_op(bool is_put, std::byte* local, btl::RegistrationHandle* lh, std::uint64_t offset,
                   std::size_t size) {
        return complete(
            [&](Completion* c) {
                const btl::RdmaRequest r{.endpoint = target(),
                                         .local = local,
                                         .remote = remote_address(offset),
                                         .local_handle = lh,
                                         .remote_handle = remote_handle(),
                                         .size = size,
                                         .cb = &on_done,
                                         .cbdata = c};
                return is_put ? rdma().put(r) : rdma().get(r);
            },
            is_put ? "put" : "get");
    }

    // The sizes a thread moves: up to its slice, within the module's limits.
    std::size_t transfer_size(std::uint32_t round) const {
        const std::size_t limit = std::min({slice, attr().put_limit, attr().get_limit});
        const std::size_t align =
            std::max<std::size_t>({attr().put_alignment, attr().get_alignment, std::size_t{8}});
        const std::size_t sizes[] = {8, 64, 512, slice};
        return std::max(align, std::min(sizes[round % 4], limit) / align * align);
    }

    // Puts `transfers` patterns into its slice, each read back with get.
    void put_get(std::uint32_t t) {
        std::vector<std::byte> out(slice), in(slice);
        btl::RegistrationHandle* out_h = register_mine(out.data(), out.size());
        btl::RegistrationHandle* in_h = register_mine(in.data(), in.size());
        for (std::uint32_t r = 0; r < transfers; ++r) {
            const std::size_t n = transfer_size(r);
            for (std::size_t i = 0; i < n; ++i) out[i] = pattern((t << 16) | r, i);
            std::fill(in.begin(), in.end(), std::byte{0});
            const Status p = rdma_op(true, out.data(), out_h, t * slice, n);
            const Status g = ok(p) ? rdma_op(false, in.data(), in_h, t * slice, n) : p;
            if (!ok(p) || !ok(g) || !std::equal(out.begin(), out.begin() + n, in.begin())) {
                ADD_FAILURE() << fmt::format("thread {} round {}: put {}, get {}, {} bytes {}", t,
                                             r, to_string(p), to_string(g), n,
                                             ok(g) ? "differ" : "");
                break;  // gtest takes failures from any thread
            }
        }
        for (btl::RegistrationHandle* h : {out_h, in_h})
            if (h != nullptr) rdma().deregister_mem(h);
    }

    Status atomic(btl::AtomicRequest r, bool fetch, bool cswap, const std::string& what) {
        return complete(
            [&](Completion* c) {
                r.endpoint = target();
                r.remote_handle = remote_handle();
                r.cb = &on_done;
                r.cbdata = c;
                if (cswap) return atomics().atomic_cswap(r);
                return fetch ? atomics().atomic_fop(r) : atomics().atomic_op(r);
            },
            what);
    }

    // `adds` increments of each word the module can increment; the values the
    // fetch-adds returned go to `fetched`.
    void increments(std::uint32_t t, std::vector<std::uint64_t>& fetched) {
        alignas(8) std::uint64_t result = 0;
        btl::RegistrationHandle* lh = register_mine(&result, sizeof result);
        std::uint64_t guess = 0;  // the compare-and-swap word's value, as last seen
        Status failed = Status::success;
        auto check = [&](Status s, const char* what) {
            if (ok(s)) return true;
            ADD_FAILURE() << "thread " << t << ": " << what << ": " << to_string(s);
            failed = s;
            return false;
        };
        for (std::uint64_t i = 0; i < adds && ok(failed); ++i) {
            const btl::AtomicRequest add{
                .local = &result, .local_handle = lh, .op = btl::AtomicOp::add, .operand = 1};
            if (fetch_add_) {
                btl::AtomicRequest r = add;
                r.remote = remote_address(words);
                if (check(atomic(r, true, false, "fetch-add"), "fetch-add"))
                    fetched.push_back(result);
            }
            if (add_) {
                btl::AtomicRequest r = add;
                r.remote = remote_address(words + 8);
                check(atomic(r, false, false, "add"), "add");
            }
            if (!cswap_) continue;
            for (;;) {  // an increment by compare-and-swap
                btl::AtomicRequest r = add;
                r.remote = remote_address(words + 16);
                r.compare = guess;
                r.operand = guess + 1;
                if (!check(atomic(r, true, true, "compare-and-swap"), "compare-and-swap")) break;
                const bool swapped = result == guess;
                guess = swapped ? guess + 1 : result;
                if (swapped) break;
            }
        }
        if (lh != nullptr) rdma().deregister_mem(lh);
    }

    std::uint64_t remote_word(std::uint64_t offset) {
        const std::vector<std::byte> bytes = remote_read(offset, 8);
        std::uint64_t v = 0;
        if (bytes.size() == 8) std::memcpy(&v, bytes.data(), 8);
        return v;
    }

    bool fetch_add_ = false, add_ = false, cswap_ = false;
};

TEST_P(Concurrent, ThreadsSendProgressAndAccessMemoryAtOnce) {
    if (!has_flags(btl::flags::thread_safe))
        GTEST_SKIP() << component_
                     << " does not announce btl::flags::thread_safe (the layer above serialises "
                        "its calls)";
    const bool rdma_ok = has_flags(btl::flags::put | btl::flags::get);
    const bool atomics_ok = has_atomics(btl::atomic_support::add);
    fetch_add_ = atomics_ok && has_flags(btl::flags::atomic_fops);
    add_ = atomics_ok && has_flags(btl::flags::atomic_ops);
    cswap_ = has_atomics(btl::atomic_support::cswap) && has_flags(btl::flags::atomic_fops);
    ASSERT_GE(remote_size(), words + 24);

    std::vector<std::vector<std::uint64_t>> fetched(threads);
    std::vector<std::thread> running;
    for (std::uint32_t t = 0; t < threads; ++t) {
        running.emplace_back([this, t, rdma_ok, &fetched] {
            exchange(t);
            if (rdma_ok) put_get(t);
            if (fetch_add_ || add_ || cswap_) increments(t, fetched[t]);
        });
    }
    for (std::thread& t : running) t.join();
    ASSERT_EQ(threads_echo().errors(), 0);
    ASSERT_FALSE(HasFailure());

    // Checked through the service, not through the module under test.
    if (rdma_ok) {
        for (std::uint32_t t = 0; t < threads; ++t) {
            const std::size_t n = transfer_size(transfers - 1);
            std::vector<std::byte> want(n);
            for (std::size_t i = 0; i < n; ++i) want[i] = pattern((t << 16) | (transfers - 1), i);
            EXPECT_EQ(remote_read(t * slice, n), want) << "thread " << t << "'s slice";
        }
    }
    const std::uint64_t total = threads * adds;
    if (fetch_add_) {
        EXPECT_EQ(remote_word(words), total) << "fetch-add";
        std::vector<std::uint64_t> all;
        for (const auto& f : fetched) all.insert(all.end(), f.begin(), f.end());
        std::sort(all.begin(), all.end());
        std::vector<std::uint64_t> each(total);
        for (std::uint64_t i = 0; i < total; ++i) each[i] = i;
        EXPECT_EQ(all, each) << "the values the fetch-adds returned: each of 0.." << total - 1
                             << " once";
    }
    if (add_) {
        EXPECT_EQ(remote_word(words + 8), total) << "add";
    }
    if (cswap_) {
        EXPECT_EQ(remote_word(words + 16), total) << "compare-and-swap increments";
    }
    if (!rdma_ok && !fetch_add_ && !add_ && !cswap_)
        RecordProperty("one_sided", "none offered: messages only");
}

INSTANTIATE_TEST_SUITE_P(btl, Concurrent, ::testing::ValuesIn(components_under_test()),
                         component_param_name);

}  // namespace
}  // namespace transit::conformance
