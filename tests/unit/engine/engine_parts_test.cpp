// SPDX-License-Identifier: Apache-2.0
// The engine's parts (src/), each built alone from the parts below it, as
// src/engine/engine_core.h layers them: job book, pass triggers and steps; the
// prioritizer; lifecycle; admission, preemption and the node book; the
// planner. No
// test here builds the facade (engine_test.cpp does that).
#include <signal.h>

#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "cohort/engine/engine_types.h"
#include "engine/admission.h"
#include "engine/engine_support.h"
#include "engine/job_book.h"
#include "engine/lifecycle.h"
#include "engine/node_book.h"
#include "engine/pass_planner.h"
#include "engine/pass_triggers.h"
#include "engine/preemption.h"
#include "engine/prioritizer.h"
#include "engine/steps.h"
#include "test_support.h"

namespace cohort::engine {
namespace {

using testing::ClusterBuilder;

constexpr Millis kT0{1'000'000};

std::uint64_t CountOf(const PassTriggers& triggers, Trigger trigger) {
  return triggers.Counts()[static_cast<std::size_t>(trigger)];
}

// A pending job of `nodes` whole nodes with 2 ranks each, as Admission
// would resolve it (or as a test adds it to a book directly).
Job PendingJob(JobId id, int nodes) {
  Job job;
  job.id = id;
  job.request.name = "train";
  job.request.user_name = "alice";
  job.request.uid = 1000;
  job.request.nodes = nodes;
  job.request.tasks_per_node = 2;
  job.gang.nodes = nodes;
  job.gang.tasks_per_node = 2;
  job.time_limit = std::chrono::minutes(10);
  job.submit_time = kT0;
  job.wait.eligible_time = kT0;
  return job;
}

// ---- The bottom: pass triggers and the job book, each alone. ----

TEST(PassTriggersTest, ASubmissionCallsForASubmissionPassOnly) {
  PassTriggers triggers;
  triggers.PassBegun();
  triggers.FullPassBegun();
  EXPECT_FALSE(triggers.PassNeeded());
  triggers.Submitted(PendingJob(7, 1));
  EXPECT_TRUE(triggers.PassNeeded());
  EXPECT_FALSE(triggers.FullPassNeeded());
  EXPECT_EQ(triggers.SubmittedJobs(), std::vector<JobId>{7});
  EXPECT_EQ(CountOf(triggers, Trigger::kSubmitted), 1U);
  triggers.PassBegun();
  EXPECT_FALSE(triggers.PassNeeded());
  EXPECT_TRUE(triggers.SubmittedJobs().empty());
}

TEST(PassTriggersTest, AReleaseCallsForAReleasePassUnlessOthersDependOnTheJob) {
  PassTriggers triggers;
  triggers.FullPassBegun();
  triggers.Released(PendingJob(3, 1), 5);
  EXPECT_TRUE(triggers.AnyReleased());
  EXPECT_FALSE(triggers.FullPassNeeded());
  EXPECT_EQ(triggers.ReleasedNodes(), std::vector<NodeId>{5});

  // Job 9 waits for job 3 (afterany:3): its end calls for a full pass.
  Job waiting = PendingJob(9, 1);
  waiting.wait.dependency_left.terms.push_back({DependencyType::kAfterAny, 3});
  triggers.PassBegun();
  triggers.Submitted(waiting);
  triggers.PassBegun();
  EXPECT_TRUE(triggers.IsDependencyTarget(PendingJob(3, 1)));
  triggers.Released(PendingJob(3, 1), 5);
  EXPECT_TRUE(triggers.FullPassNeeded());
  EXPECT_FALSE(triggers.AnyReleased());
  EXPECT_EQ(CountOf(triggers, Trigger::kDependency), 1U);
  triggers.ForgetDependencies();
  EXPECT_FALSE(triggers.IsDependencyTarget(PendingJob(3, 1)));
}

TEST(PassTriggersTest, EveryOtherTriggerCallsForAFullPassAndIsCounted) {
  PassTriggers triggers;
  for (std::size_t i = 0; i < kTriggerCount; ++i) {
    const auto trigger = static_cast<Trigger>(i);
    if (trigger == Trigger::kSubmitted || trigger == Trigger::kReleased) continue;
    triggers.FullPassBegun();
    triggers.Note(trigger);
    EXPECT_TRUE(triggers.FullPassNeeded()) << TriggerName(trigger);
    EXPECT_EQ(CountOf(triggers, trigger), 1U) << TriggerName(trigger);
    EXPECT_NE(TriggerName(trigger), "unknown");
  }
}

TEST(PassTriggersTest, ABeginTimeCallsForAFullPassWhenItComes) {
  PassTriggers triggers;
  triggers.FullPassBegun();
  triggers.WakeAt(kT0 + Millis(500));
  triggers.Tick(kT0);
  EXPECT_FALSE(triggers.PassNeeded());
  triggers.Tick(kT0 + Millis(500));
  EXPECT_TRUE(triggers.FullPassNeeded());
  EXPECT_EQ(CountOf(triggers, Trigger::kBeginTime), 1U);
  triggers.Tick(kT0 + Millis(900));  // once
  EXPECT_EQ(CountOf(triggers, Trigger::kBeginTime), 1U);
}

TEST(JobBookTest, KnowsWhichJobsHoldEachNode) {
  JobBook book;
  EXPECT_TRUE(book.JobsOn(3).empty());
  book.Holds(3, 10);
  book.Holds(3, 11);
  book.Holds(0, 10);
  EXPECT_EQ(book.JobsOn(3), (std::set<JobId>{10, 11}));
  book.LetGo(3, 10);
  EXPECT_EQ(book.JobsOn(3), std::set<JobId>{11});
  book.LetGo(42, 10);  // a node it never held: nothing
  EXPECT_EQ(book.JobsOn(0), std::set<JobId>{10});
}

TEST(JobBookTest, MovesAJobBetweenItsIndexesOnlyThroughSetState) {
  JobBook book;
  Effects effects;
  Job& job = book.Add(PendingJob(book.TakeId(), 2), JobSubstate::kNone, effects);
  EXPECT_EQ(book.Pending().size(), 1U);
  book.SetState(job, {JobState::kRunning, JobSubstate::kNone}, JobEvent::kAllocated, effects);
  EXPECT_TRUE(book.Pending().empty());
  EXPECT_EQ(book.Active().size(), 1U);
  ASSERT_EQ(effects.transitions.size(), 2U);  // added, then started
  EXPECT_TRUE(book.CheckIndexes().ok()) << book.CheckIndexes();
}

// ---- Lifecycle over the bottom parts, and what rests on it. ----

class PartsTest : public ::testing::Test {
 protected:
  PartsTest()
      : cluster_(ClusterBuilder().Leaves(2).NodesPerLeaf(2).Build()),
        config_(Config(cluster_)),
        plugins_(plugin::MakePlugins(config_.plugins).value()),
        allocator_(cluster_.topology, plugins_.allocator),
        priority_(config_, cluster_.topology, plugins_.queue_order),
        life_({cluster_.topology, cluster_.pool, book_, triggers_, priority_, imex_}) {
    for (NodeId n = 0; n < cluster_.topology.NodeCount(); ++n) {
      cluster_.pool.SetCondition(n, alloc::NodeCondition::kUp);
    }
  }

