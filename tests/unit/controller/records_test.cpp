// SPDX-License-Identifier: Apache-2.0
// The controller's durable job records (daemons/controller/store/records.cpp):
// what a job and its steps become in the store and back.
#include <cstddef>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "cohort/text/dependency.h"
#include "store/account_records.h"
#include "store/job_record.h"
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

// A field added to Job, to one of its groups or to JobStep must be kept by
// the store or said not to be: until then these fail, so that no field is
// lost at the first restart for a line forgotten in a group's mapping. Keep
// it in the group's mapping (daemons/controller/store/records.cpp) or say
// in EveryField why it is not kept, set it in EveryField, then count it here.
static_assert(FieldCount<Job>() == 18, "Job gained or lost a field: see above");
static_assert(FieldCount<JobRun>() == 21, "JobRun gained or lost a field: see above");
static_assert(FieldCount<JobWait>() == 4, "JobWait gained or lost a field: see above");
static_assert(FieldCount<JobArray>() == 3, "JobArray gained or lost a field: see above");
static_assert(FieldCount<JobPreemption>() == 4, "JobPreemption gained or lost a field: see above");
static_assert(FieldCount<JobCache>() == 5, "JobCache (never kept) gained or lost a field");
static_assert(FieldCount<JobStep>() == 15, "JobStep gained or lost a field: see above");
static_assert(FieldCount<PastAttempt>() == 10, "PastAttempt gained or lost a field: see above");
static_assert(FieldCount<TaskUsage>() == 10, "TaskUsage gained or lost a field: see above");
static_assert(FieldCount<RepairRecord>() == 7, "RepairRecord gained or lost a field: see above");

// Every figure of `is` is that of `was`.
void ExpectSameUsage(const TaskUsage& is, const TaskUsage& was) {
  EXPECT_EQ(is.max_rss_kb, was.max_rss_kb);
  EXPECT_EQ(is.cpu_ms, was.cpu_ms);
  EXPECT_EQ(is.max_cpu_ms, was.max_cpu_ms);
  EXPECT_EQ(is.rss_sum_kb, was.rss_sum_kb);
  EXPECT_EQ(is.ranks, was.ranks);
  EXPECT_EQ(is.gpu_util_max, was.gpu_util_max);
  EXPECT_EQ(is.gpu_util_sum, was.gpu_util_sum);
  EXPECT_EQ(is.gpu_ranks, was.gpu_ranks);
  EXPECT_EQ(is.gpu_mem_max_mb, was.gpu_mem_max_mb);
  EXPECT_EQ(is.gpu_mem_sum_mb, was.gpu_mem_sum_mb);
}

// One rank's usage with a GPU measured, every figure set.
TaskUsage SomeUsage(std::int64_t rss_kb, std::int64_t cpu_ms) {
  TaskUsage usage;
  EXPECT_TRUE(AddRankUsage(usage, {.max_rss_kb = rss_kb,
                                   .cpu_ms = cpu_ms,
                                   .gpu_measured = true,
                                   .gpu_util_ave = 40,
                                   .gpu_util_max = 90,
                                   .gpu_mem_max_mb = 8000,
                                   .gpu_mem_ave_mb = 6000}));
  return usage;
}

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
    ExpectSameUsage(b.usage, a.usage);
    EXPECT_EQ(b.stopping, a.stopping);
    EXPECT_EQ(b.cancelled, a.cancelled);
  }
}

