// SPDX-License-Identifier: Apache-2.0
#include "cohort/engine/engine.h"

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace cohort {
namespace {

using testing::ClusterBuilder;

constexpr Millis kT0{1'000'000};

// An engine over a small tree whose nodes have all registered.
class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4)); }

  /// `adjust` changes the configuration once its partition is made.
  void Start(const ClusterBuilder& builder,
             const std::function<void(config::ClusterConfig&)>& adjust = {}) {
    cluster_ = std::make_unique<testing::Cluster>(builder.Build());
    config_.nodes = cluster_->nodes;
    config::PartitionSpec all;
    all.name = "all";
    all.is_default = true;
    all.nodes = cluster_->topology.NodeNames();
    all.max_time = std::chrono::hours(1);
    config_.partitions = {all};
    config_.node_timeout = std::chrono::seconds(30);
    if (adjust) adjust(config_);
    alloc::NodePool pool =
        alloc::NodePool::Create(cluster_->topology, config_.nodes, config_.partitions).value();
    engine_ = std::make_unique<Engine>(config_, cluster_->topology, std::move(pool));
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) Register(n);
  }

  void Register(NodeId n, std::vector<JobId> running = {}) {
    NodeReport report;
    report.cpus = 64;
    report.gpus = 8;
    report.memory_mb = 1024 * 1024;
    for (const JobId id : running) report.running.push_back({id, 0, 0});
    Effects fx;
    ASSERT_TRUE(engine_->NodeRegistered(n, report, now_, fx).ok());
  }

  JobId Submit(int nodes, int gpus = 0, std::uint32_t uid = 1000,
               JobLaunch launch = JobLaunch::kEveryRank) {
    JobRequest r;
    r.name = "train";
    r.user_name = "alice";
    r.uid = uid;
    r.nodes = nodes;
    r.gpus_per_node = gpus;
    r.tasks_per_node = 2;
    r.launch = launch;
    Effects fx;
    absl::StatusOr<JobId> id = engine_->Submit(r, now_, fx);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  Effects Schedule() {
    Effects fx;
    engine_->Schedule(now_, fx);
    EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
    return fx;
  }

  // Plays the agents: every rank of the job on every node exits with `code`,
  // then each node releases.
  void FinishEverywhere(JobId id, int code) {
    const Job& job = *engine_->FindJob(id);
    const std::vector<alloc::NodeGrant> grants = job.run.placement.grants;
    Effects fx;
    for (const alloc::NodeGrant& g : grants) {
      for (int r = 0; r < job.gang.tasks_per_node; ++r)
        engine_->RankExited(id, g.node, code, 0, now_, fx);
    }
    for (const alloc::NodeGrant& g : grants) engine_->JobReleased(id, g.node, now_, fx);
    EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  }

  JobState State(JobId id) const { return engine_->FindJob(id)->state; }
  /// The node at node rank `rank` of a started job.
  NodeId NodeAt(JobId id, int rank) const {
    return engine_->FindJob(id)->run.placement.grants[static_cast<std::size_t>(rank)].node;
  }
  /// Plays one node's agent: `ranks` ranks of the step exit there.
  void StepExits(JobId id, int step, int node_rank, int ranks, int code, int signal, Effects& fx) {
    for (int r = 0; r < ranks; ++r) {
      engine_->StepRankExited(id, step, NodeAt(id, node_rank), code, signal, now_, fx);
    }
  }

  // Every GPU taken by one job, a GPU job waiting behind it, and a CPU job
  // running beside it on the CPUs left.
  struct GpusTaken {
    JobId gpus = 0;
    JobId waiting = 0;
    std::string reason;  ///< the waiting job's
    JobId cpus = 0;
  };
  GpusTaken TakeEveryGpu() {
    GpusTaken out;
    out.gpus = Submit(8, 8);
    Schedule();
    EXPECT_EQ(State(out.gpus), JobState::kRunning);
    out.waiting = Submit(2, 4);
    Schedule();
    EXPECT_EQ(State(out.waiting), JobState::kPending);
    out.reason = engine_->FindJob(out.waiting)->reason;
    out.cpus = Submit(1, 0);
    Schedule();
    EXPECT_EQ(State(out.cpus), JobState::kRunning);
    return out;
  }

  // What a controller restart does: a new engine from what the old one held.
  // No node has registered with the new one yet.
  void Restart() {
    SavedState saved;
    for (const auto& [id, job] : engine_->Jobs()) saved.jobs.push_back({job, StatusOf(job)});
    saved.next_id = engine_->NextId();
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
      saved.nodes.emplace_back(n, engine_->Admin(n));
    }
    saved.partitions = engine_->PartitionOverrides();
    alloc::NodePool pool =
        alloc::NodePool::Create(cluster_->topology, config_.nodes, config_.partitions).value();
    engine_ = std::make_unique<Engine>(config_, cluster_->topology, std::move(pool));
    Effects fx;
    engine_->Restore(std::move(saved), now_, fx);
    EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  }

  void RegisterWith(NodeId n, std::vector<RunningReport> running,
                    std::vector<FinishedReport> finished) {
    NodeReport report;
    report.cpus = 64;
    report.gpus = 8;
    report.memory_mb = 1024 * 1024;
    report.running = std::move(running);
    report.finished = std::move(finished);
    Effects fx;
    ASSERT_TRUE(engine_->NodeRegistered(n, report, now_, fx).ok());
    EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  }

  // A 2-rank-per-node job with a time limit and a --signal warning.
  JobId SubmitWarned(int nodes, TimeWarning warning, std::chrono::seconds limit,
                     bool requeue = false) {
    JobRequest r;
    r.name = "train";
    r.user_name = "alice";
    r.uid = 1000;
    r.nodes = nodes;
    r.tasks_per_node = 2;
    r.time_limit = limit;
    r.warning = warning;
    r.requeue = requeue;
    Effects fx;
    absl::StatusOr<JobId> id = engine_->Submit(r, now_, fx);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  // Time passes to `at`; every node kept its heartbeat.
  Effects TickAt(Millis at) {
    now_ = at;
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) engine_->NodeHeartbeat(n, now_);
    Effects fx;
    engine_->Tick(now_, fx);
    EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
    return fx;
  }

  static std::vector<SignalCommand> Signals(const Effects& fx) {
    std::vector<SignalCommand> out;
    for (const Command& c : fx.commands) {
      if (const auto* s = std::get_if<SignalCommand>(&c)) out.push_back(*s);
    }
    return out;
  }

  config::ClusterConfig config_;
  std::unique_ptr<testing::Cluster> cluster_;
  std::unique_ptr<Engine> engine_;
  Millis now_ = kT0;
};

// SwitchType=switch/nvidia_imex with two channels: a third job waits for one,
// a finished job's channel goes to the next, and a restart keeps them.
TEST_F(EngineTest, ImexChannelsAreUniqueAmongRunningJobsAndSurviveARestart) {
  Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4), [](config::ClusterConfig& config) {
    config.switch_type = "nvidia_imex";
    config.imex.channel_count = 2;
  });
  const JobId a = Submit(1);
  const JobId b = Submit(1);
  const JobId c = Submit(1);
  Schedule();
  EXPECT_EQ(engine_->FindJob(a)->run.imex_channels, std::vector<int>{0});
  EXPECT_EQ(engine_->FindJob(b)->run.imex_channels, std::vector<int>{1});
  EXPECT_EQ(State(c), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(c)->reason_detail,
            "1 IMEX channel needed, 0 free: the others of SwitchParameters=imex_channel_count=2 "
            "are held by running jobs");
  Restart();
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    std::vector<JobId> running;
    for (const JobId id : {a, b}) {
      if (NodeAt(id, 0) == n) running.push_back(id);
    }
    Register(n, running);
  }
  Schedule();
  EXPECT_EQ(State(c), JobState::kPending) << "a restart freed a running job's channel";
  FinishEverywhere(a, 0);
  Schedule();
  EXPECT_EQ(State(c), JobState::kRunning);
  EXPECT_EQ(engine_->FindJob(c)->run.imex_channels, std::vector<int>{0});
}

TEST_F(EngineTest, ImexChannelPerSegment) {
  Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4), [](config::ClusterConfig& config) {
    config.switch_type = "nvidia_imex";
    config.imex.per_segment = true;
  });
  JobRequest r;
  r.name = "tp";
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 8;
  r.segment = 4;
  Effects fx;
  const absl::StatusOr<JobId> id = engine_->Submit(r, now_, fx);
  ASSERT_TRUE(id.ok()) << id.status();
  Schedule();
  ASSERT_EQ(State(*id), JobState::kRunning);
  EXPECT_EQ(engine_->FindJob(*id)->run.imex_channels, (std::vector<int>{0, 1}));
}

TEST_F(EngineTest, GangRunsAndCompletes) {
  const JobId id = Submit(4, 8);
  EXPECT_EQ(State(id), JobState::kPending);
  const Effects fx = Schedule();
  EXPECT_EQ(State(id), JobState::kRunning);
  ASSERT_EQ(fx.commands.size(), 4U);
  for (std::size_t i = 0; i < fx.commands.size(); ++i) {
    const auto& launch = std::get<LaunchCommand>(fx.commands[i]);
    EXPECT_EQ(launch.job, id);
    EXPECT_EQ(launch.node_rank, static_cast<int>(i));
    EXPECT_EQ(launch.grant.gpus, 0xffU);
  }
  EXPECT_EQ(engine_->ViewNode(cluster_->Node("n001")).status, NodeStatus::kAllocated);
  FinishEverywhere(id, 0);
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(engine_->ViewNode(cluster_->Node("n001")).status, NodeStatus::kIdle);
}

// A job that ends on nodes where no waiting job could take a node (the CPUs
// that GPU jobs leave) runs no pass; one that frees GPUs does.
TEST_F(EngineTest, AReleaseNoWaitingJobCanUseRunsNoPass) {
  const GpusTaken taken = TakeEveryGpu();
  ASSERT_FALSE(HasFailure());
  const auto& [gpus, waiting, reason, cpus] = taken;

  FinishEverywhere(cpus, 0);
  ASSERT_TRUE(engine_->ScheduleNeeded());
  Schedule();
  EXPECT_EQ(engine_->LastPassKind(), "idle");
  EXPECT_FALSE(engine_->ScheduleNeeded());
  EXPECT_EQ(State(waiting), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(waiting)->reason, reason);

  // A job that fits the CPUs left is still started by the pass after its
  // submission, and one that frees GPUs lets the waiting job start.
  const JobId another = Submit(1, 0);
  Schedule();
  EXPECT_EQ(State(another), JobState::kRunning);
  FinishEverywhere(gpus, 0);
  Schedule();
  EXPECT_NE(engine_->LastPassKind(), "idle");
  EXPECT_EQ(State(waiting), JobState::kRunning);
}

