// main() of every multi-process test program.  Each rank runs the same cases;
// at the end the ranks exchange their failures, rank 0 prints which test
// failed where, and every rank exits non-zero if any rank failed, so the
// launcher's exit status is the job's verdict.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/mp/mp.hpp"
#include "tests/mp/mp_internal.hpp"

namespace {

using namespace transit;

constexpr const char* verdict_key = "transit.mp.verdict";

// Ranks other than 0 print only their failures (with a rank tag when
// transit_run --tag-output is used), so a passing run reads like a normal one.
class FailurePrinter : public testing::EmptyTestEventListener {
    void OnTestPartResult(const testing::TestPartResult& r) override {
        if (!r.failed()) return;
        std::printf("%s:%d: Failure\n%s\n", r.file_name() ? r.file_name() : "?", r.line_number(),
                    r.message());
    }
    void OnTestEnd(const testing::TestInfo& t) override {
        if (t.result()->Failed())
            std::printf("[  FAILED  ] %s.%s\n", t.test_suite_name(), t.name());
        std::fflush(stdout);
    }
};

// Keeps the ranks in step: no rank starts a test before all finished the
// previous one.
class Lockstep : public testing::EmptyTestEventListener {
    void OnTestStart(const testing::TestInfo& t) override {
        const Status s = mp::runtime().fence();
        if (!ok(s)) {
            std::fprintf(stderr, "[mp] rank %u: a peer is gone before %s.%s (%s)\n", mp::rank(),
                         t.test_suite_name(), t.name(), std::string(to_string(s)).c_str());
            std::exit(1);
        }
    }
};

std::string failed_tests() {
    std::string out;
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
        const testing::TestSuite& suite = *unit.GetTestSuite(i);
        for (int j = 0; j < suite.total_test_count(); ++j) {
            const testing::TestInfo& t = *suite.GetTestInfo(j);
            if (t.should_run() && t.result()->Failed())
                out += std::string(suite.name()) + "." + t.name() + "\n";
        }
    }
    if (unit.ad_hoc_test_result().Failed()) out += "(outside any test)\n";
    return out;
}

// Exchanges the failures; returns true when every rank passed.
bool job_verdict(bool mine_passed) {
    rt::Runtime& rt = mp::runtime();
    std::string text = mine_passed ? std::string() : failed_tests();
    if (!mine_passed && text.empty()) text = "(unknown)\n";
    const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
    if (!ok(rt.modex_send(verdict_key, std::span(bytes, text.size()))) || !ok(rt.fence()))
        return false;
    std::map<std::string, std::vector<Rank>> where;
    bool all_passed = true;
    for (Rank r = 0; r < rt.size(); ++r) {
        std::vector<std::byte> blob;
        if (!ok(rt.modex_recv(r, verdict_key, blob))) {
            where["(no verdict)"].push_back(r);
            all_passed = false;
            continue;
        }
        std::string list(reinterpret_cast<const char*>(blob.data()), blob.size());
        for (std::size_t pos = 0, nl; (nl = list.find('\n', pos)) != std::string::npos;
             pos = nl + 1) {
            where[list.substr(pos, nl - pos)].push_back(r);
            all_passed = false;
        }
    }
    if (rt.rank() == 0 && rt.size() > 1) {
        if (all_passed) std::printf("[mp] all %u ranks passed\n", rt.size());
        for (const auto& [test, ranks] : where) {
            std::string list;
            for (Rank r : ranks) {
                if (!list.empty()) list += ',';
                list += std::to_string(r);
            }
            std::printf("[mp] FAILED %s on rank%s %s\n", test.c_str(), ranks.size() > 1 ? "s" : "",
                        list.c_str());
        }
    }
    std::fflush(stdout);
    return all_passed;
}

}  // namespace

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    try {
        mp::detail::set_runtime(rt::open_runtime());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "[mp] cannot join the job: %s\n", e.what());
        return 1;
    }
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    const char* verbose = std::getenv("TRANSIT_MP_VERBOSE");
    if (mp::rank() != 0 && !(verbose && *verbose && *verbose != '0')) {
        std::unique_ptr<testing::TestEventListener> dropped(
            listeners.Release(listeners.default_result_printer()));
        listeners.Append(std::make_unique<FailurePrinter>().release());  // gtest owns it
    }
    listeners.Append(std::make_unique<Lockstep>().release());

    const bool passed = RUN_ALL_TESTS() == 0;
    const bool all_passed = job_verdict(passed);
    // The last fence: nobody exits (and so makes the launcher end the job)
    // before rank 0 has printed the summary.
    (void)mp::runtime().fence();
    mp::detail::set_runtime(nullptr);
    return passed && all_passed ? 0 : 1;
}