// Every field of the run `is` is that of `was`.
void ExpectSameRun(const JobRun& is, const JobRun& was) {
  EXPECT_EQ(is.cause, was.cause);
  EXPECT_EQ(is.start_time, was.start_time);
  EXPECT_EQ(is.end_time, was.end_time);
  EXPECT_EQ(is.attempt, was.attempt);
  EXPECT_EQ(is.exit_code, was.exit_code);
  EXPECT_EQ(is.exit_signal, was.exit_signal);
  ASSERT_EQ(is.placement.grants.size(), was.placement.grants.size());
  for (std::size_t i = 0; i < was.placement.grants.size(); ++i) {
    EXPECT_EQ(is.placement.grants[i].node, was.placement.grants[i].node);
    EXPECT_EQ(is.placement.grants[i].cpus, was.placement.grants[i].cpus);
    EXPECT_EQ(is.placement.grants[i].memory_mb, was.placement.grants[i].memory_mb);
    EXPECT_EQ(is.placement.grants[i].gpus, was.placement.grants[i].gpus);
  }
  EXPECT_EQ(is.released, was.released);
  EXPECT_EQ(is.exited_ok, was.exited_ok);
  EXPECT_EQ(is.master_port, was.master_port);
  EXPECT_EQ(is.warned_attempt, was.warned_attempt);
  ExpectSameSteps(is.steps, was.steps);
  EXPECT_EQ(is.next_step, was.next_step);
  ExpectSameUsage(is.own_usage, was.own_usage);
  EXPECT_EQ(is.imex_channels, was.imex_channels);
  EXPECT_EQ(is.stopped, was.stopped);
  EXPECT_EQ(is.failure_restarts, was.failure_restarts);
  ASSERT_EQ(is.spares.size(), was.spares.size());
  for (std::size_t i = 0; i < was.spares.size(); ++i) {
    EXPECT_EQ(is.spares[i].node, was.spares[i].node);
    EXPECT_EQ(is.spares[i].cpus, was.spares[i].cpus);
    EXPECT_EQ(is.spares[i].memory_mb, was.spares[i].memory_mb);
    EXPECT_EQ(is.spares[i].gpus, was.spares[i].gpus);
  }
  EXPECT_EQ(is.lost_ranks, was.lost_ranks);
  EXPECT_EQ(is.repair_at, was.repair_at);
  EXPECT_EQ(is.lost_reason, was.lost_reason);
}

// Every field of the other persisted groups of `is` is that of `was`.
void ExpectSameGroups(const Job& is, const Job& was) {
  EXPECT_EQ(is.wait.eligible_time, was.wait.eligible_time);
  EXPECT_EQ(FormatDependency(is.wait.dependency_left), FormatDependency(was.wait.dependency_left));
  EXPECT_EQ(is.array.job_id, was.array.job_id);
  EXPECT_EQ(is.array.task_id, was.array.task_id);
  EXPECT_EQ(is.array.pending, was.array.pending);
  ASSERT_EQ(is.preemption.records.size(), was.preemption.records.size());
  for (std::size_t i = 0; i < was.preemption.records.size(); ++i) {
    const PreemptionRecord& a = was.preemption.records[i];
    const PreemptionRecord& b = is.preemption.records[i];
    EXPECT_EQ(b.time, a.time);
    EXPECT_EQ(b.by_job, a.by_job);
    EXPECT_EQ(b.by_display_id, a.by_display_id);
    EXPECT_EQ(b.mode, a.mode);
    EXPECT_EQ(b.attempt, a.attempt);
    EXPECT_EQ(b.signal, a.signal);
    EXPECT_EQ(b.grace, a.grace);
    EXPECT_EQ(b.detail, a.detail);
  }
  EXPECT_EQ(is.preemption.deadline, was.preemption.deadline);
  EXPECT_EQ(is.preemption.by, was.preemption.by);
  EXPECT_EQ(is.preemption.suspended_since, was.preemption.suspended_since);
  EXPECT_EQ(is.wait.restart_after, was.wait.restart_after);
  ASSERT_EQ(is.past_attempts.size(), was.past_attempts.size());
  for (std::size_t i = 0; i < was.past_attempts.size(); ++i) {
    const PastAttempt& a = was.past_attempts[i];
    const PastAttempt& b = is.past_attempts[i];
    EXPECT_EQ(b.attempt, a.attempt);
    EXPECT_EQ(b.cause, a.cause);
    EXPECT_EQ(b.start_time, a.start_time);
    EXPECT_EQ(b.end_time, a.end_time);
    EXPECT_EQ(b.nodes, a.nodes);
    EXPECT_EQ(b.exit_code, a.exit_code);
    EXPECT_EQ(b.exit_signal, a.exit_signal);
    EXPECT_EQ(b.reason, a.reason);
    ExpectSameUsage(b.own_usage, a.own_usage);
    ExpectSameSteps(b.steps, a.steps);
  }
  ASSERT_EQ(is.repairs.size(), was.repairs.size());
  for (std::size_t i = 0; i < was.repairs.size(); ++i) {
    const RepairRecord& a = was.repairs[i];
    const RepairRecord& b = is.repairs[i];
    EXPECT_EQ(b.time, a.time);
    EXPECT_EQ(b.attempt, a.attempt);
    EXPECT_EQ(b.lost, a.lost);
    EXPECT_EQ(b.replacement, a.replacement);
    EXPECT_EQ(b.node_ranks, a.node_ranks);
    EXPECT_EQ(b.reason, a.reason);
    EXPECT_EQ(b.restarted, a.restarted);
  }
}