TEST_F(EngineTest, AReleaseOnlyTheNewJobsCanUseNeedsOnlyTheSubmissionPass) {
  const GpusTaken taken = TakeEveryGpu();
  ASSERT_FALSE(HasFailure());
  const auto& [gpus, waiting, reason, cpus] = taken;

  // A sweep's next job comes as its last one ends: it may take the CPUs
  // freed, the waiting GPU job cannot. No walk of the queue.
  FinishEverywhere(cpus, 0);
  const JobId next = Submit(1, 0);
  Schedule();
  EXPECT_EQ(engine_->LastPassKind(), "submission");
  EXPECT_FALSE(engine_->ScheduleNeeded());
  EXPECT_EQ(State(next), JobState::kRunning);
  EXPECT_EQ(State(waiting), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(waiting)->reason, reason);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();

  // A release a job that waited before can use still gets a pass of its
  // own beside a submission, and that job starts.
  FinishEverywhere(gpus, 0);
  const JobId last = Submit(1, 0);
  Schedule();
  EXPECT_NE(engine_->LastPassKind(), "submission");
  EXPECT_EQ(State(waiting), JobState::kRunning);
  EXPECT_EQ(State(last), JobState::kRunning);
}

TEST_F(EngineTest, FinishedJobsAreForgottenAfterFiveMinutesAndNamed) {
  const JobId done = Submit(1);
  const JobId running = Submit(1);
  Schedule();
  FinishEverywhere(done, 0);
  ASSERT_EQ(State(done), JobState::kCompleted);
  Effects early;
  now_ += std::chrono::minutes(4);
  engine_->Tick(now_, early);
  EXPECT_TRUE(early.forgotten_jobs.empty());
  EXPECT_NE(engine_->FindJob(done), nullptr);
  Effects late;
  now_ += std::chrono::minutes(2);
  engine_->Tick(now_, late);
  // The caller drops what it keeps of exactly these (the controller: specs).
  EXPECT_EQ(late.forgotten_jobs, std::vector<JobId>{done});
  EXPECT_EQ(engine_->FindJob(done), nullptr);
  EXPECT_NE(engine_->FindJob(running), nullptr);
}

TEST_F(EngineTest, FailingRankStopsTheGang) {
  const JobId id = Submit(2);
  Schedule();
  const Job& job = *engine_->FindJob(id);
  const NodeId first = job.run.placement.grants[0].node;
  const NodeId second = job.run.placement.grants[1].node;
  Effects fx;
  engine_->RankExited(id, first, 3, 0, now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);
  ASSERT_EQ(fx.commands.size(), 2U);
  EXPECT_EQ(std::get<TerminateCommand>(fx.commands[0]).node, first);
  EXPECT_EQ(std::get<TerminateCommand>(fx.commands[1]).node, second);
  // The ranks killed by the stop do not overwrite the first exit code.
  engine_->RankExited(id, second, 0, 15, now_, fx);
  engine_->JobReleased(id, first, now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);  // holds the gang until every node confirms
  engine_->JobReleased(id, second, now_, fx);
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(engine_->FindJob(id)->run.exit_code, 3);
  EXPECT_TRUE(engine_->CheckInvariants().ok());
}

TEST_F(EngineTest, LaunchFailureOnOneNodeFailsTheJob) {
  const JobId id = Submit(2);
  Schedule();
  const NodeId first = engine_->FindJob(id)->run.placement.grants[0].node;
  const NodeId second = engine_->FindJob(id)->run.placement.grants[1].node;
  Effects fx;
  engine_->LaunchFailed(id, second, "cannot run \"x\": No such file or directory", now_, fx);
  engine_->JobReleased(id, second, now_, fx);
  engine_->JobReleased(id, first, now_, fx);
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(engine_->FindJob(id)->reason,
            fmt::format("launch failed on {}: cannot run \"x\": No such file or directory",
                        cluster_->topology.NodeName(second)));
  const JobId again = Submit(1);
  Schedule();
  const NodeId node = engine_->FindJob(again)->run.placement.grants[0].node;
  const std::string name = cluster_->topology.NodeName(node);
  engine_->LaunchFailed(again, node, name + ": cannot run \"y\": Permission denied", now_, fx);
  EXPECT_EQ(engine_->FindJob(again)->reason,
            fmt::format("launch failed on {}: cannot run \"y\": Permission denied", name));
}

TEST_F(EngineTest, CancelPendingAndRunning) {
  const JobId running = Submit(8, 8);
  const JobId pending = Submit(8, 8);
  Schedule();
  EXPECT_EQ(State(pending), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(pending)->reason, "Resources");
  Effects fx;
  EXPECT_EQ(engine_->Cancel(pending, 0, Caller{1001}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->Cancel(pending, 0, Caller{1000}, now_, fx).ok());
  EXPECT_EQ(State(pending), JobState::kCancelled);
  ASSERT_TRUE(engine_->Cancel(running, 0, Caller{0}, now_, fx).ok());
  EXPECT_EQ(State(running), JobState::kCompleting);
  FinishEverywhere(running, 0);
  EXPECT_EQ(State(running), JobState::kCancelled);
  EXPECT_EQ(engine_->Cancel(running, 0, Caller{0}, now_, fx).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Cancel(999, 0, Caller{0}, now_, fx).code(), absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, TimeLimitStopsTheJob) {
  const JobId id = Submit(1);
  Schedule();
  Effects fx;
  now_ += std::chrono::minutes(61);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) engine_->NodeHeartbeat(n, now_);
  engine_->Tick(now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);
  FinishEverywhere(id, 0);
  EXPECT_EQ(State(id), JobState::kTimeout);
}

TEST_F(EngineTest, SilentNodeGoesDownAndItsJobsFail) {
  const JobId id = Submit(2);
  Schedule();
  const NodeId lost = engine_->FindJob(id)->run.placement.grants[0].node;
  const NodeId other = engine_->FindJob(id)->run.placement.grants[1].node;
  now_ += std::chrono::seconds(20);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != lost) engine_->NodeHeartbeat(n, now_);
  }
  Effects fx;
  now_ += std::chrono::seconds(15);
  engine_->Tick(now_, fx);
  EXPECT_EQ(engine_->ViewNode(lost).status, NodeStatus::kDown);
  EXPECT_EQ(State(id), JobState::kCompleting);
  engine_->JobReleased(id, other, now_, fx);
  EXPECT_EQ(State(id), JobState::kNodeFail);
  EXPECT_TRUE(engine_->CheckInvariants().ok());
  // Nothing lands on the down node until its agent registers again.
  const JobId wide = Submit(8);
  Schedule();
  EXPECT_EQ(State(wide), JobState::kPending);
  Register(lost);
  Schedule();
  EXPECT_EQ(State(wide), JobState::kRunning);
}

// Time passes with every node heard from but `silent`; the engine ticks.
// Returns what the tick decided.
Effects PassQuietly(Engine& engine, Millis& now, std::chrono::seconds by,
                    const std::vector<NodeId>& silent, int nodes) {
  now += by;
  for (NodeId n = 0; n < nodes; ++n) {
    if (std::find(silent.begin(), silent.end(), n) == silent.end()) engine.NodeHeartbeat(n, now);
  }
  Effects fx;
  engine.Tick(now, fx);
  return fx;
}

