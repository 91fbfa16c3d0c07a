// SPDX-License-Identifier: Apache-2.0
// The controller's durable job records (daemons/controller/store/records.cpp):
// what a job and its steps become in the store and back.
#include <cstddef>

#include <gtest/gtest.h>

#include "cohort/text/dependency.h"
#include "store/records.h"
#include "store/wire.h"
#include "test_support.h"

namespace cohort::controller {
namespace {

// How many fields an aggregate has: the most initializers `T{…}` takes
// (each AnyField becomes whatever its field is).
struct AnyField {
  template <typename T>
  operator T() const;  // NOLINT(google-explicit-constructor): only in unevaluated braces
};
template <typename T, typename... Fields>
consteval std::size_t FieldCount() {
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return FieldCount<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

// A field added to Job or JobStep must be kept by the store or said not to
// be: until then these fail, so that no field is lost at the first
// restart for a line forgotten in FromRecord.
static_assert(FieldCount<Job>() == 41,
              "Job gained or lost a field: keep it in ToRecord and FromRecord "
              "(daemons/controller/store/records.cpp) or list it below as not kept, set it in "
              "AJobComesBackFromItsRecordAsItWas, then count it here");
static_assert(FieldCount<JobStep>() == 16,
              "JobStep gained or lost a field: keep it in StepsToRecord and StepsFromRecord, "
              "set it in AJobComesBackFromItsRecordAsItWas, then count it here");

// Every field of each step of `is` is that of `was`.
void ExpectSameSteps(const std::vector<JobStep>& is, const std::vector<JobStep>& was) {
  ASSERT_EQ(is.size(), was.size());
  for (std::size_t i = 0; i < was.size(); ++i) {
    const JobStep& a = was[i];
    const JobStep& b = is[i];
    EXPECT_EQ(b.id, a.id);
    EXPECT_EQ(b.placement.nodes, a.placement.nodes);
    EXPECT_EQ(b.placement.tasks, a.placement.tasks);
    EXPECT_EQ(b.placement.sharing, a.placement.sharing);
    EXPECT_EQ(b.state, a.state);
    EXPECT_EQ(b.start_time, a.start_time);
    EXPECT_EQ(b.end_time, a.end_time);
    EXPECT_EQ(b.ranks_exited, a.ranks_exited);
    EXPECT_EQ(b.node_exits, a.node_exits);
    EXPECT_EQ(b.exit_code, a.exit_code);
    EXPECT_EQ(b.exit_signal, a.exit_signal);
    EXPECT_EQ(b.reason, a.reason);
    EXPECT_EQ(b.token, a.token);
    EXPECT_EQ(b.master_port, a.master_port);
    EXPECT_EQ(b.max_rss_kb, a.max_rss_kb);
    EXPECT_EQ(b.cpu_ms, a.cpu_ms);
    EXPECT_EQ(b.stopping, a.stopping);
    EXPECT_EQ(b.cancelled, a.cancelled);
  }
}

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

// Every field of a job, set to a value of its own, comes back from its
// record, or is one the record does not keep, for the reason given.
TEST_F(RecordsTest, AJobComesBackFromItsRecordAsItWas) {
  Identity alice;
  alice.uid = 1000;
  alice.user_name = "alice";
  v1::JobSpec spec = Spec();
  spec.set_name("sweep");
  spec.set_array("0-9%2");
  absl::StatusOr<JobRequest> request = RequestFromSpec(spec, alice, 100);
  ASSERT_TRUE(request.ok()) << request.status();
  Job job = RunningWithSteps();  // the steps, and their every field
  job.id = 7;
  job.request = *request;
  job.request.account = "physics";
  job.request.partition = "gpu";
  job.request.qos = "high";
  job.time_limit = std::chrono::seconds(3600);
  job.state = JobState::kRunning;
  job.sub = JobSubstate::kPreempting;
  job.cause = EndCause::kNone;
  job.reason = "Running";
  job.reason_detail = "sent USR1 to every rank";
  job.submit_time = Millis(1000);
  job.start_time = Millis(2000);
  job.end_time = Millis(0);
  job.attempt = 3;
  job.exit_code = 0;
  job.exit_signal = 0;
  job.released = {1, 0};
  job.exited_ok = {2, 1};
  job.master_port = 20123;
  job.warned_attempt = 2;
  job.own_max_rss_kb = 4096;
  job.own_cpu_ms = 777;
  job.qos = "high";
  job.eligible_time = Millis(1500);
  job.array_job_id = 5;
  job.array_task_id = 2;
  job.array_pending = {3, 4};
  job.dependency_left = ParseDependency("afterok:3").value();
  job.preemptions.push_back({.time = Millis(2500),
                             .by_job = 9,
                             .by_display_id = "9",
                             .mode = "REQUEUE",
                             .attempt = 2,
                             .signal = 10,
                             .grace = std::chrono::seconds(60),
                             .detail = "checkpoint done after 3 s"});
  job.preempt_deadline = Millis(3000);
  job.preempted_by = 9;
  // Not kept, each for its reason: the gang, its tier and the pending
  // reason's enum are resolved again at restore (Engine::Restore, from the
  // request and the reason's name); the charge mark, the expected start,
  // the planned nodes, the priority and the fair-share slot are the running
  // engine's own.
  job.gang.nodes = 2;
  job.priority_tier = 1;
  job.pending_reason = PendingReason::kNone;
  job.charged_until = Millis(2600);
  job.expected_start = Millis(0);
  job.planned_nodes.clear();
  job.priority = 12345;
  job.share_slot = 4;

  const v1::JobRecord record = ToRecord(job, spec, cluster_.topology);
  const absl::StatusOr<Job> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, job.id);
  EXPECT_EQ(back->request.name, "sweep");
  EXPECT_EQ(back->request.uid, 1000U);
  EXPECT_EQ(back->request.user_name, "alice");
  EXPECT_EQ(back->request.account, "physics");
  EXPECT_EQ(back->request.partition, "gpu");
  EXPECT_EQ(back->request.qos, "high");
  EXPECT_EQ(back->request.nodes, 2);
  EXPECT_EQ(back->time_limit, job.time_limit);
  EXPECT_EQ(StatusOf(*back), StatusOf(job));
  EXPECT_EQ(back->cause, job.cause);
  EXPECT_EQ(back->reason, job.reason);
  EXPECT_EQ(back->reason_detail, job.reason_detail);
  EXPECT_EQ(back->submit_time, job.submit_time);
  EXPECT_EQ(back->start_time, job.start_time);
  EXPECT_EQ(back->end_time, job.end_time);
  EXPECT_EQ(back->attempt, job.attempt);
  EXPECT_EQ(back->exit_code, job.exit_code);
  EXPECT_EQ(back->exit_signal, job.exit_signal);
  ASSERT_EQ(back->placement.grants.size(), job.placement.grants.size());
  for (std::size_t i = 0; i < job.placement.grants.size(); ++i) {
    EXPECT_EQ(back->placement.grants[i].node, job.placement.grants[i].node);
    EXPECT_EQ(back->placement.grants[i].cpus, job.placement.grants[i].cpus);
    EXPECT_EQ(back->placement.grants[i].memory_mb, job.placement.grants[i].memory_mb);
    EXPECT_EQ(back->placement.grants[i].gpus, job.placement.grants[i].gpus);
  }
  EXPECT_EQ(back->released, job.released);
  EXPECT_EQ(back->exited_ok, job.exited_ok);
  EXPECT_EQ(back->master_port, job.master_port);
  EXPECT_EQ(back->warned_attempt, job.warned_attempt);
  ExpectSameSteps(back->steps, job.steps);
  EXPECT_EQ(back->next_step, job.next_step);
  EXPECT_EQ(back->own_max_rss_kb, job.own_max_rss_kb);
  EXPECT_EQ(back->own_cpu_ms, job.own_cpu_ms);
  EXPECT_EQ(back->qos, job.qos);
  EXPECT_EQ(back->eligible_time, job.eligible_time);
  EXPECT_EQ(back->array_job_id, job.array_job_id);
  EXPECT_EQ(back->array_task_id, job.array_task_id);
  EXPECT_EQ(back->array_pending, job.array_pending);
  EXPECT_EQ(FormatDependency(back->dependency_left), "afterok:3");
  ASSERT_EQ(back->preemptions.size(), 1U);
  EXPECT_EQ(back->preemptions[0].time, job.preemptions[0].time);
  EXPECT_EQ(back->preemptions[0].by_job, 9);
  EXPECT_EQ(back->preemptions[0].by_display_id, "9");
  EXPECT_EQ(back->preemptions[0].mode, "REQUEUE");
  EXPECT_EQ(back->preemptions[0].attempt, 2);
  EXPECT_EQ(back->preemptions[0].signal, 10);
  EXPECT_EQ(back->preemptions[0].grace, std::chrono::seconds(60));
  EXPECT_EQ(back->preemptions[0].detail, job.preemptions[0].detail);
  EXPECT_EQ(back->preempt_deadline, job.preempt_deadline);
  EXPECT_EQ(back->preempted_by, job.preempted_by);

  // A suspended job's time, and an ended job's cause, each in a state that
  // keeps it.
  job.sub = JobSubstate::kSuspended;
  job.preempt_deadline = Millis(0);
  job.suspended_since = Millis(2700);
  const absl::StatusOr<Job> suspended =
      FromRecord(ToRecord(job, spec, cluster_.topology), cluster_.topology);
  ASSERT_TRUE(suspended.ok()) << suspended.status();
  EXPECT_EQ(suspended->sub, JobSubstate::kSuspended);
  EXPECT_EQ(suspended->suspended_since, job.suspended_since);
  job.sub = JobSubstate::kNone;
  job.state = JobState::kCompleting;
  for (const EndCause cause :
       {EndCause::kSuccess, EndCause::kRankFailed, EndCause::kLaunchFailed, EndCause::kCancelled,
        EndCause::kTimeLimit, EndCause::kNodeLost, EndCause::kNodeLostRequeue,
        EndCause::kPreemptRequeue, EndCause::kRequeued}) {
    job.cause = cause;
    const absl::StatusOr<Job> ended =
        FromRecord(ToRecord(job, spec, cluster_.topology), cluster_.topology);
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_EQ(ended->cause, cause);
  }
}

TEST_F(RecordsTest, AJobsStepsComeBackFromItsRecordAsTheyWere) {
  const Job job = RunningWithSteps();
  const v1::JobRecord record = ToRecord(job, Spec(), cluster_.topology);
  ASSERT_EQ(record.steps_size(), 2);
  absl::StatusOr<Job> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->next_step, 3);
  ASSERT_EQ(back->steps.size(), 2u);
  ExpectSameSteps(back->steps, job.steps);
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
  absl::StatusOr<Job> back = FromRecord(ToRecord(job, spec, cluster_.topology), cluster_.topology);
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