// `record` as a controller of schema version 3 wrote it: the groups' fields
// in the record itself.
v1::JobRecord AsVersionThree(v1::JobRecord record) {
  const v1::JobRunRecord run = record.run();
  record.set_legacy_cause(run.cause());
  record.set_legacy_start_time_ms(run.start_time_ms());
  record.set_legacy_end_time_ms(run.end_time_ms());
  record.set_legacy_attempt(run.attempt());
  record.set_legacy_exit_code(run.exit_code());
  record.set_legacy_exit_signal(run.exit_signal());
  *record.mutable_legacy_grants() = run.grants();
  record.set_legacy_master_port(run.master_port());
  record.set_legacy_warned_attempt(run.warned_attempt());
  *record.mutable_legacy_steps() = run.steps();
  record.set_legacy_next_step(run.next_step());
  record.set_legacy_own_max_rss_kb(run.own_max_rss_kb());
  record.set_legacy_own_cpu_ms(run.own_cpu_ms());
  record.set_legacy_eligible_time_ms(record.wait().eligible_time_ms());
  record.set_legacy_dependency_left(record.wait().dependency_left());
  record.set_legacy_array_job_id(record.array().job_id());
  record.set_legacy_array_task_id(record.array().task_id());
  *record.mutable_legacy_array_pending() = record.array().pending();
  *record.mutable_legacy_preemptions() = record.preemption().records();
  record.set_legacy_preempt_deadline_ms(record.preemption().deadline_ms());
  record.set_legacy_preempted_by(record.preemption().by());
  record.set_legacy_suspended_since_ms(record.preemption().suspended_since_ms());
  record.clear_run();
  record.clear_wait();
  record.clear_array();
  record.clear_preemption();
  return record;
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
    JobStatusForTests::Set(job, {JobState::kRunning, JobSubstate::kNone});
    job.run.attempt = 1;
    for (NodeId n = 0; n < 2; ++n) {
      job.run.placement.grants.push_back({.node = n, .cpus = 8, .memory_mb = 1024, .gpus = 0xF});
      job.run.released.push_back(0);
      job.run.exited_ok.push_back(0);
    }
    JobStep& done = job.run.steps.emplace_back();
    done.id = 1;
    done.placement = {.nodes = {{.node_rank = 0, .tasks = 1, .cpus = 8, .gpus = 0xF}},
                      .tasks = 1,
                      .sharing = alloc::StepSharing::kWholeNodes};
    done.state = StepState::kCompleted;
    done.ranks_exited = 1;
    done.node_exits = {1};
    done.token = "a1b2";
    done.master_port = 20007;
    done.usage = {.max_rss_kb = 2048,
                  .cpu_ms = 1500,
                  .max_cpu_ms = 900,
                  .rss_sum_kb = 3000,
                  .ranks = 2,
                  .gpu_util_max = 97,
                  .gpu_util_sum = 150,
                  .gpu_ranks = 2,
                  .gpu_mem_max_mb = 40000,
                  .gpu_mem_sum_mb = 61000};
    done.start_time = Millis(5000);
    done.end_time = Millis(6000);
    JobStep& running = job.run.steps.emplace_back();
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
    job.run.next_step = 3;
    return job;
  }

  v1::JobSpec Spec() const {
    v1::JobSpec spec;
    spec.add_argv("true");
    spec.set_nodes(2);
    return spec;
  }

  // Every field of every group set to a value of its own (a running
  // victim in its grace time).
  Job EveryField() const {
    Identity alice;
    alice.uid = 1000;
    alice.user_name = "alice";
    Job job = RunningWithSteps();  // the steps, and their every field
    job.id = 7;
    job.request = RequestFromSpec(EveryFieldSpec(), alice, 100).value();
    job.request.account = "physics";
    job.request.partition = "gpu";
    job.request.qos = "high";
    job.time_limit = std::chrono::seconds(3600);
    job.qos = "high";
    job.submit_time = Millis(1000);
    JobStatusForTests::Set(job, {JobState::kRunning, JobSubstate::kPreempting});
    job.reason = "Running";
    job.reason_detail = "sent USR1 to every rank";
    job.run.cause = EndCause::kNone;
    job.run.start_time = Millis(2000);
    job.run.end_time = Millis(0);
    job.run.attempt = 3;
    job.run.exit_code = 0;
    job.run.exit_signal = 0;
    job.run.released = {1, 0};
    job.run.exited_ok = {2, 1};
    job.run.master_port = 20123;
    job.run.warned_attempt = 2;
    job.run.own_usage = SomeUsage(4096, 777);
    job.run.imex_channels = {7};
    job.run.stopped = true;
    job.run.failure_restarts = 1;
    job.run.spares = {{.node = 1, .cpus = 4, .memory_mb = 512, .gpus = 0, .holds_group = false}};
    job.run.lost_ranks = {0};
    job.run.repair_at = Millis(2700);
    job.run.lost_reason = "node n001 was lost: not responding";
    job.repairs.push_back({.time = Millis(1300),
                           .attempt = 2,
                           .lost = {"n003"},
                           .replacement = {"n002"},
                           .node_ranks = {0},
                           .reason = "node n003 was lost: its agent stopped",
                           .restarted = "the batch script again as attempt 2"});
    job.past_attempts.push_back({.attempt = 2,
                                 .cause = EndCause::kNodeLostRequeue,
                                 .start_time = Millis(1200),
                                 .end_time = Millis(1400),
                                 .nodes = {"n002", "n001"},
                                 .exit_code = 1,
                                 .exit_signal = 9,
                                 .reason = "node n002 was lost: not responding",
                                 .own_usage = SomeUsage(2048, 55),
                                 .steps = job.run.steps});
    job.wait.eligible_time = Millis(1500);
    job.wait.restart_after = Millis(1450);
    job.wait.dependency_left = ParseDependency("afterok:3").value();
    job.array = {.job_id = 5, .task_id = 2, .pending = {3, 4}};
    job.preemption.records.push_back({.time = Millis(2500),
                                      .by_job = 9,
                                      .by_display_id = "9",
                                      .mode = "REQUEUE",
                                      .attempt = 2,
                                      .signal = 10,
                                      .grace = std::chrono::seconds(60),
                                      .detail = "checkpoint done after 3 s"});
    job.preemption.deadline = Millis(3000);
    job.preemption.by = 9;
    // Not kept, each for its reason: the gang, its tier and the pending
    // reason's enum are resolved again at restore (Engine::Restore, from
    // the request and the reason's name); the caches are the running
    // engine's own.
    job.gang.nodes = 2;
    job.priority_tier = 1;
    job.wait.reason = PendingReason::kNone;
    job.cache = {.charged_until = Millis(2600),
                 .expected_start = Millis(0),
                 .planned_nodes = {},
                 .priority = 12345,
                 .share_slot = 4};
    return job;
  }

  v1::JobSpec EveryFieldSpec() const {
    v1::JobSpec spec = Spec();
    spec.set_name("sweep");
    spec.set_array("0-9%2");
    spec.set_spares(1);
    spec.set_restart_policy("step");
    return spec;
  }

  // `job`, through its record and back: what a restart gives the engine.
  absl::StatusOr<SavedJob> Again(const Job& job, const v1::JobSpec& spec) const {
    return FromRecord(ToRecord(job, spec, cluster_.topology), cluster_.topology);
  }

  cohort::testing::Cluster cluster_ =
      cohort::testing::ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build();
};