TEST_F(EngineTest, AGangLosingANodeIsRepairedFromItsSpareInPlace) {
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 2;
  r.spares = 1;
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  const Job& job = *engine_->FindJob(id);
  ASSERT_EQ(job.state, JobState::kRunning);
  ASSERT_EQ(job.run.placement.grants.size(), 2U);
  ASSERT_EQ(job.run.spares.size(), 1U);
  const NodeId kept = job.run.placement.grants[0].node;
  const NodeId lost = job.run.placement.grants[1].node;
  const NodeId spare = job.run.spares[0].node;
  // Placed with the gang, inside its leaf.
  EXPECT_EQ(cluster_->topology.LeafOf(spare), cluster_->topology.LeafOf(kept));
  const int nodes = cluster_->topology.NodeCount();
  PassQuietly(*engine_, now_, std::chrono::seconds(31), {lost}, nodes);
  // Lost: the rank waits for the repair decision; nothing else changed.
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.run.lost_ranks, std::vector<int>{1});
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  // What the survivor's ranks report meanwhile is the loss's fallout.
  engine_->RankExited(id, kept, 1, 0, now_, fx);
  EXPECT_EQ(job.state, JobState::kRunning);
  const Effects repair = PassQuietly(*engine_, now_, std::chrono::seconds(1), {lost}, nodes);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.run.placement.grants[0].node, kept);
  EXPECT_EQ(job.run.placement.grants[1].node, spare);
  EXPECT_TRUE(job.run.spares.empty());
  EXPECT_TRUE(job.run.lost_ranks.empty());
  EXPECT_EQ(job.run.attempt, 2);
  EXPECT_EQ(job.run.failure_restarts, 1);
  ASSERT_EQ(job.repairs.size(), 1U);
  EXPECT_EQ(job.repairs[0].replacement,
            std::vector<std::string>{cluster_->topology.NodeName(spare)});
  ASSERT_EQ(job.past_attempts.size(), 1U);
  EXPECT_EQ(job.past_attempts[0].cause, EndCause::kNodeLostRequeue);
  // Every rank starts again as the next attempt: on the kept node and on
  // the spare.
  std::set<NodeId> launched;
  for (const Command& c : repair.commands) {
    if (const auto* launch = std::get_if<LaunchCommand>(&c)) launched.insert(launch->node);
  }
  EXPECT_EQ(launched, (std::set<NodeId>{kept, spare}));
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  // The lost node comes back drained, with its reason.
  Register(lost);
  EXPECT_EQ(engine_->ViewNode(lost).status, NodeStatus::kDrained);
  EXPECT_NE(engine_->ViewNode(lost).reason.find("repaired from spares"), std::string::npos);
  FinishEverywhere(id, 0);
  EXPECT_EQ(job.state, JobState::kCompleted);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, LossesBeyondTheSparesEndTheGangAsALossDoes) {
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 2;
  r.spares = 1;
  r.requeue = true;
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  const Job& job = *engine_->FindJob(id);
  const std::vector<NodeId> both = {job.run.placement.grants[0].node,
                                    job.run.placement.grants[1].node};
  const int nodes = cluster_->topology.NodeCount();
  PassQuietly(*engine_, now_, std::chrono::seconds(31), both, nodes);
  EXPECT_EQ(job.run.lost_ranks.size(), 2U);
  PassQuietly(*engine_, now_, std::chrono::seconds(1), both, nodes);
  // One decision for both: one spare for two lost ranks is no repair; the
  // job is requeued (--requeue), its spare given back.
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_TRUE(job.repairs.empty());
  EXPECT_TRUE(job.run.spares.empty());
  EXPECT_EQ(job.run.failure_restarts, 1);
  ASSERT_EQ(job.past_attempts.size(), 1U);
  EXPECT_NE(job.past_attempts[0].reason.find("not repaired: 2 nodes lost and no spare left"),
            std::string::npos)
      << job.past_attempts[0].reason;
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, RequeueOnNodeLoss) {
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 2;
  r.requeue = true;
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  const NodeId lost = engine_->FindJob(id)->run.placement.grants[0].node;
  const NodeId other = engine_->FindJob(id)->run.placement.grants[1].node;
  now_ += std::chrono::seconds(31);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != lost) engine_->NodeHeartbeat(n, now_);
  }
  engine_->Tick(now_, fx);
  engine_->JobReleased(id, other, now_, fx);
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(id)->run.attempt, 2);
  EXPECT_EQ(engine_->FindJob(id)->run.failure_restarts, 1);
  // RequeueBackoff= (10 s by default) holds it back before its restart.
  Schedule();
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(id)->wait.reason, PendingReason::kBeginTime);
  now_ += std::chrono::seconds(10);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != lost) engine_->NodeHeartbeat(n, now_);
  }
  engine_->Tick(now_, fx);  // the wake-up its back-off asked for
  Schedule();
  EXPECT_EQ(State(id), JobState::kRunning);
  for (const alloc::NodeGrant& g : engine_->FindJob(id)->run.placement.grants)
    EXPECT_NE(g.node, lost);
  // The attempt that ended is kept for accounting, with its nodes.
  const Job& job = *engine_->FindJob(id);
  ASSERT_EQ(job.past_attempts.size(), 1U);
  EXPECT_EQ(job.past_attempts[0].attempt, 1);
  EXPECT_EQ(job.past_attempts[0].cause, EndCause::kNodeLostRequeue);
  EXPECT_EQ(job.past_attempts[0].nodes.size(), 2U);
  EXPECT_NE(job.past_attempts[0].reason.find("was lost"), std::string::npos)
      << job.past_attempts[0].reason;
}

// --no-kill: a batch job goes on without a lost node other than its first;
// its step there ends, its next step runs on the nodes left, and the lost
// node's share is free. Losing its first node ends it as before.
TEST_F(EngineTest, NoKillGoesOnWithoutALostNode) {
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 3;
  r.launch = JobLaunch::kBatchScript;
  r.no_kill = true;
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {}, Caller{1000}, now_, fx).ok());
  const NodeId lost = grants[1].node;
  now_ += std::chrono::seconds(31);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != lost) engine_->NodeHeartbeat(n, now_);
  }
  engine_->Tick(now_, fx);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  const Job& job = *engine_->FindJob(id);
  ASSERT_EQ(State(id), JobState::kRunning);
  ASSERT_EQ(job.run.steps.size(), 1U);
  EXPECT_TRUE(job.run.steps[0].stopping);  // its ranks on the other nodes are told to stop
  EXPECT_NE(job.run.steps[0].reason.find("was lost"), std::string::npos) << job.run.steps[0].reason;
  StepExits(id, 0, 0, 1, 0, SIGTERM, fx);
  StepExits(id, 0, 2, 1, 0, SIGTERM, fx);
  EXPECT_EQ(job.run.steps[0].state, StepState::kFailed);
  EXPECT_NE(job.reason_detail.find("--no-kill: went on without"), std::string::npos);
  EXPECT_TRUE(engine_->Pool().IsIdle(lost));
  // The next step runs on the two nodes left.
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {}, Caller{1000}, now_, fx).ok());
  const JobStep& next = engine_->FindJob(id)->run.steps.back();
  ASSERT_EQ(next.placement.nodes.size(), 2U);
  EXPECT_EQ(next.placement.nodes[0].node_rank, 0);
  EXPECT_EQ(next.placement.nodes[1].node_rank, 2);
  // Its first node lost, the job ends.
  now_ += std::chrono::seconds(31);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != lost && n != grants[0].node) engine_->NodeHeartbeat(n, now_);
  }
  engine_->Tick(now_, fx);
  EXPECT_NE(State(id), JobState::kRunning);
}

TEST_F(EngineTest, NodeFailuresRequeueUpToTheCapWithAGrowingBackoff) {
  Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4), [](config::ClusterConfig& c) {
    c.max_batch_requeue = 5;
    c.requeue_backoff = std::chrono::seconds(4);
  });
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 1;
  r.requeue = true;
  r.max_restarts = 2;  // the job's own cap wins over MaxBatchRequeue
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  std::vector<NodeId> lost;
  // Loses its node: requeued after 4 s, then 8 s; the third loss ends it.
  for (const int wait_s : {4, 8, -1}) {
    engine_->Tick(now_, fx);
    Schedule();
    ASSERT_EQ(State(id), JobState::kRunning);
    const NodeId node = engine_->FindJob(id)->run.placement.grants[0].node;
    lost.push_back(node);
    now_ += std::chrono::seconds(31);
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
      if (std::ranges::find(lost, n) == lost.end()) engine_->NodeHeartbeat(n, now_);
    }
    engine_->Tick(now_, fx);
    if (wait_s < 0) break;
    ASSERT_EQ(State(id), JobState::kPending);
    EXPECT_EQ(engine_->FindJob(id)->wait.restart_after,
              now_ + std::chrono::milliseconds(wait_s * 1000));
    now_ += std::chrono::seconds(wait_s) - std::chrono::milliseconds(1);
    Schedule();
    EXPECT_EQ(State(id), JobState::kPending) << "restarted before its back-off ended";
    EXPECT_NE(engine_->FindJob(id)->reason_detail.find("starts again in"), std::string::npos)
        << engine_->FindJob(id)->reason_detail;
    now_ += std::chrono::milliseconds(1);
  }
  EXPECT_EQ(State(id), JobState::kNodeFail);
  const Job& job = *engine_->FindJob(id);
  EXPECT_EQ(job.run.failure_restarts, 2);
  EXPECT_EQ(job.run.attempt, 3);
  EXPECT_EQ(job.past_attempts.size(), 2U);
  EXPECT_NE(job.reason.find("not requeued: node failures restarted it 2 times, its cap "
                            "(--max-restarts=2)"),
            std::string::npos)
      << job.reason;
}

TEST_F(EngineTest, MaxBatchRequeueZeroNeverRequeuesOnNodeLoss) {
  Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4),
        [](config::ClusterConfig& c) { c.max_batch_requeue = 0; });
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.requeue = true;
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  const NodeId node = engine_->FindJob(id)->run.placement.grants[0].node;
  now_ += std::chrono::seconds(31);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != node) engine_->NodeHeartbeat(n, now_);
  }
  engine_->Tick(now_, fx);
  EXPECT_EQ(State(id), JobState::kNodeFail);
  EXPECT_NE(engine_->FindJob(id)->reason.find("MaxBatchRequeue=0 in cohort.conf"),
            std::string::npos)
      << engine_->FindJob(id)->reason;
}

// Silent for three heartbeats (9 s of NodeTimeout=30) a node is shown not
// responding; a heartbeat clears it; NodeTimeout takes it down.
TEST_F(EngineTest, ASilentNodeIsNotRespondingBeforeItIsDown) {
  Effects fx;
  const NodeId quiet = cluster_->Node("n001");
  now_ += std::chrono::seconds(8);
  engine_->Tick(now_, fx);
  EXPECT_FALSE(engine_->ViewNode(quiet).not_responding);
  now_ += std::chrono::seconds(2);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    if (n != quiet) engine_->NodeHeartbeat(n, now_);
  }
  engine_->Tick(now_, fx);
  EXPECT_TRUE(engine_->ViewNode(quiet).not_responding);
  EXPECT_EQ(engine_->ViewNode(quiet).status, NodeStatus::kIdle);
  EXPECT_FALSE(engine_->ViewNode(cluster_->Node("n002")).not_responding);
  engine_->NodeHeartbeat(quiet, now_);
  EXPECT_FALSE(engine_->ViewNode(quiet).not_responding);
  EXPECT_EQ(engine_->ViewNode(quiet).last_heard, now_);
}