  static config::ClusterConfig Config(const testing::Cluster& cluster) {
    config::ClusterConfig config;
    config.nodes = cluster.nodes;
    config::PartitionSpec all;
    all.name = "all";
    all.is_default = true;
    all.nodes = cluster.topology.NodeNames();
    config.partitions = {all};
    config.qos.push_back({});
    config.qos.back().name = config.default_qos;
    return config;
  }

  // A pending job of `nodes` nodes in the book.
  Job& Queue(int nodes) {
    Effects effects;
    return book_.Add(PendingJob(book_.TakeId(), nodes), JobSubstate::kNone, effects);
  }

  // Starts `job` on the first `nodes` nodes.
  void StartOn(Job& job, Effects& effects) {
    const alloc::PlacementResult placed = allocator_.Place(job.gang, cluster_.pool);
    ASSERT_EQ(placed.outcome, alloc::Outcome::kPlaced) << placed.reason;
    life_.Start(job, placed.placement, kT0, effects);
  }

  testing::Cluster cluster_;
  config::ClusterConfig config_;
  plugin::PluginSet plugins_;
  alloc::GangAllocator allocator_;
  JobBook book_;
  PassTriggers triggers_;
  Prioritizer priority_;
  alloc::ChannelPool imex_;
  Lifecycle life_;
};

TEST_F(PartsTest, LifecycleStartsAGangOnItsNodesAndReleasesThemAtTheEnd) {
  Job& job = Queue(2);
  Effects effects;
  StartOn(job, effects);
  EXPECT_EQ(job.state, JobState::kRunning);
  const NodeId first = job.run.placement.grants[0].node;
  EXPECT_EQ(book_.JobsOn(first), std::set<JobId>{job.id});
  EXPECT_EQ(
      std::count_if(effects.commands.begin(), effects.commands.end(),
                    [](const Command& c) { return std::holds_alternative<LaunchCommand>(c); }),
      2);
  // Every rank exits 0, then each node lets go.
  for (const alloc::NodeGrant& g : job.run.placement.grants) {
    life_.CountOk(job, NodeRankOf(job, g.node), 2, kT0, effects);
  }
  EXPECT_EQ(job.state, JobState::kCompleting);
  triggers_.PassBegun();
  for (const alloc::NodeGrant& g : job.run.placement.grants) {
    life_.JobReleased(job.id, g.node, kT0, effects);
  }
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_TRUE(book_.JobsOn(first).empty());
  EXPECT_TRUE(cluster_.pool.IsIdle(first));
  EXPECT_EQ(triggers_.ReleasedNodes().size(), 2U);
  EXPECT_EQ(CountOf(triggers_, Trigger::kReleased), 2U);
}

TEST_F(PartsTest, LifecycleAsksTheHookAboutASignalledExitBeforeFailingTheJob) {
  Job& job = Queue(1);
  Effects effects;
  StartOn(job, effects);
  const NodeId node = job.run.placement.grants[0].node;
  int asked = 0;
  life_.OnSignalledExit([&](Job&, NodeId, int signal, Millis, Effects&) {
    ++asked;
    return signal == SIGUSR2;  // "this one was ours"
  });
  life_.RankExited(job.id, node, 0, SIGUSR2, kT0, effects);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(job.state, JobState::kRunning);
  life_.RankExited(job.id, node, 0, SIGKILL, kT0, effects);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(job.state, JobState::kCompleting);
  EXPECT_EQ(job.run.cause, EndCause::kRankFailed);
}

TEST_F(PartsTest, LifecycleEndsAJobAtItsTimeLimitAndLeavesAVictimsGraceToPreemption) {
  Job& job = Queue(1);
  Effects effects;
  StartOn(job, effects);
  life_.Tick(kT0 + Millis(1000), effects);
  EXPECT_EQ(job.state, JobState::kRunning);
  life_.Tick(kT0 + ToMillis(job.time_limit), effects);
  EXPECT_EQ(job.state, JobState::kCompleting);
  EXPECT_EQ(job.run.cause, EndCause::kTimeLimit);

  Job& victim = Queue(1);
  StartOn(victim, effects);
  book_.SetState(victim, {JobState::kRunning, JobSubstate::kPreempting}, JobEvent::kPreemptWarned,
                 effects);
  victim.preemption.deadline = kT0 + Millis(10);
  life_.Tick(kT0 + Millis(20), effects);
  EXPECT_EQ(victim.sub, JobSubstate::kPreempting);  // Preemption::Tick stops it, not Lifecycle
}

TEST_F(PartsTest, ThePrioritizerRanksLargerJobsFirstAndChargesWhatRan) {
  Job& small = Queue(1);
  Job& large = Queue(4);
  const std::vector<Job*> jobs{&small, &large};
  priority_.Rank(jobs, book_, kT0);
  EXPECT_GT(large.cache.priority, small.cache.priority);  // multifactor's size factor

  Effects effects;
  StartOn(small, effects);
  EXPECT_EQ(priority_.Usage().UserUsage("", "alice", kT0), 0.0);
  priority_.Charge(small, kT0 + std::chrono::hours(1));
  EXPECT_GT(priority_.Usage().UserUsage("", "alice", kT0 + std::chrono::hours(1)), 0.0);
}

TEST_F(PartsTest, StepsRunInsideAJobsAllocationAndEndWithIt) {
  Job& job = Queue(2);
  Effects effects;
  StartOn(job, effects);
  alloc::StepRequest request;
  request.nodes = 1;
  request.tasks = 1;
  const absl::StatusOr<int> step = Steps::Start(job, request, kT0, effects);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(Steps::RunningOn(job, job.run.steps.back().placement.nodes.front().node_rank),
            std::vector<int>{*step});
  Steps::EndWithJob(job, kT0);
  EXPECT_EQ(job.run.steps.back().state, StepState::kCancelled);
  EXPECT_TRUE(Steps::RunningOn(job, 0).empty());
}

TEST_F(PartsTest, AdmissionRefusesAnUnknownPartitionAndWakesAPassAtABeginTime) {
  const std::vector<std::shared_ptr<const plugin::AdmissionCheck>> checks;
  const ReservationBook reservations;
  Admission admission({config_, cluster_.topology, cluster_.pool, checks, book_, triggers_, life_,
                       priority_.Usage(), reservations});
  JobRequest request;
  request.nodes = 1;
  request.tasks_per_node = 1;
  request.user_name = "alice";
  request.uid = 1000;
  request.partition = "gpu";
  const absl::StatusOr<Job> refused = admission.Resolve(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no partition \"gpu\""), std::string::npos);