// Every field of a job, set to a value of its own, comes back from its
// record, or is one the record does not keep, for the reason given.
TEST_F(RecordsTest, AJobComesBackFromItsRecordAsItWas) {
  Job job = EveryField();
  const absl::StatusOr<SavedJob> back = Again(job, EveryFieldSpec());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job.id, job.id);
  EXPECT_EQ(back->job.request.name, "sweep");
  EXPECT_EQ(back->job.request.uid, 1000U);
  EXPECT_EQ(back->job.request.user_name, "alice");
  EXPECT_EQ(back->job.request.account, "physics");
  EXPECT_EQ(back->job.request.partition, "gpu");
  EXPECT_EQ(back->job.request.qos, "high");
  EXPECT_EQ(back->job.request.nodes, 2);
  EXPECT_EQ(back->job.request.spares, 1);
  EXPECT_EQ(back->job.request.restart_policy, RestartPolicy::kStep);
  EXPECT_EQ(back->job.time_limit, job.time_limit);
  EXPECT_EQ(back->job.qos, job.qos);
  EXPECT_EQ(back->job.submit_time, job.submit_time);
  EXPECT_EQ(back->status, StatusOf(job));
  EXPECT_EQ(back->job.reason, job.reason);
  EXPECT_EQ(back->job.reason_detail, job.reason_detail);
  ExpectSameRun(back->job.run, job.run);
  ExpectSameGroups(back->job, job);

  // A suspended job's time, and an ended job's cause, each in a state that
  // keeps it.
  JobStatusForTests::Set(job, {JobState::kRunning, JobSubstate::kSuspended});
  job.preemption.deadline = Millis(0);
  job.preemption.suspended_since = Millis(2700);
  const absl::StatusOr<SavedJob> suspended = Again(job, EveryFieldSpec());
  ASSERT_TRUE(suspended.ok()) << suspended.status();
  EXPECT_EQ(suspended->status.sub, JobSubstate::kSuspended);
  ExpectSameGroups(suspended->job, job);
  JobStatusForTests::Set(job, {JobState::kCompleting, JobSubstate::kNone});
  job.preemption.suspended_since = Millis(0);
  for (const EndCause cause :
       {EndCause::kSuccess, EndCause::kRankFailed, EndCause::kLaunchFailed, EndCause::kCancelled,
        EndCause::kTimeLimit, EndCause::kNodeLost, EndCause::kNodeLostRequeue,
        EndCause::kPreemptRequeue, EndCause::kRequeued}) {
    job.run.cause = cause;
    const absl::StatusOr<SavedJob> ended = Again(job, EveryFieldSpec());
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_EQ(ended->job.run.cause, cause);
  }
}