TEST_F(EngineTest, DrainKeepsNewWorkOffAndResumeBringsItBack) {
  Effects fx;
  const NodeId n = cluster_->Node("n001");
  EXPECT_EQ(engine_->Drain(n, "", Caller{0}, now_, fx).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Drain(n, "bad dimm", Caller{1000}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(engine_->Drain(n, "bad dimm", Caller{0}, now_, fx).ok());
  EXPECT_EQ(engine_->ViewNode(n).status, NodeStatus::kDrained);
  const JobId id = Submit(8);
  Schedule();
  EXPECT_EQ(State(id), JobState::kPending);
  ASSERT_TRUE(engine_->Resume(n, Caller{0}, fx).ok());
  Schedule();
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(EngineTest, DrainReasonSurvivesTheNodeGoingDown) {
  Effects fx;
  const NodeId n = cluster_->Node("n001");
  ASSERT_TRUE(engine_->Drain(n, "bad dimm", Caller{0}, now_, fx).ok());
  now_ += std::chrono::seconds(31);
  for (NodeId other = 0; other < cluster_->topology.NodeCount(); ++other) {
    if (other != n) engine_->NodeHeartbeat(other, now_);
  }
  engine_->Tick(now_, fx);
  EXPECT_EQ(engine_->ViewNode(n).status, NodeStatus::kDown);
  EXPECT_EQ(engine_->ViewNode(n).reason, "not responding for 30 s (NodeTimeout)");
  Register(n);
  EXPECT_EQ(engine_->ViewNode(n).status, NodeStatus::kDrained);
  EXPECT_EQ(engine_->ViewNode(n).reason, "bad dimm");
}

// An operator's DOWN: the node's agent is told to end the job's ranks
// there, the job ends as a node loss ends it (requeued), and the node takes
// nothing, its agent registering again or not, until it is resumed. Who set
// it and when are kept for sinfo -R.
TEST_F(EngineTest, DownEndsTheNodesJobsThereAndHoldsItUntilResumed) {
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 2;
  r.requeue = true;
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  const NodeId n = grants[1].node;
  EXPECT_EQ(engine_->Down(n, "", Caller{0}, now_, fx).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Down(n, "PSU swap", Caller{1000}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  now_ += std::chrono::seconds(5);
  Effects down;
  ASSERT_TRUE(engine_->Down(n, "PSU swap", Caller{0}, now_, down).ok());
  EXPECT_TRUE(std::any_of(down.commands.begin(), down.commands.end(), [&](const Command& c) {
    const auto* t = std::get_if<TerminateCommand>(&c);
    return t != nullptr && t->job == id && t->node == n;
  }));
  const NodeView view = engine_->ViewNode(n);
  EXPECT_EQ(view.status, NodeStatus::kDown);
  EXPECT_EQ(view.reason, "PSU swap");
  EXPECT_EQ(view.reason_uid, std::optional<std::uint32_t>(0));
  EXPECT_EQ(view.reason_time, now_);
  engine_->JobReleased(id, grants[0].node, now_, fx);
  EXPECT_EQ(State(id), JobState::kPending);
  ASSERT_EQ(engine_->FindJob(id)->past_attempts.size(), 1U);
  EXPECT_NE(engine_->FindJob(id)->past_attempts[0].reason.find("set DOWN by an operator: PSU swap"),
            std::string::npos)
      << engine_->FindJob(id)->past_attempts[0].reason;
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  Register(n);
  EXPECT_EQ(engine_->ViewNode(n).status, NodeStatus::kDown);
  EXPECT_TRUE(engine_->Admin(n).down);
  ASSERT_TRUE(engine_->Resume(n, Caller{0}, fx).ok());
  EXPECT_EQ(engine_->ViewNode(n).status, NodeStatus::kIdle);
  EXPECT_EQ(engine_->Admin(n), NodeAdmin{});
}

// A partition DOWN takes jobs and starts none (PartitionDown, saying how it
// comes back); DRAIN starts those queued and refuses new ones; the state
// cohort.conf gives takes the operator's away; an operator's outlives a
// restart.
TEST_F(EngineTest, PartitionStatesGovernWhatIsTakenAndStarted) {
  using config::PartitionState;
  Effects fx;
  EXPECT_EQ(engine_->SetPartitionState("all", PartitionState::kDown, Caller{1000}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(engine_->SetPartitionState("nope", PartitionState::kDown, Caller{0}, now_, fx).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(engine_->SetPartitionState("all", PartitionState::kDown, Caller{0}, now_, fx).ok());
  EXPECT_TRUE(fx.changed_partitions);
  const JobId id = Submit(1);
  Schedule();
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(id)->wait.reason, PendingReason::kPartitionDown);
  EXPECT_NE(engine_->FindJob(id)->reason_detail.find("partition all is DOWN"), std::string::npos)
      << engine_->FindJob(id)->reason_detail;
  Restart();
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) Register(n);
  ASSERT_NE(engine_->PartitionOverride("all"), nullptr);
  EXPECT_EQ(engine_->PartitionOverride("all")->uid, std::optional<std::uint32_t>(0));
  Schedule();
  EXPECT_EQ(State(id), JobState::kPending);
  ASSERT_TRUE(engine_->SetPartitionState("all", PartitionState::kDrain, Caller{0}, now_, fx).ok());
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 1;
  const absl::StatusOr<JobId> refused = engine_->Submit(r, now_, fx);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("all is DRAIN and takes no new jobs"),
            std::string::npos)
      << refused.status();
  Schedule();
  EXPECT_EQ(State(id), JobState::kRunning);  // queued before the DRAIN: it starts
  ASSERT_TRUE(engine_->SetPartitionState("all", PartitionState::kUp, Caller{0}, now_, fx).ok());
  EXPECT_EQ(engine_->PartitionOverride("all"), nullptr);  // cohort.conf's state again
  EXPECT_TRUE(engine_->PartitionOverrides().empty());
}

TEST_F(EngineTest, AgentWithFewerResourcesIsDrained) {
  NodeReport report;
  report.cpus = 2;
  report.gpus = 8;
  report.memory_mb = 1024 * 1024;
  Effects fx;
  ASSERT_TRUE(engine_->NodeRegistered(0, report, now_, fx).ok());
  const NodeView view = engine_->ViewNode(0);
  EXPECT_EQ(view.status, NodeStatus::kDrained);
  EXPECT_EQ(view.reason,
            "agent reports 2 CPUs, 1048576 MB, 8 GPUs; its NodeName line says 64 CPUs, 1048576 MB, "
            "8 GPUs");
}

TEST_F(EngineTest, SubmitRefusesWhatCanNeverRun) {
  JobRequest r;
  r.user_name = "alice";
  r.nodes = 9;
  Effects fx;
  absl::StatusOr<JobId> id = engine_->Submit(r, now_, fx);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(id.status().message(),
            "the job can never run here: partition all has 8 nodes; the job asks for 9");
  r.nodes = 1;
  r.partition = "gpu";
  EXPECT_EQ(engine_->Submit(r, now_, fx).status().message(),
            "partition: no partition \"gpu\"; partitions: all");
  r.partition.clear();
  r.time_limit = std::chrono::hours(2);
  EXPECT_EQ(engine_->Submit(r, now_, fx).status().message(),
            "time: 02:00:00 is over partition all's MaxTime 01:00:00; ask for less with -t");
  r.time_limit = {};
  r.nodes = 0;
  EXPECT_EQ(engine_->Submit(r, now_, fx).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, StaleJobsReportedByAnAgentAreTerminated) {
  Effects fx;
  NodeReport report;
  report.cpus = 64;
  report.gpus = 8;
  report.memory_mb = 1024 * 1024;
  report.running = {{77, 0, 0}};
  ASSERT_TRUE(engine_->NodeRegistered(0, report, now_, fx).ok());
  ASSERT_EQ(fx.commands.size(), 1U);
  EXPECT_EQ(std::get<TerminateCommand>(fx.commands[0]).job, 77);
}

TEST_F(EngineTest, MasterPortsDifferOnASharedFirstNode) {
  // Job 20001 would get job 1's port (20000 + id mod 20000); on the same
  // first node it must take the next one.
  const JobId first = Submit(1);
  Schedule();
  const Job running = *engine_->FindJob(first);
  const NodeId node = running.run.placement.grants.front().node;
  EXPECT_EQ(running.run.master_port, 20001);
  Job twin = running;
  twin.id = 20001;
  twin.run.placement = {};
  twin.run.released.clear();
  twin.run.exited_ok.clear();
  twin.request.nodelist = {cluster_->topology.NodeName(node)};
  SavedState saved;
  saved.jobs = {{running, StatusOf(running)}, {twin, {JobState::kPending, JobSubstate::kNone}}};
  saved.next_id = 20002;
  alloc::NodePool pool =
      alloc::NodePool::Create(cluster_->topology, config_.nodes, config_.partitions).value();
  engine_ = std::make_unique<Engine>(config_, cluster_->topology, std::move(pool));
  Effects fx;
  engine_->Restore(std::move(saved), now_, fx);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    Register(n, n == node ? std::vector<JobId>{first} : std::vector<JobId>{});
  }
  Schedule();
  ASSERT_EQ(State(20001), JobState::kRunning);
  EXPECT_EQ(engine_->FindJob(20001)->run.placement.grants.front().node, node);
  EXPECT_EQ(engine_->FindJob(20001)->run.master_port, 20002);
}

TEST_F(EngineTest, RestoredGangLearnsItsExitsFromTheAgents) {
  const JobId id = Submit(2);
  Schedule();
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  const JobId queued = Submit(8);
  Restart();
  ASSERT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(State(queued), JobState::kPending);
  EXPECT_EQ(engine_->NextId(), queued + 1);
  // The first node's ranks finished while the controller was away (reported
  // twice, as agents do); the second's are still running.
  RegisterWith(grants[0].node, {}, {{id, 1, 2, false, 0, 0, ""}});
  RegisterWith(grants[0].node, {}, {{id, 1, 2, false, 0, 0, ""}});
  RegisterWith(grants[1].node, {{id, 1, 1}}, {});
  EXPECT_EQ(State(id), JobState::kRunning);
  Effects fx;
  engine_->RankExited(id, grants[1].node, 0, 0, now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);
  engine_->JobReleased(id, grants[1].node, now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, RestoredGangFailsWithTheExitAnAgentReports) {
  const JobId id = Submit(2);
  Schedule();
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  Restart();
  RegisterWith(grants[0].node, {}, {{id, 1, 1, true, 3, 0, ""}});
  EXPECT_EQ(State(id), JobState::kCompleting);
  EXPECT_EQ(engine_->FindJob(id)->run.exit_code, 3);
  // A report of another attempt is not this one's: the node has none of its
  // ranks left, so it is released and the job ends with the first failure.
  RegisterWith(grants[1].node, {}, {{id, 7, 2, false, 0, 0, ""}});
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(engine_->FindJob(id)->run.exit_code, 3);
}

TEST_F(EngineTest, RestoredNodeThatNeverRegistersIsLost) {
  const JobId id = Submit(2);
  Schedule();
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  Restart();
  RegisterWith(grants[0].node, {{id, 1, 0}}, {});
  now_ += std::chrono::seconds(20);
  Effects fx;
  engine_->NodeHeartbeat(grants[0].node, now_);
  engine_->Tick(now_, fx);
  EXPECT_EQ(State(id), JobState::kRunning);
  now_ += std::chrono::seconds(11);
  engine_->Tick(now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);
  EXPECT_EQ(engine_->ViewNode(grants[1].node).status, NodeStatus::kDown);
  EXPECT_EQ(engine_->ViewNode(grants[1].node).reason,
            "its agent did not register within 30 s (NodeTimeout) of the controller's restart");
  // The node that did come back is told to stop the gang's ranks.
  EXPECT_TRUE(std::any_of(fx.commands.begin(), fx.commands.end(), [&](const Command& c) {
    const auto* t = std::get_if<TerminateCommand>(&c);
    return t != nullptr && t->job == id && t->node == grants[0].node;
  }));
}

TEST_F(EngineTest, RestoreKeepsDrainsAndFailsJobsTheConfigNoLongerAllows) {
  Effects fx;
  ASSERT_TRUE(engine_->Drain(3, "bad fan", Caller{0}, now_, fx).ok());
  const JobId id = Submit(1);
  config_.partitions.front().name = "renamed";
  Restart();
  EXPECT_EQ(engine_->Admin(3).reason, "bad fan");
  Register(3);
  EXPECT_EQ(engine_->ViewNode(3).status, NodeStatus::kDrained);
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(engine_->FindJob(id)->reason,
            "no longer valid after a configuration change: partition: no partition \"all\"; "
            "partitions: renamed");
}

constexpr TimeWarning kUsr1At90{10, std::chrono::seconds(90), false};

TEST_F(EngineTest, WarningGoesToEveryNodeOnceBeforeTheTimeLimit) {
  using std::chrono::minutes;
  using std::chrono::seconds;
  const JobId id = SubmitWarned(2, kUsr1At90, minutes(10));
  Schedule();
  const Millis start = now_;
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  EXPECT_TRUE(Signals(TickAt(start + minutes(8) + seconds(29))).empty());
  const Effects fx = TickAt(start + minutes(8) + seconds(30));
  const std::vector<SignalCommand> sent = Signals(fx);
  ASSERT_EQ(sent.size(), 2U);
  for (std::size_t rank = 0; rank < sent.size(); ++rank) {
    EXPECT_EQ(sent[rank].job, id);
    EXPECT_EQ(sent[rank].node, grants[rank].node);
    EXPECT_EQ(sent[rank].signal, 10);
    EXPECT_EQ(sent[rank].scope, SignalScope::kRanks);
  }
  EXPECT_EQ(fx.changed_jobs, std::vector<JobId>{id});  // persisted: a restart does not warn again
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(engine_->FindJob(id)->run.warned_attempt, 1);
  EXPECT_EQ(engine_->FindJob(id)->reason_detail,
            "sent USR1 to every rank 90 s before the time limit 00:10:00 (--signal)");
  EXPECT_TRUE(Signals(TickAt(start + minutes(9))).empty());
  TickAt(start + minutes(10));
  EXPECT_EQ(State(id), JobState::kCompleting);
  FinishEverywhere(id, 0);
  EXPECT_EQ(State(id), JobState::kTimeout);
}

TEST_F(EngineTest, BatchOnlyWarningGoesToNodeRankZero) {
  const JobId id = SubmitWarned(3, {12, std::chrono::seconds(30), true}, std::chrono::minutes(5));
  Schedule();
  const NodeId first = engine_->FindJob(id)->run.placement.grants[0].node;
  const std::vector<SignalCommand> sent =
      Signals(TickAt(now_ + std::chrono::minutes(4) + std::chrono::seconds(30)));
  ASSERT_EQ(sent.size(), 1U);
  EXPECT_EQ(sent[0].node, first);
  EXPECT_EQ(sent[0].signal, 12);
  EXPECT_EQ(sent[0].scope, SignalScope::kBatch);
}

TEST_F(EngineTest, NoWarningWhenDisabledOrWithoutATimeLimitLongerThanItsLead) {
  const Millis start = now_;
  const JobId disabled = SubmitWarned(1, {}, std::chrono::minutes(10));
  // The lead is the whole limit or more: the job would be warned as it starts.
  const JobId short_limit = SubmitWarned(1, kUsr1At90, std::chrono::seconds(90));
  Schedule();
  for (int s = 1; s <= 599; s += 7) {
    EXPECT_TRUE(Signals(TickAt(start + std::chrono::seconds(s))).empty()) << "at " << s << " s";
  }
  EXPECT_EQ(State(short_limit), JobState::kCompleting);  // stopped at its limit, unwarned
  EXPECT_EQ(engine_->FindJob(short_limit)->run.warned_attempt, 0);
  EXPECT_EQ(State(disabled), JobState::kRunning);
  EXPECT_EQ(engine_->FindJob(disabled)->run.warned_attempt, 0);
}

TEST_F(EngineTest, NoWarningWithoutATimeLimit) {
  config_.partitions.front().max_time = kUnlimited;
  Restart();
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) Register(n);
  const JobId id = SubmitWarned(2, kUsr1At90, {});
  Schedule();
  ASSERT_EQ(engine_->FindJob(id)->time_limit, kUnlimited);
  EXPECT_TRUE(Signals(TickAt(now_ + std::chrono::hours(24 * 365))).empty());
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(EngineTest, WarningIsNotSentAgainAfterARestart) {
  using std::chrono::minutes;
  using std::chrono::seconds;
  const JobId id = SubmitWarned(2, kUsr1At90, minutes(10));
  Schedule();
  const Millis start = now_;
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  auto restart = [&] {
    Restart();
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
      const bool in_gang = n == grants[0].node || n == grants[1].node;
      RegisterWith(
          n, in_gang ? std::vector<RunningReport>{{id, 1, 0}} : std::vector<RunningReport>{}, {});
    }
  };
  // A restart before the warning is due keeps it due.
  restart();
  EXPECT_EQ(Signals(TickAt(start + minutes(8) + seconds(45))).size(), 2U);
  restart();
  EXPECT_EQ(engine_->FindJob(id)->run.warned_attempt, 1);
  EXPECT_TRUE(Signals(TickAt(start + minutes(8) + seconds(50))).empty());
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(EngineTest, RequeuedJobIsWarnedAgainInItsNextAttempt) {
  using std::chrono::minutes;
  using std::chrono::seconds;
  const JobId id = SubmitWarned(2, kUsr1At90, minutes(20), /*requeue=*/true);
  Schedule();
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  EXPECT_EQ(Signals(TickAt(now_ + minutes(19))).size(), 2U);
  // The first node's agent comes back without the job's ranks, which it
  // would list had it ever had them: lost, requeued.
  Register(grants[0].node);
  Effects fx;
  engine_->JobReleased(id, grants[1].node, now_, fx);
  ASSERT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(id)->run.attempt, 2);
  TickAt(now_ + seconds(10));  // RequeueBackoff
  Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  EXPECT_TRUE(Signals(TickAt(now_ + minutes(18))).empty());
  EXPECT_EQ(Signals(TickAt(now_ + minutes(1))).size(), 2U);
  EXPECT_EQ(engine_->FindJob(id)->run.warned_attempt, 2);
}

TEST_F(EngineTest, RankKilledByTheWarningEndsTheJobAsTimeout) {
  const JobId id = SubmitWarned(2, kUsr1At90, std::chrono::minutes(10));
  Schedule();
  const std::vector<alloc::NodeGrant> grants = engine_->FindJob(id)->run.placement.grants;
  TickAt(now_ + std::chrono::minutes(9));
  Effects fx;
  engine_->RankExited(id, grants[1].node, 0, 10, now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);
  FinishEverywhere(id, 0);
  EXPECT_EQ(State(id), JobState::kTimeout);
  EXPECT_EQ(engine_->FindJob(id)->run.exit_signal, 10);
  EXPECT_EQ(
      engine_->FindJob(id)->reason,
      fmt::format("time limit 00:10:00 reached: a rank on {} ended on the warning signal USR1 "
                  "sent 90 s before it",
                  cluster_->topology.NodeName(grants[1].node)));
}

// Before the warning, a rank killed by that signal is a failure as any other.
TEST_F(EngineTest, RankKilledByTheWarningSignalBeforeTheWarningFails) {
  const JobId id = SubmitWarned(1, kUsr1At90, std::chrono::minutes(10));
  Schedule();
  const NodeId node = engine_->FindJob(id)->run.placement.grants[0].node;
  Effects fx;
  engine_->RankExited(id, node, 0, 10, now_, fx);
  FinishEverywhere(id, 0);
  EXPECT_EQ(State(id), JobState::kFailed);
}

TEST_F(EngineTest, WarningIsValidated) {
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  r.warning = {65, std::chrono::seconds(90), false};
  Effects fx;
  EXPECT_EQ(engine_->Submit(r, now_, fx).status().message(),
            "signal: 65 is not a signal number; give 1-64 (--signal=USR1@90)");
  r.warning = {10, std::chrono::seconds(65536), false};
  EXPECT_EQ(engine_->Submit(r, now_, fx).status().message(),
            "signal: the warning 65536 s before the time limit is outside 0-65535 s");
  r.warning = {10, std::chrono::seconds(-1), false};
  EXPECT_EQ(engine_->Submit(r, now_, fx).status().code(), absl::StatusCode::kInvalidArgument);
}

// The gang-deadlock scenario: many 3-node jobs from several users on 8
// nodes. Every job runs whole, none shares a GPU, and all finish.
TEST_F(EngineTest, OversubscribedGangsAllComplete) {
  std::mt19937 random(7);
  std::vector<JobId> ids;
  for (int i = 0; i < 100; ++i)
    ids.push_back(Submit(3, 4, 1000 + static_cast<std::uint32_t>(i % 4)));
  int rounds = 0;
  while (std::any_of(ids.begin(), ids.end(), [&](JobId id) { return !IsFinished(State(id)); })) {
    ASSERT_LT(++rounds, 1000) << "jobs stopped making progress";
    Schedule();
    std::vector<JobId> running;
    for (const JobId id : ids) {
      if (State(id) == JobState::kRunning) running.push_back(id);
    }
    ASSERT_FALSE(running.empty()) << "nothing runs, yet jobs are pending: a deadlock";
    FinishEverywhere(running[random() % running.size()], 0);
    now_ += Millis(10);
  }
  for (const JobId id : ids) EXPECT_EQ(State(id), JobState::kCompleted);
}

// A configuration of the cluster's nodes in one default partition "all".
config::ClusterConfig OnePartition(const testing::Cluster& cluster) {
  config::ClusterConfig config;
  config.nodes = cluster.nodes;
  config::PartitionSpec all;
  all.name = "all";
  all.is_default = true;
  all.nodes = cluster.topology.NodeNames();
  config.partitions = {all};
  return config;
}

// The queue order is the chosen plugin: under priority/multifactor a job of
// a QOS with a higher priority goes before an older one; under
// priority/fifo the older one goes first whatever its QOS.
TEST(QueueOrderTest, FifoTriesTheOldestJobFirstWhereMultifactorWeighsTheQos) {
  const testing::Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build();
  const auto order_with = [&](const std::string& queue_order) {
    config::ClusterConfig config = OnePartition(cluster);
    config::QosSpec normal;
    normal.name = "normal";
    config::QosSpec high;
    high.name = "high";
    high.priority = 100;
    config.qos = {normal, high};
    config.plugins.queue_order = queue_order;
    alloc::NodePool pool =
        alloc::NodePool::Create(cluster.topology, config.nodes, config.partitions).value();
    Engine engine(config, cluster.topology, std::move(pool));
    Effects fx;
    for (const std::string qos : {"normal", "high"}) {
      JobRequest r;
      r.user_name = "alice";
      r.uid = 1000;
      r.nodes = 2;
      r.qos = qos;
      EXPECT_TRUE(engine.Submit(r, kT0, fx).ok());
    }
    engine.Schedule(kT0, fx);  // no node registered: both wait, ordered
    return engine.PendingOrder();
  };
  // Job 1 is the older (normal QOS), job 2 the newer (high QOS).
  EXPECT_EQ(order_with("priority/fifo"), (std::vector<JobId>{1, 2}));
  EXPECT_EQ(order_with("priority/multifactor"), (std::vector<JobId>{2, 1}));
}

// The chosen admission checks run at submission: with
// admission/require-time-limit a job without --time is refused in a
// partition without DefaultTime (and by --test-only), and one with it is
// queued and, under admission/limits, waits at its QOS' running limit.
TEST(AdmissionCheckTest, RequireTimeLimitRefusesASubmitWithoutOne) {
  const testing::Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build();
  config::ClusterConfig config = OnePartition(cluster);
  config.partitions[0].max_time = std::chrono::hours(4);
  config::QosSpec normal;
  normal.name = "normal";
  normal.max_jobs_per_user = 1;
  config.qos = {normal};
  config.plugins.admission = {"admission/limits", "admission/require-time-limit"};
  alloc::NodePool pool =
      alloc::NodePool::Create(cluster.topology, config.nodes, config.partitions).value();
  Engine engine(config, cluster.topology, std::move(pool));
  JobRequest r;
  r.user_name = "alice";
  r.uid = 1000;
  Effects fx;
  const absl::Status refused = absl::InvalidArgumentError(
      "time: the job has no time limit and partition all has no DefaultTime; add "
      "--time=HH:MM:SS (#SBATCH --time) so backfill can plan around it");
  EXPECT_EQ(engine.Submit(r, kT0, fx).status(), refused);
  EXPECT_EQ(engine.TestSubmit(r, kT0).status(), refused);
  EXPECT_EQ(engine.PendingCount(), 0U);

  r.time_limit = std::chrono::minutes(10);
  EXPECT_TRUE(engine.TestSubmit(r, kT0).ok());
  const absl::StatusOr<JobId> first = engine.Submit(r, kT0, fx);
  const absl::StatusOr<JobId> second = engine.Submit(r, kT0, fx);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  for (NodeId n = 0; n < cluster.topology.NodeCount(); ++n) {
    NodeReport report;
    report.cpus = 64;
    report.gpus = 8;
    report.memory_mb = 1024 * 1024;
    ASSERT_TRUE(engine.NodeRegistered(n, report, kT0, fx).ok());
  }
  engine.Schedule(kT0, fx);
  EXPECT_EQ(engine.FindJob(*first)->state, JobState::kRunning);
  EXPECT_EQ(engine.FindJob(*second)->wait.reason, PendingReason::kQosMaxJobsPerUser);
  EXPECT_EQ(engine.FindJob(*second)->reason_detail,
            "QOS normal allows 1 running jobs per user (MaxJobsPerUser)");
}

// Job steps: `cohort run` inside a running job.

// The launches of a step, as (node rank, GPUs) in the order given.
std::vector<std::pair<int, std::uint64_t>> StepLaunches(const Effects& fx, int step) {
  std::vector<std::pair<int, std::uint64_t>> out;
  for (const Command& c : fx.commands) {
    if (const auto* l = std::get_if<LaunchCommand>(&c); l != nullptr && l->step == step) {
      out.emplace_back(l->node_rank, l->grant.gpus);
    }
  }
  return out;
}

int StepCommands(const Effects& fx, int step) {
  int n = 0;
  for (const Command& c : fx.commands) {
    if (const auto* t = std::get_if<TerminateCommand>(&c); t != nullptr && t->step == step) ++n;
    if (const auto* g = std::get_if<SignalCommand>(&c); g != nullptr && g->step == step) ++n;
  }
  return n;
}

TEST_F(EngineTest, StepsShareTheAllocationAndEndWithTheirRanks) {
  const JobId id = Submit(4, 8);
  Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  const Caller alice{1000};
  Effects fx;
  absl::StatusOr<int> a = engine_->StartStep(JobRef{id, -1}, {.nodes = 2}, alice, now_, fx);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, 1);
  EXPECT_EQ(StepLaunches(fx, 1),
            (std::vector<std::pair<int, std::uint64_t>>{{0, 0xFF}, {1, 0xFF}}));
  absl::StatusOr<int> b = engine_->StartStep(JobRef{id, -1}, {.nodes = 2}, alice, now_, fx);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(StepLaunches(fx, 2),
            (std::vector<std::pair<int, std::uint64_t>>{{2, 0xFF}, {3, 0xFF}}));
  absl::StatusOr<int> c = engine_->StartStep(JobRef{id, -1}, {.nodes = 2}, alice, now_, fx);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted) << c.status();
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
  // Step 1 has 2 nodes × 2 tasks; once all four exit it is COMPLETED and
  // its nodes take the next step.
  StepExits(id, 1, 0, 2, 0, 0, fx);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kRunning);
  StepExits(id, 1, 0, 1, 0, 0, fx);  // a node's count is never passed
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kRunning);
  StepExits(id, 1, 1, 2, 0, 0, fx);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kCompleted);
  Effects next;
  absl::StatusOr<int> d = engine_->StartStep(JobRef{id, -1}, {.nodes = 2}, alice, now_, next);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, 3);
  EXPECT_EQ(StepLaunches(next, 3).front().first, 0);
  EXPECT_EQ(State(id), JobState::kRunning);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, AStepThatNeverFitsSaysWhatItAsksAndWhatTheAllocationHas) {
  const JobId id = Submit(4);
  Schedule();
  Effects fx;
  absl::StatusOr<int> step = engine_->StartStep(JobRef{id, -1}, {.nodes = 5}, {1000}, now_, fx);
  EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(step.status().message(),
            fmt::format("job {}: the step asks for 5 nodes, but the allocation has 4; ask for -N "
                        "4 or fewer",
                        id));
  EXPECT_TRUE(fx.commands.empty());
}

