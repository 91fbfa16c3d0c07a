// SPDX-License-Identifier: Apache-2.0
// squeue -S: the sort keys and the order they give.
#include "format/job_sort.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort::cli {
namespace {

v1::Job MakeJob(std::int64_t id, std::int64_t priority, const std::string& partition,
                std::int64_t start_ms) {
  v1::Job job;
  job.set_id(id);
  job.set_priority(priority);
  job.mutable_spec()->set_partition(partition);
  job.set_start_time_ms(start_ms);
  return job;
}

std::vector<std::int64_t> Ids(const std::vector<v1::Job>& jobs) {
  std::vector<std::int64_t> ids;
  for (const v1::Job& job : jobs) ids.push_back(job.id());
  return ids;
}

TEST(JobSortTest, KeysOrderAscendingOrDescendingAndTiesKeepTheirOrder) {
  std::vector<v1::Job> jobs = {MakeJob(1, 10, "gpu", 0), MakeJob(2, 30, "cpu", 0),
                               MakeJob(3, 30, "gpu", 0), MakeJob(10, 20, "cpu", 0)};
  absl::StatusOr<std::vector<SortKey>> keys = ParseSortKeys("-p,i");
  ASSERT_TRUE(keys.ok()) << keys.status();
  SortJobs(jobs, *keys, 0);
  EXPECT_EQ(Ids(jobs), (std::vector<std::int64_t>{2, 3, 10, 1}));
  keys = ParseSortKeys("P,+i");
  ASSERT_TRUE(keys.ok());
  SortJobs(jobs, *keys, 0);
  EXPECT_EQ(Ids(jobs), (std::vector<std::int64_t>{2, 10, 1, 3})) << "ids as numbers: 10 after 2";
  keys = ParseSortKeys("P");
  ASSERT_TRUE(keys.ok());
  SortJobs(jobs, *keys, 0);
  EXPECT_EQ(Ids(jobs), (std::vector<std::int64_t>{2, 10, 1, 3})) << "stable within a partition";
}

TEST(JobSortTest, TimeUsedCountsARunningJobToNow) {
  std::vector<v1::Job> jobs = {MakeJob(1, 0, "p", 5'000), MakeJob(2, 0, "p", 1'000),
                               MakeJob(3, 0, "p", 0)};
  jobs[1].set_end_time_ms(2'000);  // ended after 1 s; job 1 runs 5 s by now
  absl::StatusOr<std::vector<SortKey>> keys = ParseSortKeys("-M");
  ASSERT_TRUE(keys.ok());
  SortJobs(jobs, *keys, 10'000);
  EXPECT_EQ(Ids(jobs), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(JobSortTest, ALetterThatSortsNothingIsRefusedWithTheLetters) {
  const absl::StatusOr<std::vector<SortKey>> bad = ParseSortKeys("p,Z");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("\"Z\" is not a field letter"),
            std::string::npos)
      << bad.status();
  EXPECT_FALSE(ParseSortKeys("pi").ok()) << "letters are comma separated";
  EXPECT_TRUE(ParseSortKeys("").ok());
}

}  // namespace
}  // namespace cohort::cli