// A record written before the groups (schema version 3) reads as the same
// job; and no record written now has a field of that shape.
TEST_F(RecordsTest, ARecordOfVersionThreeReadsAsTheSameJob) {
  Job job = EveryField();
  // Values of their own for what a running victim has none of.
  job.run.cause = EndCause::kRankFailed;
  job.run.end_time = Millis(4000);
  job.run.exit_code = 3;
  job.run.exit_signal = 9;
  job.run.imex_channels.clear();  // version 3 had none, nor these
  job.run.stopped = false;
  job.run.failure_restarts = 0;
  job.run.spares.clear();
  job.run.lost_ranks.clear();
  job.run.repair_at = Millis(0);
  job.run.lost_reason.clear();
  job.run.own_usage = {};  // version 3 kept only MaxRSS and TotalCPU of the job's own launch
  job.run.own_usage.max_rss_kb = 4096;
  job.run.own_usage.cpu_ms = 777;
  job.wait.restart_after = Millis(0);
  v1::JobRecord now = ToRecord(job, EveryFieldSpec(), cluster_.topology);
  now.mutable_preemption()->set_suspended_since_ms(2700);  // read only while suspended
  const v1::JobRecord old = AsVersionThree(now);
  // The test sets every field of the old shape, so that a field the
  // upgrade forgets shows.
  const google::protobuf::Descriptor& descriptor = *v1::JobRecord::descriptor();
  const google::protobuf::Reflection& reflection = *v1::JobRecord::GetReflection();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const google::protobuf::FieldDescriptor& field = *descriptor.field(i);
    if (!field.name().starts_with("legacy_")) continue;
    const bool set = field.is_repeated() ? reflection.FieldSize(old, &field) > 0
                                         : reflection.HasField(old, &field);
    EXPECT_TRUE(set) << field.name() << " is not set in the version 3 record";
    const bool set_now = field.is_repeated() ? reflection.FieldSize(now, &field) > 0
                                             : reflection.HasField(now, &field);
    EXPECT_FALSE(set_now) << field.name() << " is written by this version";
  }
  v1::JobRecord read;
  ASSERT_TRUE(ParseJobRecord(old.SerializeAsString(), read));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(read, now))
      << "read:\n"
      << read.DebugString() << "\nwritten now:\n"
      << now.DebugString();
  const absl::StatusOr<SavedJob> back = FromRecord(read, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->status, StatusOf(job));
  ExpectSameRun(back->job.run, job.run);
  ExpectSameGroups(back->job, job);
  // A record of this version is read as it is.
  v1::JobRecord same;
  ASSERT_TRUE(ParseJobRecord(now.SerializeAsString(), same));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(same, now));
}