TEST_F(EngineTest, AFailingRankStopsItsStepButNotTheJob) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {}, {1000}, now_, fx).ok());
  Effects failed;
  StepExits(id, 1, 0, 1, 3, 0, failed);
  EXPECT_EQ(StepCommands(failed, 1), 2) << "the step's other ranks are stopped on both nodes";
  StepExits(id, 1, 0, 1, 0, SIGTERM, failed);
  StepExits(id, 1, 1, 2, 0, SIGTERM, failed);
  const JobStep& step = engine_->FindJob(id)->run.steps[0];
  EXPECT_EQ(step.state, StepState::kFailed);
  EXPECT_EQ(step.exit_code, 3);
  EXPECT_EQ(step.exit_signal, 0);
  EXPECT_EQ(step.reason, fmt::format("a rank on {} exited with code 3",
                                     cluster_->topology.NodeName(NodeAt(id, 0))));
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(EngineTest, ACancelledStepEndsCancelledAndSignalsReachOnlyItsRanks) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, fx).ok());
  Effects usr1;
  ASSERT_TRUE(engine_->SignalStep(JobRef{id, -1}, 1, SIGUSR1, {1000}, now_, usr1).ok());
  EXPECT_EQ(StepCommands(usr1, 1), 1);
  Effects cancel;
  ASSERT_TRUE(engine_->SignalStep(JobRef{id, -1}, 1, 0, {1000}, now_, cancel).ok());
  StepExits(id, 1, 0, 2, 0, SIGTERM, cancel);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kCancelled);
  EXPECT_EQ(engine_->SignalStep(JobRef{id, -1}, 1, 0, {1000}, now_, cancel).message(),
            fmt::format("step {}.1 has already ended (CANCELLED)", id));
  EXPECT_EQ(engine_->SignalStep(JobRef{id, -1}, 7, 0, {1000}, now_, cancel).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(EngineTest, AccountsMembersAndQosAllowListsSayWhoMay) {
  config_.operators = {"ops"};
  config::AccountSpec physics;
  physics.name = "physics";
  physics.users = {"bob"};
  config_.accounts = {physics};
  config::QosSpec urgent;
  urgent.name = "urgent";
  urgent.allow_accounts = {"physics"};
  config::QosSpec normal;
  normal.name = "normal";
  config_.qos = {urgent, normal};
  Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4), [](config::ClusterConfig& config) {
    config.partitions[0].allow_qos = {"normal", "urgent"};
  });
  auto submit = [&](std::string user, std::uint32_t uid, std::string account, std::string qos) {
    JobRequest r;
    r.user_name = std::move(user);
    r.uid = uid;
    r.account = std::move(account);
    r.qos = std::move(qos);
    r.nodes = 1;
    r.tasks_per_node = 1;
    Effects fx;
    return engine_->Submit(r, now_, fx);
  };
  absl::StatusOr<JobId> refused = submit("alice", 1000, "physics", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find(
                "alice is not a member of account physics; its members are bob"),
            std::string_view::npos)
      << refused.status().message();
  refused = submit("alice", 1000, "", "urgent");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("QOS urgent is for accounts physics"),
            std::string_view::npos)
      << refused.status().message();
  // bob's default account is the one that lists him; it may use urgent.
  absl::StatusOr<JobId> bob = submit("bob", 1001, "", "urgent");
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_EQ(engine_->FindJob(*bob)->request.account, "physics");
  // Root and Operators= charge any account and pick any QOS.
  EXPECT_TRUE(submit("ops", 1002, "physics", "urgent").ok());
  EXPECT_TRUE(submit("root", 0, "physics", "urgent").ok());
  // The partition's AllowQos binds everyone.
  Start(ClusterBuilder().Leaves(2).NodesPerLeaf(4),
        [](config::ClusterConfig& config) { config.partitions[0].allow_qos = {"normal"}; });
  refused = submit("root", 0, "", "urgent");
  EXPECT_NE(refused.status().message().find("partition all allows QOS normal"),
            std::string_view::npos)
      << refused.status().message();
}