  request.partition.clear();
  request.begin = kT0 + std::chrono::minutes(5);
  absl::StatusOr<Job> resolved = admission.Resolve(request);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  resolved->id = book_.TakeId();
  Effects effects;
  Job& job = book_.Add(*std::move(resolved), JobSubstate::kNone, effects);
  PassCounts counts;
  EXPECT_FALSE(admission.Eligible(job, counts, kT0, effects));
  EXPECT_EQ(job.wait.reason, PendingReason::kBeginTime);
  triggers_.FullPassBegun();
  triggers_.Tick(kT0 + std::chrono::minutes(5));
  EXPECT_EQ(CountOf(triggers_, Trigger::kBeginTime), 1U);
  EXPECT_TRUE(triggers_.FullPassNeeded());
}

TEST_F(PartsTest, PreemptionStopsAVictimAtTheEndOfItsGraceTime) {
  config_.preempt_mode = config::PreemptMode::kCancel;
  Preemption preemption(
      {config_, cluster_.topology, cluster_.pool, allocator_, book_, triggers_, priority_, life_});
  Job& victim = Queue(1);
  Effects effects;
  StartOn(victim, effects);
  book_.SetState(victim, {JobState::kRunning, JobSubstate::kPreempting}, JobEvent::kPreemptWarned,
                 effects);
  victim.preemption.deadline = kT0 + Millis(100);
  victim.preemption.records.emplace_back();  // what Preemption's warning records
  preemption.Tick(kT0 + Millis(99), effects);
  EXPECT_EQ(victim.sub, JobSubstate::kPreempting);
  preemption.Tick(kT0 + Millis(100), effects);
  EXPECT_EQ(victim.state, JobState::kCompleting);
  EXPECT_NE(
      victim.preemption.records.back().detail.find("stopped at the end of its 60 s grace time"),
      std::string::npos)
      << victim.preemption.records.back().detail;
}

TEST_F(PartsTest, TheNodeBookRequeuesTheJobsOfALostNodeAndCallsForAPassWhenOneComesUp) {
  NodeBook nodes({config_, cluster_.topology, cluster_.pool, book_, triggers_, life_});
  NodeReport report;
  report.cpus = 64;
  report.gpus = 8;
  report.memory_mb = 1024 * 1024;
  Effects effects;
  for (NodeId n = 0; n < cluster_.topology.NodeCount(); ++n) {
    ASSERT_TRUE(nodes.Registered(n, report, kT0, effects).ok());
  }
  EXPECT_EQ(CountOf(triggers_, Trigger::kNodeUp),
            static_cast<std::uint64_t>(cluster_.topology.NodeCount()));
  Job& job = Queue(1);
  job.request.requeue = true;
  StartOn(job, effects);
  const NodeId node = job.run.placement.grants[0].node;
  nodes.Lost(node, "no heartbeat", kT0, effects);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.wait.reason, PendingReason::kRequeued);
  EXPECT_TRUE(book_.JobsOn(node).empty());
  EXPECT_EQ(nodes.View(node).status, NodeStatus::kDown);
  EXPECT_EQ(CountOf(triggers_, Trigger::kRequeued), 1U);
}