TEST_F(RecordsTest, AJobsStepsComeBackFromItsRecordAsTheyWere) {
  const Job job = RunningWithSteps();
  const v1::JobRecord record = ToRecord(job, Spec(), cluster_.topology);
  ASSERT_EQ(record.run().steps_size(), 2);
  absl::StatusOr<SavedJob> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job.run.next_step, 3);
  ASSERT_EQ(back->job.run.steps.size(), 2u);
  ExpectSameSteps(back->job.run.steps, job.run.steps);
}

TEST_F(RecordsTest, AnOlderRecordWithoutStepsNumbersTheFirstStepOne) {
  Job job = RunningWithSteps();
  job.run.steps.clear();
  v1::JobRecord record = ToRecord(job, Spec(), cluster_.topology);
  record.mutable_run()->clear_next_step();
  absl::StatusOr<SavedJob> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job.run.next_step, 1);
  EXPECT_TRUE(back->job.run.steps.empty());
}

TEST_F(RecordsTest, ABatchJobsStepsAreNumberedFromZero) {
  Job job = RunningWithSteps();
  job.request.launch = JobLaunch::kBatchScript;
  job.run.steps[0].id = 0;
  job.run.steps[1].id = 1;
  job.run.next_step = 2;
  v1::JobSpec spec = Spec();
  spec.clear_argv();
  spec.set_script("#!/bin/sh\nsrun hostname\n");
  absl::StatusOr<SavedJob> back =
      FromRecord(ToRecord(job, spec, cluster_.topology), cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(IsBatch(back->job));
  EXPECT_EQ(back->job.run.steps[0].id, 0);
  EXPECT_EQ(back->job.run.next_step, 2);
  // The same steps in a job run as every rank cannot be: its step 0 is its
  // own launch.
  EXPECT_FALSE(FromRecord(ToRecord(job, Spec(), cluster_.topology), cluster_.topology).ok());
}

// Most jobs are in no array and never preempted: their records carry no
// message for those groups, read back as the defaults, in either version.
TEST_F(RecordsTest, AJobOutsideArraysAndPreemptionsWritesNoSuchGroups) {
  const Job job = RunningWithSteps();
  const v1::JobRecord record = ToRecord(job, Spec(), cluster_.topology);
  EXPECT_FALSE(record.has_array());
  EXPECT_FALSE(record.has_preemption());
  const absl::StatusOr<SavedJob> back = FromRecord(record, cluster_.topology);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->job.array.job_id, 0);
  EXPECT_EQ(back->job.array.task_id, -1);
  EXPECT_TRUE(back->job.preemption.records.empty());
  v1::JobRecord read;
  ASSERT_TRUE(ParseJobRecord(AsVersionThree(record).SerializeAsString(), read));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(read, record))
      << "read:\n"
      << read.DebugString() << "\nwritten now:\n"
      << record.DebugString();
}