TEST_F(EngineTest, OperatorsActOnEveryJobAndNode) {
  const JobId id = Submit(1);
  Effects fx;
  EXPECT_EQ(engine_->Hold(JobRef{id, -1}, Caller{2000, false}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(engine_->Hold(JobRef{id, -1}, Caller{2000, true}, now_, fx).ok());
  EXPECT_EQ(engine_->Drain(0, "maintenance", Caller{2000, false}, now_, fx).message(),
            "only root and Operators= (in cohort.conf) may drain nodes");
  EXPECT_TRUE(engine_->Drain(0, "maintenance", Caller{2000, true}, now_, fx).ok());
  EXPECT_TRUE(engine_->Cancel(id, 0, Caller{2000, true}, now_, fx).ok());
}

TEST_F(EngineTest, OnlyTheOwnerStartsStepsAndOnlyInARunningJob) {
  const JobId running = Submit(2);
  Schedule();
  const JobId waiting = Submit(1);
  Effects fx;
  ASSERT_TRUE(engine_->Hold(JobRef{waiting, -1}, {1000}, now_, fx).ok());
  Schedule();
  EXPECT_EQ(engine_->StartStep(JobRef{running, -1}, {}, {2000}, now_, fx).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(engine_->StartStep(JobRef{running, -1}, {}, {0}, now_, fx).ok()) << "an operator";
  absl::StatusOr<int> pending = engine_->StartStep(JobRef{waiting, -1}, {}, {1000}, now_, fx);
  EXPECT_EQ(pending.status().message(),
            fmt::format("job {} is PENDING; steps run inside a running job's allocation", waiting));
}

TEST_F(EngineTest, ARunningStepOutlivesAControllerRestart) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, fx).ok());
  Restart();
  EXPECT_EQ(engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, fx).status().code(),
            absl::StatusCode::kResourceExhausted)
      << "its nodes have not reported back yet";
  const NodeId step_node = NodeAt(id, 0);
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
    std::vector<RunningReport> running = {{.job = id}};
    if (n == step_node) running.push_back({.job = id, .step = 1});
    RegisterWith(n, running, {});
  }
  ASSERT_EQ(engine_->FindJob(id)->run.steps.size(), 1u);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kRunning);
  // Its node stays taken, and its ranks' exits still end it.
  Effects after;
  EXPECT_EQ(engine_->StartStep(JobRef{id, -1}, {.nodes = 2}, {1000}, now_, after).status().code(),
            absl::StatusCode::kResourceExhausted);
  StepExits(id, 1, 0, 2, 0, 0, after);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kCompleted);
  absl::StatusOr<int> next = engine_->StartStep(JobRef{id, -1}, {.nodes = 2}, {1000}, now_, after);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(*next, 2);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, AStepAskedAgainWithItsTokenIsTheSameStep) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  absl::StatusOr<int> first =
      engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, fx, "a1b2");
  ASSERT_TRUE(first.ok()) << first.status();
  Effects again;
  absl::StatusOr<int> second =
      engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, again, "a1b2");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, *first);
  EXPECT_TRUE(again.commands.empty()) << "nothing is launched twice";
  EXPECT_EQ(engine_->FindJob(id)->run.steps.size(), 1u);
  absl::StatusOr<int> other =
      engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, again, "c3d4");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(*other, *first);
}

