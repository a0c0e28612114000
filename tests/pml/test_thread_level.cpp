// The thread level: the one the program asks for at init is granted and
// reported (C++ and C), the parameter pml_base_thread_level decides when the
// program does not ask, and an unknown value of it is an error naming where it
// was set.  One process (a job of one) over self; ctest sets
// TRANSIT_MCA_pml_base_thread_level (serialized, or an unknown value for
// ThreadLevelParam.*).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/pml/single_process.hpp"
#include "transit/log.hpp"
#include "transit/params.hpp"
#include "transit/transit.h"
#include "transit/transit.hpp"

namespace {

using namespace transit;

// Sends one message to ourselves and receives it: the context works.
void exchange_with_self(Context& c) {
    int out = 42, in = 0;
    Request* r;
    ASSERT_TRUE(ok(c.irecv(c.rank(), 5, &in, sizeof in, r)));
    ASSERT_EQ(c.send(c.rank(), 5, &out, sizeof out), Status::success);
    ASSERT_EQ(c.wait(r), Status::success);
    EXPECT_EQ(in, 42);
}

TEST(ThreadLevel, TheParameterDecidesWhenTheProgramDoesNotAsk) {
    test::become_job_of_one();
    Context c = init();
    EXPECT_EQ(c.thread_level(), ThreadLevel::serialized);
    exchange_with_self(c);
}

TEST(ThreadLevel, SingleIsGrantedWhenAsked) {
    test::become_job_of_one();
    Context c = init(ThreadLevel::single);
    EXPECT_EQ(c.thread_level(), ThreadLevel::single);
    exchange_with_self(c);
}

TEST(ThreadLevel, MultipleIsGrantedWhenAsked) {
    test::become_job_of_one();
    Context c = init(ThreadLevel::multiple);
    EXPECT_EQ(c.thread_level(), ThreadLevel::multiple);
    exchange_with_self(c);
}

void keep_line(const log::Line& line, void* lines) {
    static_cast<std::vector<std::string>*>(lines)->emplace_back(line.text);
}

// At multiple the pml tells the btls that several threads call: self is then
// safe for concurrent calls, so the pml (pml_base_verbose 10) no longer lists
// it among the modules only its lock serialises.
TEST(ThreadLevel, SelfIsSafeForConcurrentCallsAtMultiple) {
    test::become_job_of_one();
    const params::Source api{params::Origin::api, "thread level test", 0};
    params::registry().set("pml_base_verbose", "10", api);
    std::vector<std::string> lines;
    log::set_sink(&keep_line, &lines);
    {
        Context c = init(ThreadLevel::multiple);
        exchange_with_self(c);
    }
    log::set_sink(nullptr, nullptr);
    params::registry().set("pml_base_verbose", "0", api);
    bool ready = false;
    for (const std::string& line : lines) {
        EXPECT_EQ(line.find("self: not safe for concurrent calls"), std::string::npos) << line;
        ready = ready || line.find("thread level multiple") != std::string::npos;
    }
    EXPECT_TRUE(ready) << "the pml's verbose lines were not seen";
}

TEST(ThreadLevel, TheCApiGrantsAndReports) {
    test::become_job_of_one();
    for (int level : {TRANSIT_THREAD_SINGLE, TRANSIT_THREAD_FUNNELED, TRANSIT_THREAD_MULTIPLE}) {
        transit_context* c = nullptr;
        int provided = -1;
        ASSERT_EQ(transit_init_thread(nullptr, nullptr, level, &provided, &c), TRANSIT_SUCCESS)
            << transit_last_error();
        EXPECT_EQ(provided, level);
        EXPECT_EQ(transit_query_thread(c), level);
        transit_finalize(c);
    }
    transit_context* c = nullptr;
    ASSERT_EQ(transit_init(nullptr, nullptr, &c), TRANSIT_SUCCESS);
    EXPECT_EQ(transit_query_thread(c), TRANSIT_THREAD_SERIALIZED);
    transit_finalize(c);
}

TEST(ThreadLevel, TheCApiRefusesALevelThatIsNone) {
    transit_context* c = nullptr;
    EXPECT_EQ(transit_init_thread(nullptr, nullptr, 4, nullptr, &c), TRANSIT_BAD_PARAM);
    EXPECT_NE(std::string(transit_last_error()).find("not a thread level"), std::string::npos)
        << transit_last_error();
    EXPECT_EQ(transit_init_thread(nullptr, nullptr, -1, nullptr, &c), TRANSIT_BAD_PARAM);
}

// Run with TRANSIT_MCA_pml_base_thread_level=several.
TEST(ThreadLevelParam, AnUnknownValueIsAnErrorNamingItsSource) {
    test::become_job_of_one();
    try {
        Context c = init();
        ADD_FAILURE() << "init accepted pml_base_thread_level=several";
    } catch (const params::Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("pml_base_thread_level"), std::string::npos) << what;
        EXPECT_NE(what.find("several"), std::string::npos) << what;
        EXPECT_NE(what.find("TRANSIT_MCA_pml_base_thread_level"), std::string::npos) << what;
    }
    // The program's own choice does not make a bad setting acceptable either.
    EXPECT_THROW(init(ThreadLevel::multiple), params::Error);
}

}  // namespace
