// SPDX-License-Identifier: Apache-2.0
// The controller's durable job records (daemons/controller/records.cpp):
// what a job's steps become in the store and back.
#include <gtest/gtest.h>

#include "records.h"
#include "test_support.h"

namespace cohort::controller {
namespace {

class RecordsTest : public ::testing::Test {
 protected:
  // A running 2-node job with one step running on both nodes (--exact,
  // 2 CPUs and GPU 0 on each) and one that completed.
  Job RunningWithSteps() const {
    Job job;
    job.id = 7;
    job.request.uid = 1000;
    job.request.user_name = "alice";
    job.state = JobState::kRunning;
    job.attempt = 1;
    for (NodeId n = 0; n < 2; ++n) {
      job.placement.grants.push_back({.node = n, .cpus = 8, .memory_mb = 1024, .gpus = 0xF});
      job.released.push_back(0);
      job.exited_ok.push_back(0);
    }
    JobStep& done = job.steps.emplace_back();
    done.id = 1;
    done.placement = {.nodes = {{.node_rank = 0, .tasks = 1, .cpus = 8, .gpus = 0xF}},
                      .tasks = 1,
                      .sharing = alloc::StepSharing::kWholeNodes};
    done.state = StepState::kCompleted;
    done.ranks_exited = 1;
    done.node_exits = {1};
    done.token = "a1b2";
    done.master_port = 20007;
    done.max_rss_kb = 2048;
    done.cpu_ms = 1500;
    done.start_time = Millis(5000);
    done.end_time = Millis(6000);
    JobStep& running = job.steps.emplace_back();
    running.id = 2;
    running.placement = {.nodes = {{.node_rank = 0, .tasks = 1, .cpus = 2, .gpus = 0x1},
                                   {.node_rank = 1, .tasks = 1, .cpus = 2, .gpus = 0x1}},
                         .tasks = 2,
                         .sharing = alloc::StepSharing::kExact};
    running.start_time = Millis(7000);
    running.ranks_exited = 1;
    running.node_exits = {1, 0};
    running.exit_code = 3;
    running.reason = "a rank on n000 exited with code 3";
    running.stopping = true;
    job.next_step = 3;
    return job;
  }

  v1::JobSpec Spec() const {
    v1::JobSpec spec;
    spec.add_argv("true");
    spec.set_nodes(2);
    return spec;
  }

  testing::Cluster cluster_ = testing::ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build();
};

TEST_F(RecordsTest, AJobsStepsComeBackFromItsRecordAsTheyWere) {
  const Job job = RunningWithSteps();
  const v1::JobRecord record = ToRecord(job, Spec(), cluster_.topology);
  ASSERT_EQ(record.steps_size(), 2);
  absl::StatusOr<Job> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->next_step, 3);
  ASSERT_EQ(back->steps.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const JobStep& was = job.steps[i];
    const JobStep& is = back->steps[i];
    EXPECT_EQ(is.id, was.id);
    EXPECT_EQ(is.placement.nodes, was.placement.nodes);
    EXPECT_EQ(is.placement.tasks, was.placement.tasks);
    EXPECT_EQ(is.placement.sharing, was.placement.sharing);
    EXPECT_EQ(is.state, was.state);
    EXPECT_EQ(is.start_time, was.start_time);
    EXPECT_EQ(is.end_time, was.end_time);
    EXPECT_EQ(is.ranks_exited, was.ranks_exited);
    EXPECT_EQ(is.node_exits, was.node_exits);
    EXPECT_EQ(is.reason, was.reason);
    EXPECT_EQ(is.token, was.token);
    EXPECT_EQ(is.master_port, was.master_port);
    EXPECT_EQ(is.max_rss_kb, was.max_rss_kb);
    EXPECT_EQ(is.cpu_ms, was.cpu_ms);
    EXPECT_EQ(is.exit_code, was.exit_code);
    EXPECT_EQ(is.stopping, was.stopping);
    EXPECT_EQ(is.cancelled, was.cancelled);
  }
}

TEST_F(RecordsTest, AnOlderRecordWithoutStepsNumbersTheFirstStepOne) {
  Job job = RunningWithSteps();
  job.steps.clear();
  v1::JobRecord record = ToRecord(job, Spec(), cluster_.topology);
  record.clear_next_step();
  absl::StatusOr<Job> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->next_step, 1);
  EXPECT_TRUE(back->steps.empty());
}

TEST_F(RecordsTest, ABatchJobsStepsAreNumberedFromZero) {
  Job job = RunningWithSteps();
  job.request.launch = JobLaunch::kBatchScript;
  job.steps[0].id = 0;
  job.steps[1].id = 1;
  job.next_step = 2;
  v1::JobSpec spec = Spec();
  spec.clear_argv();
  spec.set_script("#!/bin/sh\nsrun hostname\n");
  absl::StatusOr<Job> back =
      FromRecord(ToRecord(job, spec, cluster_.topology), cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(IsBatch(*back));
  EXPECT_EQ(back->steps[0].id, 0);
  EXPECT_EQ(back->next_step, 2);
  // The same steps in a job run as every rank cannot be: its step 0 is its
  // own launch.
  EXPECT_FALSE(FromRecord(ToRecord(job, Spec(), cluster_.topology), cluster_.topology).ok());
}

TEST_F(RecordsTest, StepsNoEngineCouldHaveMadeAreRefusedWithTheJobAndStep) {
  Job job = RunningWithSteps();
  // A second running step on GPU 0 of node rank 1.
  JobStep& twice = job.steps.emplace_back(job.steps.back());
  twice.id = 3;
  twice.placement.nodes.erase(twice.placement.nodes.begin());
  job.next_step = 4;
  absl::StatusOr<Job> back =
      FromRecord(ToRecord(job, Spec(), cluster_.topology), cluster_.topology);
  EXPECT_EQ(back.status().message(),
            "job 7: step 3: it holds on node rank 1 what the allocation does not have free");
  v1::JobRecord record = ToRecord(RunningWithSteps(), Spec(), cluster_.topology);
  record.mutable_steps(0)->set_state(9);
  EXPECT_EQ(FromRecord(record, cluster_.topology).status().message(),
            "job 7: step 1 has state 9, sharing 0 and next step 3, which no step can have");
  record = ToRecord(RunningWithSteps(), Spec(), cluster_.topology);
  record.mutable_steps(1)->mutable_nodes(1)->set_node_rank(5);
  EXPECT_EQ(FromRecord(record, cluster_.topology).status().message(),
            "job 7: step 2: it holds on node rank 5 what the allocation does not have free");
}

}  // namespace
}  // namespace cohort::controller