TEST_F(EngineTest, AStepWhoseRanksVanishWithTheAgentFailsAndTheJobRunsOn) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {.nodes = 1}, {1000}, now_, fx).ok());
  RegisterWith(NodeAt(id, 0), {{.job = id}}, {});  // the job's ranks, not the step's
  const JobStep& step = engine_->FindJob(id)->run.steps[0];
  EXPECT_EQ(step.state, StepState::kFailed);
  EXPECT_EQ(step.reason, fmt::format("its ranks on {} vanished when the agent restarted",
                                     cluster_->topology.NodeName(NodeAt(id, 0))));
  EXPECT_EQ(State(id), JobState::kRunning);
}

TEST_F(EngineTest, AFinishedStepReportedAtRegistrationEndsItOnce) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {}, {1000}, now_, fx).ok());
  StepExits(id, 1, 0, 1, 0, 0, fx);  // heard before the stream dropped
  FinishedReport done;
  done.job = id;
  done.ranks_ok = 2;
  done.step = 1;
  done.ranks = 2;
  RegisterWith(NodeAt(id, 0), {{.job = id}}, {done});
  RegisterWith(NodeAt(id, 0), {{.job = id}}, {done});  // reported again: harmless
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].ranks_exited, 2);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kRunning);
  StepExits(id, 1, 1, 2, 0, 0, fx);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kCompleted);
}

// Batch jobs: the script runs once, on the allocation's first node.

int Launches(const Effects& fx, JobId id) {
  return static_cast<int>(
      std::count_if(fx.commands.begin(), fx.commands.end(), [&](const Command& c) {
        const auto* l = std::get_if<LaunchCommand>(&c);
        return l != nullptr && l->job == id && !l->step;
      }));
}

TEST_F(EngineTest, ABatchScriptRunsOnceAndItsStepsAreNumberedFromZero) {
  const JobId id = Submit(4, 0, 1000, JobLaunch::kBatchScript);
  const Effects started = Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(Launches(started, id), 1) << "the script runs on node rank 0 alone";
  Effects fx;
  absl::StatusOr<int> step = engine_->StartStep(JobRef{id, -1}, {}, {1000}, now_, fx);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 0);
  EXPECT_EQ(StepLaunches(fx, 0).size(), 4u);
  // A node whose step ranks are done stays the job's.
  StepExits(id, 0, 2, 2, 0, 0, fx);
  engine_->JobReleased(id, NodeAt(id, 2), now_, fx);
  EXPECT_EQ(engine_->FindJob(id)->run.released[2], 0);
  // The script exits 0 while the step still runs on the other nodes: the
  // job completes, and every node is told to stop.
  Effects end;
  engine_->RankExited(id, NodeAt(id, 0), 0, 0, now_, end);
  EXPECT_EQ(State(id), JobState::kCompleting);
  EXPECT_EQ(std::count_if(end.commands.begin(), end.commands.end(),
                          [](const Command& c) {
                            const auto* t = std::get_if<TerminateCommand>(&c);
                            return t != nullptr && !t->step;
                          }),
            4);
  for (int rank = 0; rank < 4; ++rank) engine_->JobReleased(id, NodeAt(id, rank), now_, end);
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kCancelled);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, ABatchScriptThatFailsFailsItsJob) {
  const JobId id = Submit(2, 0, 1000, JobLaunch::kBatchScript);
  Schedule();
  Effects fx;
  engine_->RankExited(id, NodeAt(id, 0), 7, 0, now_, fx);
  EXPECT_EQ(State(id), JobState::kCompleting);
  for (int rank = 0; rank < 2; ++rank) engine_->JobReleased(id, NodeAt(id, rank), now_, fx);
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(engine_->FindJob(id)->run.exit_code, 7);
  EXPECT_EQ(engine_->FindJob(id)->reason, fmt::format("the batch script on {} exited with code 7",
                                                      cluster_->topology.NodeName(NodeAt(id, 0))));
}