// History shows a finished job from its record alone: its batch step ended
// as the job did, whose status the record keeps apart from the job.
TEST_F(RecordsTest, AFinishedBatchJobsRecordShowsItsBatchStepAsItEnded) {
  Job job = RunningWithSteps();
  job.request.launch = JobLaunch::kBatchScript;
  job.run.steps[0].id = 0;
  job.run.steps[1].id = 1;
  job.run.steps[1].state = StepState::kFailed;
  job.run.next_step = 2;
  job.run.exit_code = 3;
  job.run.end_time = Millis(9000);
  job.reason = "the batch script on n000 exited with code 3";
  JobStatusForTests::Set(job, {JobState::kFailed, JobSubstate::kNone});
  v1::JobSpec spec = Spec();
  spec.clear_argv();
  spec.set_script("#!/bin/sh\nsrun hostname\n");
  v1::Job shown;
  RecordToWire(ToRecord(job, spec, cluster_.topology), cluster_.topology, &shown);
  ASSERT_EQ(shown.steps_size(), 3);
  EXPECT_EQ(shown.steps(0).name(), "batch");
  EXPECT_EQ(shown.steps(0).state(), "FAILED");
  EXPECT_EQ(shown.steps(0).exit_code(), 3);
  EXPECT_EQ(shown.steps(0).end_time_ms(), 9000);
  EXPECT_EQ(shown.steps(0).reason(), job.reason);
  EXPECT_EQ(shown.steps(1).name(), "0");
  EXPECT_EQ(shown.steps(2).state(), "FAILED");
}

TEST_F(RecordsTest, StepsNoEngineCouldHaveMadeAreRefusedWithTheJobAndStep) {
  Job job = RunningWithSteps();
  // A second running step on GPU 0 of node rank 1.
  JobStep& twice = job.run.steps.emplace_back(job.run.steps.back());
  twice.id = 3;
  twice.placement.nodes.erase(twice.placement.nodes.begin());
  job.run.next_step = 4;
  absl::StatusOr<SavedJob> back =
      FromRecord(ToRecord(job, Spec(), cluster_.topology), cluster_.topology);
  EXPECT_EQ(back.status().message(),
            "job 7: step 3: it holds on node rank 1 what the allocation does not have free");
  v1::JobRecord record = ToRecord(RunningWithSteps(), Spec(), cluster_.topology);
  record.mutable_run()->mutable_steps(0)->set_state(9);
  EXPECT_EQ(FromRecord(record, cluster_.topology).status().message(),
            "job 7: step 1 has state 9, sharing 0 and next step 3, which no step can have");
  record = ToRecord(RunningWithSteps(), Spec(), cluster_.topology);
  record.mutable_run()->mutable_steps(1)->mutable_nodes(1)->set_node_rank(5);
  EXPECT_EQ(FromRecord(record, cluster_.topology).status().message(),
            "job 7: step 2: it holds on node rank 5 what the allocation does not have free");
}

