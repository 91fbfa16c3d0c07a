// SPDX-License-Identifier: Apache-2.0
#include "spec/job_ref.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cohort::cli {
namespace {

TEST(JobRefTest, ReadsJobsAndArrayTasks) {
  EXPECT_EQ(*ParseJobRef("12", "cancel"), (JobRef{12, -1}));
  EXPECT_EQ(*ParseJobRef("12_3", "cancel"), (JobRef{12, 3}));
  EXPECT_EQ(*ParseJobRef("12_0", "cancel"), (JobRef{12, 0}));
  EXPECT_EQ(*ParseJobRef("9000000000_9999", "cancel"), (JobRef{9000000000, 9999}));
}

TEST(JobRefTest, WritesWhatItReads) {
  for (const std::string text : {"12", "12_3", "12_0", "1"}) {
    absl::StatusOr<JobRef> ref = ParseJobRef(text, "hold");
    ASSERT_TRUE(ref.ok()) << text << ": " << ref.status();
    EXPECT_EQ(FormatJobRef(*ref), text);
  }
}

TEST(JobRefTest, RefusesWhatIsNotAJob) {
  for (const std::string text :
       {"12_", "x", "-3", "0", "0_1", "", "_3", "12_x", "12_-1", "12_3_4", "+12", " 12", "12 ",
        "12.5", "99999999999999999999", "12_99999999999"}) {
    absl::StatusOr<JobRef> ref = ParseJobRef(text, "cancel");
    EXPECT_FALSE(ref.ok()) << "\"" << text << "\" gave " << FormatJobRef(*ref);
    EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_EQ(ParseJobRef("12_", "cancel").status().message(),
            "cancel: \"12_\" is not a job; write a job id such as 12, or 12_3 for task 3 of array "
            "12 (see cohort queue)");
  EXPECT_EQ(ParseJobRef("x", "show job").status().message(),
            "show job: \"x\" is not a job; write a job id such as 12, or 12_3 for task 3 of array "
            "12 (see cohort queue)");
}

TEST(JobRefTest, ListStopsAtTheFirstBadWord) {
  absl::StatusOr<std::vector<JobRef>> refs = ParseJobRefs({"4", "12_3", "7"}, "hold");
  ASSERT_TRUE(refs.ok()) << refs.status();
  EXPECT_EQ(*refs, (std::vector<JobRef>{{4, -1}, {12, 3}, {7, -1}}));

  EXPECT_EQ(ParseJobRefs({"4", "-3", "x"}, "release").status().message(),
            "release: \"-3\" is not a job; write a job id such as 12, or 12_3 for task 3 of array "
            "12 (see cohort queue)");
  EXPECT_EQ(ParseJobRefs({}, "requeue").status().message(),
            "requeue: no job given; name one or more, such as 12 or 12_3");
}

TEST(JobRefTest, EnvironmentNamesTheJobInsideIt) {
  EXPECT_EQ(*JobRefFromEnvironment("41", "", "checkpoint-done"), (JobRef{41, -1}));
  EXPECT_EQ(*JobRefFromEnvironment("", "42", "checkpoint-done"), (JobRef{42, -1}));
  // COHORT_JOB_ID wins.
  EXPECT_EQ(*JobRefFromEnvironment("41", "42", "checkpoint-done"), (JobRef{41, -1}));

  EXPECT_EQ(JobRefFromEnvironment("", "", "checkpoint-done").status().message(),
            "checkpoint-done: no job given, and neither COHORT_JOB_ID nor SLURM_JOB_ID is set; run "
            "it inside a job, or name the job: cohort checkpoint-done JOB");
  EXPECT_EQ(JobRefFromEnvironment("", "abc", "checkpoint-done").status().message(),
            "checkpoint-done: SLURM_JOB_ID is \"abc\", not a job id; name the job: cohort "
            "checkpoint-done JOB");
  EXPECT_EQ(JobRefFromEnvironment("0", "42", "checkpoint-done").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::cli