TEST_F(EngineTest, AnAllocationRunsOnlyItsStepsAndEndsWithItsCommand) {
  const JobId id = Submit(2, 0, 1000, JobLaunch::kAllocation);
  const Effects started = Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  EXPECT_EQ(Launches(started, id), 0) << "nothing of its own runs on the nodes";
  Effects fx;
  absl::StatusOr<int> step = engine_->StartStep(JobRef{id, -1}, {}, {1000}, now_, fx);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 0);
  StepExits(id, 0, 0, 2, 0, 0, fx);
  engine_->JobReleased(id, NodeAt(id, 0), now_, fx);
  EXPECT_EQ(State(id), JobState::kRunning) << "its nodes stay its own between steps";
  EXPECT_EQ(engine_->EndAllocation(JobRef{id, -1}, 0, {2000}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  const JobId batch = Submit(1, 0, 1000, JobLaunch::kBatchScript);
  Schedule();
  EXPECT_EQ(engine_->EndAllocation(JobRef{batch, -1}, 0, {1000}, now_, fx).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(engine_->EndAllocation(JobRef{id, -1}, 3, {1000}, now_, fx).ok());
  EXPECT_EQ(State(id), JobState::kCompleting);
  for (int rank = 0; rank < 2; ++rank) engine_->JobReleased(id, NodeAt(id, rank), now_, fx);
  EXPECT_EQ(State(id), JobState::kFailed);
  EXPECT_EQ(engine_->FindJob(id)->run.exit_code, 3);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, ABatchJobsOtherNodesRegisterWithNothingAndStayItsOwn) {
  const JobId id = Submit(2, 0, 1000, JobLaunch::kBatchScript);
  Schedule();
  Restart();
  now_ += kAgentKeepsFinishedLaunches;
  RegisterWith(NodeAt(id, 1), {}, {});
  EXPECT_EQ(State(id), JobState::kRunning) << "node rank 1 runs nothing until a step asks";
  RegisterWith(NodeAt(id, 0), {}, {});
  EXPECT_EQ(State(id), JobState::kCompleting) << "the script vanished with its node's agent";
}

// A controller that stopped between committing a start and sending the
// launch: the node's agent registers with the next one knowing nothing of
// the job, which it would list had it got it. The launch goes again; the
// job does not fail.
TEST_F(EngineTest, ALaunchThatNeverReachedItsNodeIsSentAgainWhenItRegisters) {
  const JobId id = Submit(2);
  Schedule();
  Restart();
  now_ += std::chrono::minutes(1);
  const NodeId first = NodeAt(id, 0);
  NodeReport report;
  report.cpus = 64;
  report.gpus = 8;
  report.memory_mb = 1024 * 1024;
  Effects fx;
  ASSERT_TRUE(engine_->NodeRegistered(first, report, now_, fx).ok());
  EXPECT_EQ(State(id), JobState::kRunning);
  ASSERT_EQ(fx.commands.size(), 1U);
  const auto* launch = std::get_if<LaunchCommand>(&fx.commands.front());
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->job, id);
  EXPECT_EQ(launch->node, first);
  EXPECT_EQ(launch->node_rank, 0);
  EXPECT_FALSE(launch->step.has_value());
  // The second node got its launch and runs it: nothing is sent again.
  RegisterWith(NodeAt(id, 1), {{id, 0, 0}}, {});
  EXPECT_EQ(State(id), JobState::kRunning);
  FinishEverywhere(id, 0);
  EXPECT_EQ(State(id), JobState::kCompleted);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, StepsEndWithTheirJobAndARequeueNumbersThemAnew) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->StartStep(JobRef{id, -1}, {}, {1000}, now_, fx).ok());
  ASSERT_TRUE(engine_->Requeue(JobRef{id, -1}, {1000}, now_, fx).ok());
  for (const alloc::NodeGrant& g : engine_->FindJob(id)->run.placement.grants) {
    engine_->JobReleased(id, g.node, now_, fx);
  }
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_TRUE(engine_->FindJob(id)->run.steps.empty());
  Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  absl::StatusOr<int> again = engine_->StartStep(JobRef{id, -1}, {}, {1000}, now_, fx);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 1);
  FinishEverywhere(id, 0);
  EXPECT_EQ(engine_->FindJob(id)->run.steps[0].state, StepState::kCancelled);
}

// `scontrol requeue 12; scancel 12`: the cancel arrives while the requeue
// stops the ranks, and the job ends CANCELLED instead of running again.
// Each terminate names the attempt it stops.
TEST_F(EngineTest, ACancelDuringARequeueEndsTheJob) {
  const JobId id = Submit(2);
  Schedule();
  Effects fx;
  ASSERT_TRUE(engine_->Requeue(JobRef{id, -1}, {1000}, now_, fx).ok());
  ASSERT_EQ(State(id), JobState::kCompleting);
  int terminates = 0;
  for (const Command& c : fx.commands) {
    if (const auto* t = std::get_if<TerminateCommand>(&c)) {
      EXPECT_EQ(t->attempt, 1);
      ++terminates;
    }
  }
  EXPECT_EQ(terminates, 2);
  ASSERT_TRUE(engine_->Cancel(JobRef{id, -1}, 0, {1000}, now_, fx).ok());
  for (const alloc::NodeGrant& g : engine_->FindJob(id)->run.placement.grants) {
    engine_->JobReleased(id, g.node, now_, fx);
  }
  EXPECT_EQ(State(id), JobState::kCancelled);
  EXPECT_EQ(engine_->FindJob(id)->reason, "cancelled by its owner");
  Schedule();
  EXPECT_EQ(State(id), JobState::kCancelled) << "it does not run again";
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

// --- --begin, --deadline, scontrol update, GPU types

TEST_F(EngineTest, BeginTimeKeepsAJobPendingUntilItComes) {
  JobRequest r;
  r.name = "later";
  r.user_name = "alice";
  r.uid = 1000;
  r.begin = now_ + std::chrono::seconds(20);
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(engine_->FindJob(id)->wait.reason, PendingReason::kBeginTime);
  EXPECT_EQ(engine_->FindJob(id)->reason, "BeginTime");
  TickAt(now_ + std::chrono::seconds(19));
  EXPECT_FALSE(engine_->ScheduleNeeded());
  TickAt(now_ + std::chrono::seconds(2));
  EXPECT_TRUE(engine_->ScheduleNeeded()) << "the begin time wakes a pass";
  Schedule();
  EXPECT_EQ(State(id), JobState::kRunning) << engine_->FindJob(id)->reason;
}

TEST_F(EngineTest, ADeadlineThatCanNoLongerBeMetCancelsThePendingJob) {
  JobRequest r;
  r.name = "late";
  r.user_name = "alice";
  r.uid = 1000;
  r.time_limit = std::chrono::minutes(30);
  r.deadline = now_ + std::chrono::minutes(10);
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  EXPECT_EQ(State(id), JobState::kCancelled);
  EXPECT_NE(engine_->FindJob(id)->reason.find("--deadline"), std::string::npos);
  // Without a time limit a deadline means nothing: refused at submit.
  r.time_limit = kUnlimited;
  const absl::StatusOr<JobId> unlimited = engine_->Submit(r, now_, fx);
  EXPECT_EQ(unlimited.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, UpdateChangesAPendingJobAsASubmissionWould) {
  const JobId blocker = Submit(8, 8);
  Schedule();
  JobRequest r;
  r.name = "waits";
  r.user_name = "alice";
  r.uid = 1000;
  r.gpus_per_node = 1;
  r.time_limit = std::chrono::minutes(30);
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  ASSERT_EQ(State(id), JobState::kPending);
  Engine::JobUpdate update;
  update.nodes = 4;
  update.time_limit = std::chrono::minutes(20);
  ASSERT_TRUE(engine_->Update(JobRef{id, -1}, update, Caller{1000}, now_, fx).ok());
  EXPECT_EQ(engine_->FindJob(id)->gang.nodes, 4);
  EXPECT_EQ(engine_->FindJob(id)->time_limit, std::chrono::minutes(20));
  // Its owner may shorten a limit but not raise it; an operator may.
  update = {};
  update.time_limit = std::chrono::minutes(50);
  EXPECT_EQ(engine_->Update(JobRef{id, -1}, update, Caller{1000}, now_, fx).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(engine_->Update(JobRef{id, -1}, update, Caller{0}, now_, fx).ok());
  // A shape that could never run, or a running job, is refused.
  update = {};
  update.nodes = 9;
  EXPECT_FALSE(engine_->Update(JobRef{id, -1}, update, Caller{1000}, now_, fx).ok());
  EXPECT_EQ(engine_->FindJob(id)->gang.nodes, 4);
  update.nodes = 1;
  EXPECT_EQ(engine_->Update(JobRef{blocker, -1}, update, Caller{1000}, now_, fx).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(engine_->CheckInvariants().ok()) << engine_->CheckInvariants();
}

TEST_F(EngineTest, StepsOnOneFirstNodeGetRendezvousPortsOfTheirOwn) {
  // Two allocations on node 0, jobs 1 and 2 (ports 20001 and 20002). Job
  // 1's step 1 would be 20002 by its job's port and its id: job 2 has it,
  // so it gets the next free one, and job 2's step 0 keeps its job's.
  JobRequest r;
  r.name = "alloc";
  r.user_name = "alice";
  r.uid = 1000;
  r.launch = JobLaunch::kAllocation;
  r.nodelist = {cluster_->topology.NodeName(0)};
  Effects fx;
  const JobId a = engine_->Submit(r, now_, fx).value();
  const JobId b = engine_->Submit(r, now_, fx).value();
  Schedule();
  ASSERT_EQ(State(a), JobState::kRunning);
  ASSERT_EQ(State(b), JobState::kRunning);
  const alloc::StepRequest overlap{.nodes = 1, .sharing = alloc::StepSharing::kOverlap};
  const Caller alice{1000};
  const int a0 = engine_->StartStep(JobRef{a, -1}, overlap, alice, now_, fx).value();
  const int a1 = engine_->StartStep(JobRef{a, -1}, overlap, alice, now_, fx).value();
  const int b0 = engine_->StartStep(JobRef{b, -1}, overlap, alice, now_, fx).value();
  const auto port = [&](JobId job, int step) {
    for (const JobStep& s : engine_->FindJob(job)->run.steps) {
      if (s.id == step) return s.master_port;
    }
    return -1;
  };
  EXPECT_EQ(engine_->FindJob(a)->run.master_port, 20001);
  EXPECT_EQ(engine_->FindJob(b)->run.master_port, 20002);
  EXPECT_EQ(port(a, a0), 20001);
  EXPECT_EQ(port(a, a1), 20003);
  EXPECT_EQ(port(b, b0), 20002);
}

TEST_F(EngineTest, AGpuTypeLandsOnlyOnNodesOfThatType) {
  ClusterBuilder builder = ClusterBuilder().Leaves(2).NodesPerLeaf(4);
  cluster_ = std::make_unique<testing::Cluster>(builder.Build());
  config_.nodes = cluster_->nodes;
  for (std::size_t i = 0; i < config_.nodes.size(); ++i) {
    config_.nodes[i].gpu_type = i < 4 ? "h100" : "a100";
  }
  config_.partitions.front().nodes = cluster_->topology.NodeNames();
  alloc::NodePool pool =
      alloc::NodePool::Create(cluster_->topology, config_.nodes, config_.partitions).value();
  engine_ = std::make_unique<Engine>(config_, cluster_->topology, std::move(pool));
  for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) Register(n);
  JobRequest r;
  r.name = "typed";
  r.user_name = "alice";
  r.uid = 1000;
  r.nodes = 2;
  r.gpus_per_node = 1;
  r.gpu_type = "a100";
  Effects fx;
  const JobId id = engine_->Submit(r, now_, fx).value();
  Schedule();
  ASSERT_EQ(State(id), JobState::kRunning);
  for (const alloc::NodeGrant& g : engine_->FindJob(id)->run.placement.grants) EXPECT_GE(g.node, 4);
  r.gpu_type = "v100";
  const absl::StatusOr<JobId> none = engine_->Submit(r, now_, fx);
  EXPECT_EQ(none.status().message(),
            "--gres=gpu:v100:N: no node has GPUs of type v100; types here: h100, a100");
}

}  // namespace
}  // namespace cohort
