// How a PMIx "process lost" event is read: which ranks of our job it names.
#include "runtime/lost_peers.hpp"

#include <gtest/gtest.h>
#include <pmix.h>

#include <vector>

#include "runtime/pmix_util.hpp"

namespace transit::rt {
namespace {

constexpr const char* job = "job-1";

struct Info {
    pmix_info_t info;
    Info(const char* key, const void* value, pmix_data_type_t type) {
        PMIX_INFO_CONSTRUCT(&info);
        PMIX_INFO_LOAD(&info, key, value, type);
    }
    ~Info() { PMIX_INFO_DESTRUCT(&info); }
};

TEST(AffectedRanks, TheAffectedProcOfOurJob) {
    const pmix_proc_t lost = pmix::make_proc(job, 3);
    Info i(PMIX_EVENT_AFFECTED_PROC, &lost, PMIX_PROC);
    const pmix_proc_t source = pmix::make_proc("launcher", 0);
    EXPECT_EQ(affected_ranks(job, &source, &i.info, 1), std::vector<Rank>{3});
}

TEST(AffectedRanks, AnotherJobsProcIsNotOurs) {
    const pmix_proc_t lost = pmix::make_proc("job-2", 3);
    Info i(PMIX_EVENT_AFFECTED_PROC, &lost, PMIX_PROC);
    EXPECT_TRUE(affected_ranks(job, &lost, &i.info, 1).empty());
}

TEST(AffectedRanks, AnArrayOfProcsWithoutWildcardsOrDuplicates) {
    pmix_proc_t procs[4] = {pmix::make_proc(job, 1), pmix::make_proc(job, PMIX_RANK_WILDCARD),
                            pmix::make_proc(job, 1), pmix::make_proc(job, 5)};
    pmix_data_array_t arr{PMIX_PROC, 4, procs};
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    // Pointing at our array, not copying it: nothing to destruct afterwards.
    PMIX_LOAD_KEY(info.key, PMIX_EVENT_AFFECTED_PROCS);
    info.value.type = PMIX_DATA_ARRAY;
    info.value.data.darray = &arr;
    EXPECT_EQ(affected_ranks(job, nullptr, &info, 1), (std::vector<Rank>{1, 5}));
}

TEST(AffectedRanks, WithoutAffectedProcsTheSourceIsTheLostOne) {
    const pmix_proc_t source = pmix::make_proc(job, 2);
    EXPECT_EQ(affected_ranks(job, &source, nullptr, 0), std::vector<Rank>{2});
    const pmix_proc_t wildcard = pmix::make_proc(job, PMIX_RANK_WILDCARD);
    EXPECT_TRUE(affected_ranks(job, &wildcard, nullptr, 0).empty());
}

TEST(AffectedRanks, OtherInfoIsIgnored) {
    const bool yes = true;
    Info i(PMIX_EVENT_NON_DEFAULT, &yes, PMIX_BOOL);
    const pmix_proc_t source = pmix::make_proc(job, 4);
    EXPECT_EQ(affected_ranks(job, &source, &i.info, 1), std::vector<Rank>{4});
}

TEST(LostPeersState, RecordsEachRankOnceAndNeverItself) {
    LostPeers::State s;
    s.self = 0;
    s.record({2, 0, 2});
    s.record({1, 2});
    EXPECT_EQ(s.count.load(), 2u);
    EXPECT_EQ(s.ranks, (std::vector<Rank>{2, 1}));
}

}  // namespace
}  // namespace transit::rt