// What sacctmgr made of QOS and associations' QOS lists comes back from the
// store as it was.
TEST(AccountRecordsTest, QosAndAssociationsQosListsComeBackAsTheyWere) {
  config::QosSpec qos;
  qos.name = "burst";
  qos.priority = 50;
  qos.max_jobs_per_user = 3;
  qos.max_submit_jobs_per_user = 9;
  qos.max_gpus_per_user = 8;
  qos.max_gpus_per_account = 32;
  qos.max_wall = std::chrono::seconds(5400);
  qos.preempt = {"normal"};
  qos.preempt_mode = config::PreemptMode::kRequeue;
  qos.grace_time = std::chrono::seconds(90);
  qos.preempt_signal = 10;
  qos.allow_accounts = {"vision"};
  qos.allow_users = {"alice"};
  qos.limits.grp_tres.gpus = 16;
  qos.limits.grp_tres_mins.gpus = 6000;
  qos.limits.grp_jobs = 4;
  qos.limits.max_tres_per_job.nodes = 2;
  qos.description = "burst capacity";
  qos.managed = true;
  AccountingState state;
  state.qos = {qos};
  config::AccountSpec& vision = state.accounts.emplace_back();
  vision.name = "vision";
  vision.managed = true;
  vision.limits.qos = {"normal", "burst"};
  vision.limits.default_qos = "normal";
  vision.users = vision.managed_users = {"alice"};
  config::UserAssoc alice;
  alice.user = "alice";
  alice.limits.qos = {"burst"};
  alice.limits.default_qos = "burst";
  vision.user_limits.push_back(alice);
  std::vector<std::string> warnings;
  const AccountingState back = FromRecord(ToRecord(state), warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  ASSERT_EQ(back.qos.size(), 1U);
  const config::QosSpec& q = back.qos[0];
  EXPECT_EQ(q.name, "burst");
  EXPECT_EQ(q.priority, 50);
  EXPECT_EQ(q.max_jobs_per_user, 3);
  EXPECT_EQ(q.max_submit_jobs_per_user, 9);
  EXPECT_EQ(q.max_gpus_per_user, 8);
  EXPECT_EQ(q.max_gpus_per_account, 32);
  EXPECT_EQ(q.max_wall, std::chrono::seconds(5400));
  EXPECT_EQ(q.preempt, qos.preempt);
  EXPECT_EQ(q.preempt_mode, config::PreemptMode::kRequeue);
  EXPECT_EQ(q.grace_time, std::chrono::seconds(90));
  EXPECT_EQ(q.preempt_signal, 10);
  EXPECT_EQ(q.allow_accounts, qos.allow_accounts);
  EXPECT_EQ(q.allow_users, qos.allow_users);
  EXPECT_EQ(q.limits, qos.limits);
  EXPECT_EQ(q.description, "burst capacity");
  EXPECT_TRUE(q.managed);
  ASSERT_EQ(back.accounts.size(), 1U);
  EXPECT_EQ(back.accounts[0].limits, vision.limits);
  ASSERT_EQ(back.accounts[0].user_limits.size(), 1U);
  EXPECT_EQ(back.accounts[0].user_limits[0], vision.user_limits[0]);

  // A field this build refuses is dropped with a warning; the rest stands.
  v1::AccountingRecord record = ToRecord(state);
  record.mutable_qos(0)->set_grp_tres("gres/fpga=2");
  record.mutable_associations(0)->add_qos("no such name!");
  const AccountingState partial = FromRecord(record, warnings);
  EXPECT_EQ(warnings.size(), 2U);
  EXPECT_TRUE(partial.qos[0].limits.grp_tres.Empty());
  EXPECT_EQ(partial.qos[0].limits.grp_jobs, 4);
}

}  // namespace
}  // namespace cohort::controller