TEST_F(PartsTest, ThePlannerStartsWhatFitsAndSaysWhichPassItRan) {
  const std::vector<std::shared_ptr<const plugin::AdmissionCheck>> checks;
  const ReservationBook reservations;
  Admission admission({config_, cluster_.topology, cluster_.pool, checks, book_, triggers_, life_,
                       priority_.Usage(), reservations});
  Preemption preemption(
      {config_, cluster_.topology, cluster_.pool, allocator_, book_, triggers_, priority_, life_});
  PassPlanner planner({config_, cluster_.pool, allocator_, book_, triggers_, priority_, life_,
                       admission, preemption, reservations, cluster_.topology});
  // Each takes its nodes' every GPU: they cannot share one.
  const auto whole_nodes = [](Job& job) { job.gang.gpus_per_node = 8; };
  Job& small = Queue(2);
  book_.Reindex(small, whole_nodes);
  Job& large = Queue(4);
  book_.Reindex(large, whole_nodes);
  triggers_.Submitted(small);
  triggers_.Submitted(large);
  Effects effects;
  planner.Schedule(kT0, effects);
  EXPECT_EQ(planner.LastPassKind(), "full");  // nothing has been ordered yet
  // Multifactor's size factor puts the larger job first: it takes the
  // four nodes, and the other waits.
  EXPECT_EQ(large.state, JobState::kRunning);
  EXPECT_EQ(small.state, JobState::kPending);
  EXPECT_FALSE(triggers_.PassNeeded());
  EXPECT_EQ(planner.PendingOrder(), std::vector<JobId>{small.id});
  EXPECT_TRUE(book_.CheckIndexes().ok()) << book_.CheckIndexes();
}

}  // namespace
}  // namespace cohort::engine
