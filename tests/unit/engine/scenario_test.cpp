// SPDX-License-Identifier: Apache-2.0
// Policy scenarios on the real engine in virtual time that check more than
// a transcript shows (shares over a week, reservations kept to the second,
// an array's pending record, what `cohort why` says); scenarios a
// transcript pins are files in tests/data/scenarios/ (docs/simulator.md).
// A small harness plays the agents (ranks run for their job's runtime, stop
// on SIGTERM, checkpoint on the preemption warning when asked to) and
// writes a transcript of what the engine decided. Transcripts that pin a decision are compared with
// golden files in tests/data/golden (COHORT_UPDATE_GOLDEN=1 rewrites them).
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cohort/engine/engine.h"
#include "cohort/text/hostlist.h"
#include "test_support.h"

namespace cohort {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::ClusterBuilder;

constexpr Millis kEpoch{1'700'000'000'000};

struct SimJob {
  Millis runtime{0};
  /// Seconds after the preemption warning at which the job says
  /// checkpoint-done; negative: never (it runs out its grace time).
  int checkpoint_after = -1;
  /// Its ranks die of the preemption warning (USR1) instead of handling it.
  bool dies_on_warning = false;
};

// The engine, a clock, and agents that obey it.
class VirtualCluster {
 public:
  VirtualCluster(testing::Cluster cluster, config::ClusterConfig config)
      : cluster_(std::make_unique<testing::Cluster>(std::move(cluster))),
        config_(std::move(config)) {
    config_.nodes = cluster_->nodes;
    if (config_.partitions.empty()) {
      config::PartitionSpec all;
      all.name = "all";
      all.is_default = true;
      all.nodes = cluster_->topology.NodeNames();
      all.max_time = hours(24 * 30);
      config_.partitions = {all};
    }
    config_.node_timeout = seconds(300);
    alloc::NodePool pool =
        alloc::NodePool::Create(cluster_->topology, config_.nodes, config_.partitions).value();
    engine_ = std::make_unique<Engine>(config_, cluster_->topology, std::move(pool));
    for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) {
      NodeReport report;
      report.cpus = cluster_->nodes[static_cast<std::size_t>(n)].cpus;
      report.memory_mb = cluster_->nodes[static_cast<std::size_t>(n)].memory_mb;
      report.gpus = cluster_->nodes[static_cast<std::size_t>(n)].gpus;
      Effects fx;
      EXPECT_TRUE(engine_->NodeRegistered(n, report, now_, fx).ok());
    }
  }

  Engine& engine() { return *engine_; }
  Millis now() const { return now_; }
  const std::vector<std::string>& transcript() const { return transcript_; }

  absl::StatusOr<JobId> Submit(JobRequest request, SimJob sim) {
    if (request.user_name.empty()) request.user_name = "user";
    if (request.name.empty()) request.name = "job";
    Effects fx;
    absl::StatusOr<JobId> id = engine_->Submit(std::move(request), now_, fx);
    if (id.ok()) {
      sims_[*id] = sim;
      Log(fmt::format("submit job {}", *id));
    }
    Apply(fx);
    return id;
  }

  // Advances to `until` in steps of `step`, ticking and scheduling.
  void RunUntil(Millis until, Millis step = seconds(1)) {
    while (now_ < until) {
      now_ = std::min(until, now_ + step);
      Effects fx;
      // Ranks whose runtime is over exit 0; nodes then release.
      std::vector<JobId> done;
      for (const auto& [id, end] : ends_) {
        if (end <= now_) done.push_back(id);
      }
      for (const JobId id : done) {
        ends_.erase(id);
        ExitAll(id, 0, 0, fx);
      }
      for (auto it = checkpoints_.begin(); it != checkpoints_.end();) {
        if (it->second <= now_) {
          Log(fmt::format("job {} checkpoint-done", it->first));
          EXPECT_TRUE(engine_->CheckpointDone(JobRef{it->first, -1}, Caller{0}, now_, fx).ok());
          it = checkpoints_.erase(it);
        } else {
          ++it;
        }
      }
      for (NodeId n = 0; n < cluster_->topology.NodeCount(); ++n) engine_->NodeHeartbeat(n, now_);
      engine_->Tick(now_, fx);
      Apply(fx);
      if (engine_->ScheduleNeeded()) {
        Effects pass;
        engine_->Schedule(now_, pass);
        Apply(pass);
      }
      const absl::Status ok = engine_->CheckInvariants();
      ASSERT_TRUE(ok.ok()) << ok;
    }
  }

  // The clock moves on without a tick: events before the controller's next.
  void Skip(Millis by) { now_ += by; }
  // The pass the controller runs after an event.
  void Pass() {
    if (!engine_->ScheduleNeeded()) return;
    Effects pass;
    engine_->Schedule(now_, pass);
    Apply(pass);
  }

  // Runs until every job has finished (or `limit` passes).
  void Drain(Millis limit, Millis step = seconds(1)) {
    const Millis until = now_ + limit;
    while (now_ < until) {
      bool open = false;
      for (const auto& [id, job] : engine_->Jobs()) open = open || !IsFinished(job.state);
      if (!open) return;
      RunUntil(std::min(until, now_ + minutes(10)), step);
    }
  }

  int Running() const {
    int running = 0;
    for (const auto& [id, job] : engine_->Jobs())
      running += job.state == JobState::kRunning ? 1 : 0;
    return running;
  }

  std::string NodesOf(JobId id) const {
    std::vector<std::string> names;
    for (const alloc::NodeGrant& g : engine_->FindJob(id)->run.placement.grants) {
      names.push_back(cluster_->topology.NodeName(g.node));
    }
    return hostlist::Compress(names);
  }

  std::function<void(JobId, Millis)> on_start;

  /// Plays out what a direct engine call decided (terminations, launches).
  void Play(Effects& fx) { Apply(fx); }

  /// A job as last seen: finished jobs leave the engine after a while.
  const Job& Seen(JobId id) const { return seen_.at(id); }
  const std::map<JobId, Job>& AllSeen() const { return seen_; }

 private:
  void Log(std::string line) {
    transcript_.push_back(fmt::format("t={}s {}", (now_ - kEpoch).count() / 1000, line));
  }

  void ExitAll(JobId id, int code, int signal, Effects& fx) {
    const Job* job = engine_->FindJob(id);
    if (job == nullptr) return;
    const std::vector<alloc::NodeGrant> grants = job->run.placement.grants;
    const int tasks = job->gang.tasks_per_node;
    for (const alloc::NodeGrant& g : grants) {
      for (int r = 0; r < tasks; ++r) engine_->RankExited(id, g.node, code, signal, now_, fx);
    }
    for (const alloc::NodeGrant& g : grants) engine_->JobReleased(id, g.node, now_, fx);
  }

  void Apply(Effects& fx) {
    for (const JobId id : fx.changed_jobs) {
      if (const Job* job = engine_->FindJob(id)) seen_[id] = *job;
    }
    // Commands may lead to more (an exit frees nodes for the next pass).
    std::set<JobId> terminated;
    for (const Command& c : fx.commands) {
      if (const auto* launch = std::get_if<LaunchCommand>(&c)) {
        if (launch->node_rank != 0) continue;
        const Job& job = *engine_->FindJob(launch->job);
        Log(fmt::format("start job {} attempt {} on {}", DisplayId(job), job.run.attempt,
                        NodesOf(launch->job)));
        ends_[launch->job] =
            now_ + sims_[job.array.job_id != 0 ? job.array.job_id : job.id].runtime;
        if (on_start) on_start(launch->job, now_);
      } else if (const auto* sig = std::get_if<SignalCommand>(&c)) {
        Log(fmt::format("signal {} to job {} on {}",
                        sig->signal == SIGUSR1   ? "USR1"
                        : sig->signal == SIGSTOP ? "STOP"
                        : sig->signal == SIGCONT ? "CONT"
                                                 : std::to_string(sig->signal),
                        sig->job, cluster_->topology.NodeName(sig->node)));
        const SimJob& sim = sims_[sig->job];
        if (sig->signal == SIGUSR1 && sim.checkpoint_after >= 0 &&
            !checkpoints_.contains(sig->job)) {
          checkpoints_[sig->job] = now_ + seconds(sim.checkpoint_after);
        }
        if (sig->signal == SIGUSR1 && sim.dies_on_warning) died_.insert(sig->job);
      } else if (const auto* term = std::get_if<TerminateCommand>(&c)) {
        if (terminated.insert(term->job).second) {
          Log(fmt::format("terminate job {}", term->job));
        }
      }
    }
    for (const JobId id : std::exchange(died_, {})) {
      ends_.erase(id);
      Effects more;
      ExitAll(id, 0, SIGUSR1, more);
      Apply(more);
    }
    for (const JobId id : terminated) {
      ends_.erase(id);
      checkpoints_.erase(id);
      Effects more;
      ExitAll(id, 0, SIGTERM, more);
      fx.commands.clear();
      Apply(more);
    }
  }

  std::unique_ptr<testing::Cluster> cluster_;
  config::ClusterConfig config_;
  std::unique_ptr<Engine> engine_;
  Millis now_ = kEpoch;
  std::map<JobId, SimJob> sims_;
  std::map<JobId, Millis> ends_;
  std::set<JobId> died_;  ///< jobs whose ranks die of the warning just sent
  std::map<JobId, Millis> checkpoints_;
  std::vector<std::string> transcript_;
  std::map<JobId, Job> seen_;
};

JobRequest Request(int nodes, int gpus, seconds limit, std::string account = "a",
                   std::string partition = "") {
  JobRequest r;
  r.nodes = nodes;
  r.gpus_per_node = gpus;
  r.time_limit = limit;
  r.account = account;
  r.user_name = account + "-user";
  r.partition = std::move(partition);
  return r;
}

void ExpectGolden(const std::vector<std::string>& transcript, const std::string& name) {
  const std::string path = testing::DataPath("golden/" + name);
  std::string text;
  for (const std::string& line : transcript) text += line + "\n";
  if (std::getenv("COHORT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path) << text;
    return;
  }
  EXPECT_EQ(text, testing::ReadData("golden/" + name))
      << "the transcript changed; if the new one is right, run with COHORT_UPDATE_GOLDEN=1";
}

// Two accounts with equal shares submit equal streams of 1-node, 8-GPU jobs
// that together ask for twice the cluster: over a simulated week, fair share
// gives each within 5 % of half the GPU-hours.
TEST(ScenarioTest, EqualSharesGetEqualGpuHours) {
  config::ClusterConfig config;
  for (const char* name : {"physics", "biology"}) {
    config::AccountSpec& account = config.accounts.emplace_back();
    account.name = name;
  }
  config.priority.decay_half_life = hours(24);
  config.priority.age = 0;  // fair share alone decides between equals
  VirtualCluster sim(ClusterBuilder().Leaves(2).NodesPerLeaf(8).Build(), config);
  std::map<std::string, double> gpu_hours;
  sim.on_start = [&](JobId id, Millis) {
    const Job& job = *sim.engine().FindJob(id);
    gpu_hours[job.request.account] += 8.0;  // every job runs 1 h on 8 GPUs
  };
  // Physics submits its week's stream up front; biology at a steady rate,
  // so submission order alone would favour physics.
  for (int i = 0; i < 7 * 24 * 16; ++i) {
    ASSERT_TRUE(sim.Submit(Request(1, 8, hours(1), "physics"), {hours(1)}).ok());
  }
  for (int day = 0; day < 7; ++day) {
    for (int i = 0; i < 24 * 16; ++i) {
      ASSERT_TRUE(sim.Submit(Request(1, 8, hours(1), "biology"), {hours(1)}).ok());
    }
    // Five-minute steps: every job runs an hour, and each step is a pass
    // over thousands of waiting jobs and a check of every invariant.
    sim.RunUntil(sim.now() + hours(24), minutes(5));
  }
  const double total = gpu_hours["physics"] + gpu_hours["biology"];
  ASSERT_GT(total, 0);
  EXPECT_NEAR(gpu_hours["physics"] / total, 0.5, 0.05)
      << gpu_hours["physics"] << " vs " << gpu_hours["biology"];
}

// A backfilled job never delays the top job's reservation: the 8-node job
// starts exactly when the running jobs' limits said it would.
// On 8 nodes under 2 leaves, six nodes busy (two until 1 h, four until 2 h,
// each running to its limit), then an 8-node job that waits with a
// reservation. Returns the waiting job.
// `config` with QOS normal and high (priority 100).
config::ClusterConfig WithHighQos(config::ClusterConfig config) {
  config::QosSpec normal;
  normal.name = "normal";
  config::QosSpec high;
  high.name = "high";
  high.priority = 100;
  config.qos = {normal, high};
  return config;
}

JobId BusyClusterWithAWaitingGang(VirtualCluster& sim) {
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(sim.Submit(Request(1, 8, hours(1)), {hours(1)}).ok());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(sim.Submit(Request(1, 8, hours(2)), {hours(2)}).ok());
  sim.RunUntil(sim.now() + seconds(1));
  const JobId wide = sim.Submit(Request(8, 8, hours(1)), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  return wide;
}

TEST(ScenarioTest, BackfillNeverDelaysTheTopReservation) {
  VirtualCluster sim(ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build(), {});
  const JobId wide = BusyClusterWithAWaitingGang(sim);
  const Millis promised = sim.engine().FindJob(wide)->cache.expected_start;
  ASSERT_NE(promised.count(), 0);
  // Its plan names the nodes it is to start on: all 8, each once.
  std::vector<NodeId> planned = sim.engine().FindJob(wide)->cache.planned_nodes;
  std::sort(planned.begin(), planned.end());
  EXPECT_EQ(planned.size(), 8U);
  EXPECT_EQ(std::unique(planned.begin(), planned.end()), planned.end());
  // Short jobs fit before the reservation; long ones would delay it.
  const JobId short_one = sim.Submit(Request(1, 8, minutes(30)), {minutes(30)}).value();
  const JobId long_one = sim.Submit(Request(1, 8, hours(5)), {hours(5)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  EXPECT_EQ(sim.engine().FindJob(short_one)->state, JobState::kRunning)
      << "it ends before the reservation";
  EXPECT_EQ(sim.engine().FindJob(long_one)->state, JobState::kPending);
  // Nothing was freed since the full pass that reserved, and both are behind
  // the waiting job: the pass after their submission tries only them. The
  // reservation stands; the long job's start is planned by the next full pass.
  EXPECT_EQ(sim.engine().FindJob(long_one)->reason, "Priority");
  EXPECT_EQ(sim.engine().FindJob(long_one)->cache.expected_start.count(), 0);
  EXPECT_EQ(sim.engine().FindJob(wide)->cache.expected_start, promised);
  sim.RunUntil(promised + seconds(2));
  const Job& started = *sim.engine().FindJob(wide);
  EXPECT_EQ(started.state, JobState::kRunning);
  EXPECT_LE(started.run.start_time, promised + seconds(1));
  EXPECT_TRUE(started.cache.planned_nodes.empty()) << "a started job has no plan";
  EXPECT_EQ(sim.engine().FindJob(long_one)->cache.planned_nodes.empty(),
            sim.engine().FindJob(long_one)->cache.expected_start.count() == 0);
}

// A submission ahead of the partition's waiting job gets a full pass, and
// with it a reservation of its own, even when nothing was freed.
TEST(PolicyTest, ASubmissionAheadOfTheWaitingJobGetsAFullPass) {
  const config::ClusterConfig config = WithHighQos({});
  VirtualCluster sim(ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build(), config);
  BusyClusterWithAWaitingGang(sim);
  JobRequest urgent = Request(3, 8, hours(1));  // 2 nodes are free
  urgent.qos = "high";
  const JobId ahead = sim.Submit(urgent, {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  const Job& first = *sim.engine().FindJob(ahead);
  EXPECT_EQ(first.state, JobState::kPending);
  EXPECT_EQ(first.reason, "Resources");
  EXPECT_NE(first.cache.expected_start.count(), 0);
  EXPECT_EQ(sim.engine().PendingOrder().front(), ahead);
}

// After a job ends, a pass walks only the part of the queue the last full
// pass ordered, with the jobs submitted since: a job that a submission
// pass left waiting is tried there, and starts where it delays nothing.
TEST(PolicyTest, AJobEndLetsAJobSubmittedSinceTheLastFullPassStart) {
  VirtualCluster sim(ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build(), {});
  // Six of eight nodes busy, two of them for 20 s only; all eight wanted.
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(sim.Submit(Request(1, 8, hours(1)), {seconds(20)}).ok());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(sim.Submit(Request(1, 8, hours(2)), {hours(2)}).ok());
  sim.RunUntil(sim.now() + seconds(1));
  const JobId wide = sim.Submit(Request(8, 8, hours(1)), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  ASSERT_EQ(sim.engine().FindJob(wide)->reason, "Resources");
  // Three nodes for half an hour: two are free, so it waits.
  const JobId small = sim.Submit(Request(3, 8, minutes(30)), {minutes(30)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  ASSERT_EQ(sim.engine().FindJob(small)->state, JobState::kPending);
  // The short jobs end within seconds of the full pass: four nodes free,
  // and the small job ends long before the wide one can start.
  sim.RunUntil(sim.now() + seconds(20));
  const Job& job = *sim.engine().FindJob(small);
  EXPECT_EQ(job.state, JobState::kRunning) << job.reason << ": " << job.reason_detail;
  EXPECT_EQ(sim.engine().FindJob(wide)->state, JobState::kPending);
}

// A job that others depend on gets a full pass when it ends: one waiting
// for it far down the queue learns at once that it waits only for Priority
// now, not for its dependency.
TEST(PolicyTest, TheEndOfADependencyTargetIsAFullPass) {
  config::ClusterConfig config;
  config.backfill_depth = 1;
  VirtualCluster sim(ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build(), config);
  const JobId target = sim.Submit(Request(1, 8, hours(1)), {seconds(20)}).value();
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(sim.Submit(Request(1, 8, hours(2)), {hours(2)}).ok());
  sim.RunUntil(sim.now() + seconds(1));
  const JobId wide = sim.Submit(Request(8, 8, hours(1)), {hours(1)}).value();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(sim.Submit(Request(1, 8, hours(1)), {hours(1)}).ok());
  JobRequest after = Request(1, 8, hours(1));
  after.dependency = {{{DependencyType::kAfterAny, target, -1}}, false};
  const JobId dependent = sim.Submit(after, {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  ASSERT_EQ(sim.engine().FindJob(wide)->reason, "Resources");
  ASSERT_EQ(sim.engine().FindJob(dependent)->reason, "Dependency");
  sim.RunUntil(sim.now() + seconds(20));  // the target ends
  ASSERT_NE(sim.engine().FindJob(target)->state, JobState::kRunning);
  const Job& job = *sim.engine().FindJob(dependent);
  EXPECT_EQ(job.state, JobState::kPending);
  EXPECT_EQ(job.reason, "Priority") << job.reason_detail;
}

// Priorities whose age factor alone moves (full within 10 minutes).
config::ClusterConfig AgeOnly() {
  config::ClusterConfig config;
  config.priority.max_age = minutes(10);
  config.priority.fairshare = 0;
  return config;
}

// One job holds the whole (two-node) cluster and one waits behind it; a
// pass has run. Returns the waiting job.
JobId WaitBehindAFullCluster(VirtualCluster& sim) {
  EXPECT_TRUE(sim.Submit(Request(2, 8, hours(1)), {hours(1)}).ok());
  const JobId waiting = sim.Submit(Request(1, 8, hours(1)), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(1));
  return waiting;
}

// While jobs wait and nothing happens, the clock still orders the queue
// afresh every 30 s: priorities (here the age factor) stay current.
TEST(PolicyTest, WhileJobsWaitTheQueueIsOrderedAfreshEveryThirtySeconds) {
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build(), AgeOnly());
  const JobId waiting = WaitBehindAFullCluster(sim);
  const std::int64_t first = sim.engine().FindJob(waiting)->cache.priority;
  sim.RunUntil(sim.now() + seconds(20));
  EXPECT_EQ(sim.engine().FindJob(waiting)->cache.priority, first);
  sim.RunUntil(sim.now() + seconds(20));
  EXPECT_GT(sim.engine().FindJob(waiting)->cache.priority, first);
}

// A submission long after the last full pass is still tried alone: ordering
// the queue afresh is the clock's work, not paid for by whichever
// submission comes next (with 100,000 jobs queued it would wait ~100 ms).
TEST(PolicyTest, ASubmissionLongAfterTheLastFullPassIsTriedAlone) {
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build(), AgeOnly());
  const JobId waiting = WaitBehindAFullCluster(sim);
  const std::int64_t first = sim.engine().FindJob(waiting)->cache.priority;
  sim.Skip(minutes(2));
  const JobId late = sim.Submit(Request(1, 8, hours(1)), {hours(1)}).value();
  sim.Pass();
  EXPECT_EQ(sim.engine().FindJob(waiting)->cache.priority, first);
  EXPECT_EQ(sim.engine().FindJob(late)->state, JobState::kPending);
  EXPECT_EQ(sim.engine().FindJob(late)->reason, "Priority");
  sim.RunUntil(sim.now() + seconds(1));  // the next tick
  EXPECT_GT(sim.engine().FindJob(waiting)->cache.priority, first);
}

// Once one partition's waiting job has spent the backfill depth, the jobs
// of another partition, further down the queue, are still tried in their
// order: the higher one starts, the one behind it waits.
TEST(PolicyTest, APartitionWithoutAWaitingJobIsServedInOrderAfterTheDepthIsSpent) {
  config::ClusterConfig config;
  config.backfill_depth = 1;
  config = WithHighQos(std::move(config));
  testing::Cluster cluster = ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build();
  config::PartitionSpec a, b;
  a.name = "a";
  a.is_default = true;
  b.name = "b";
  a.max_time = b.max_time = hours(24);
  const std::vector<std::string> names = cluster.topology.NodeNames();
  a.nodes.assign(names.begin(), names.begin() + 4);
  b.nodes.assign(names.begin() + 4, names.end());
  config.partitions = {a, b};
  VirtualCluster sim(std::move(cluster), config);
  // Partition a's jobs come first in the queue (their QOS).
  const auto in_a = [](int nodes) {
    JobRequest r = Request(nodes, 8, hours(2), "x", "a");
    r.qos = "high";
    return r;
  };
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(sim.Submit(in_a(1), {hours(2)}).ok());
  sim.RunUntil(sim.now() + seconds(1));
  // a: a waiting gang, then more jobs behind it than the backfill depth.
  const JobId gang = sim.Submit(in_a(4), {hours(1)}).value();
  std::vector<JobId> behind;
  for (int i = 0; i < 3; ++i) behind.push_back(sim.Submit(in_a(1), {hours(1)}).value());
  // b: its four nodes free; the wider of its jobs is the higher (size).
  const JobId first = sim.Submit(Request(4, 8, hours(1), "x", "b"), {hours(1)}).value();
  const JobId second = sim.Submit(Request(2, 8, hours(1), "x", "b"), {hours(1)}).value();
  // a again, at the end of the queue: past the depth, once b waits too.
  std::vector<JobId> last;
  for (int i = 0; i < 3; ++i) {
    last.push_back(sim.Submit(Request(1, 8, hours(1), "x", "a"), {hours(1)}).value());
  }
  sim.RunUntil(sim.now() + seconds(1));
  const std::vector<JobId> order = sim.engine().PendingOrder();
  ASSERT_EQ(order.front(), gang);
  EXPECT_EQ(sim.engine().FindJob(gang)->reason, "Resources");
  for (const JobId id : behind) EXPECT_EQ(sim.engine().FindJob(id)->reason, "Priority") << id;
  EXPECT_EQ(sim.engine().FindJob(first)->state, JobState::kRunning);
  const Job& waiting = *sim.engine().FindJob(second);
  EXPECT_EQ(waiting.state, JobState::kPending);
  EXPECT_EQ(waiting.reason, "Resources");
  for (const JobId id : last) {
    EXPECT_EQ(sim.engine().FindJob(id)->reason, "Priority") << id;
    EXPECT_GT(std::find(order.begin(), order.end(), id),
              std::find(order.begin(), order.end(), second));
  }
}

// The top job of a partition is not starved by a stream of small jobs on a
// 1,024-node fat tree: a 64-node gang starts once the nodes it reserved free.
TEST(ScenarioTest, WideGangIsNotStarvedByOneNodeJobs) {
  config::NodeSpec node = config::DefaultNodeSpec("x");
  VirtualCluster sim(
      testing::ClusterFromTopology(testing::ReadData("topologies/fat-tree-1024.conf"), node), {});
  std::mt19937 random(7);
  std::uniform_int_distribution<int> runtime(10, 60);
  // Fill the cluster with 1-node jobs of 10-60 minutes.
  for (int i = 0; i < 1024; ++i) {
    const minutes r(runtime(random));
    ASSERT_TRUE(sim.Submit(Request(1, 8, hours(1)), {r}).ok());
  }
  sim.RunUntil(sim.now() + seconds(1));
  const JobId wide = sim.Submit(Request(64, 8, hours(1)), {minutes(30)}).value();
  // And keep a stream of small jobs coming, more than the cluster can run.
  for (int minute = 0; minute < 120; ++minute) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(sim.Submit(Request(1, 8, hours(1)), {minutes(runtime(random))}).ok());
    }
    sim.RunUntil(sim.now() + minutes(1), seconds(10));
    if (sim.engine().FindJob(wide)->state != JobState::kPending) break;
  }
  EXPECT_NE(sim.engine().FindJob(wide)->state, JobState::kPending)
      << "the 64-node job still waits: " << sim.engine().FindJob(wide)->reason_detail;
}

// A high-tier 16-node job preempts the cheapest victims inside one leaf; they
// get SIGUSR1, then (after the grace time, or at once on checkpoint-done)
// SIGTERM, and are requeued to run again later.
TEST(ScenarioTest, PreemptionTakesMinimalVictimsInOneLeaf) {
  config::ClusterConfig config;
  config.preempt_mode = config::PreemptMode::kRequeue;
  config.preempt_grace_time = seconds(30);
  config::PartitionSpec low, high;
  low.name = "low";
  low.is_default = true;
  low.priority_tier = 1;
  high.name = "high";
  high.priority_tier = 10;
  ClusterBuilder shape = ClusterBuilder().Leaves(4).NodesPerLeaf(16);
  testing::Cluster cluster = shape.Build();
  low.nodes = high.nodes = cluster.topology.NodeNames();
  low.max_time = high.max_time = hours(24);
  config.partitions = {low, high};
  VirtualCluster sim(std::move(cluster), config);
  // 64 one-node sweep jobs; those on leaf 3 started last (cheapest to stop).
  std::vector<JobId> sweep;
  for (int i = 0; i < 64; ++i) {
    sweep.push_back(sim.Submit(Request(1, 8, hours(10), "sweep", "low"), {hours(3), 5}).value());
    if (i % 16 == 15) sim.RunUntil(sim.now() + minutes(10));
  }
  sim.RunUntil(sim.now() + minutes(10));
  ASSERT_EQ(sim.Running(), 64);
  const JobId big = sim.Submit(Request(16, 8, hours(1), "pretrain", "high"), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(60));
  const Job& job = *sim.engine().FindJob(big);
  ASSERT_EQ(job.state, JobState::kRunning) << job.reason << ": " << job.reason_detail;
  EXPECT_EQ(job.run.placement.leaves.size(), 1U);
  int preempted = 0;
  for (const JobId id : sweep) {
    const Job& victim = *sim.engine().FindJob(id);
    if (victim.preemption.records.empty()) continue;
    ++preempted;
    EXPECT_EQ(victim.state, JobState::kPending);
    EXPECT_EQ(victim.run.attempt, 2);
    EXPECT_EQ(victim.preemption.records.front().by_job, big);
  }
  EXPECT_EQ(preempted, 16);
  // Every victim got USR1 before it was terminated.
  std::map<std::string, int> order;
  for (std::size_t i = 0; i < sim.transcript().size(); ++i) {
    const std::string& line = sim.transcript()[i];
    for (const JobId id : sweep) {
      const std::string tag = fmt::format("job {} ", id);
      if (line.find("signal USR1 to " + tag) != std::string::npos)
        order.try_emplace("usr1 " + std::to_string(id), static_cast<int>(i));
      if (line.find("terminate " + tag) != std::string::npos ||
          line.ends_with(fmt::format("terminate job {}", id))) {
        order.try_emplace("term " + std::to_string(id), static_cast<int>(i));
      }
    }
  }
  for (const JobId id : sweep) {
    if (!order.contains("term " + std::to_string(id))) continue;
    ASSERT_TRUE(order.contains("usr1 " + std::to_string(id))) << "job " << id << " got no warning";
    EXPECT_LT(order["usr1 " + std::to_string(id)], order["term " + std::to_string(id)]);
  }
  ExpectGolden(sim.transcript(), "preempt_one_leaf.txt");
  // The victims run again once the big job ends.
  sim.Drain(hours(12), seconds(10));
  for (const JobId id : sweep) EXPECT_EQ(sim.Seen(id).state, JobState::kCompleted);
}

// --- single rules, on the same harness

TEST(PolicyTest, ArrayTasksAreCancelledOneByOneOrAllTogether) {
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build(), {});
  JobRequest r = Request(1, 8, hours(1));
  r.array.tasks = {0, 1, 2, 3, 4, 5};
  const JobId array = sim.Submit(r, {minutes(30)}).value();
  sim.RunUntil(sim.now() + seconds(2));
  EXPECT_EQ(sim.Running(), 2);
  EXPECT_EQ(DisplayId(*sim.engine().FindJob(array)), fmt::format("{}_[2-5]", array));
  Effects fx;
  ASSERT_TRUE(sim.engine().Cancel(JobRef{array, 4}, 0, Caller{0}, sim.now(), fx).ok());
  sim.Play(fx);
  EXPECT_EQ(DisplayId(*sim.engine().FindJob(array)), fmt::format("{}_[2-3,5]", array));
  EXPECT_EQ(sim.engine().Lookup(JobRef{array, 4}).size(), 0U) << "a cancelled task is gone";
  EXPECT_EQ(sim.engine().Lookup(JobRef{array, 0}).size(), 1U);
  ASSERT_TRUE(sim.engine().Cancel(JobRef{array, -1}, 0, Caller{0}, sim.now(), fx).ok());
  sim.Play(fx);
  sim.RunUntil(sim.now() + seconds(2));
  for (const JobId id : sim.engine().Lookup(JobRef{array, -1})) {
    EXPECT_EQ(sim.engine().FindJob(id)->state, JobState::kCancelled) << id;
  }
}

TEST(PolicyTest, OnePendingTaskOfAnArrayIsHeldAndReleasedAlone) {
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(1).Build(), {});
  JobRequest r = Request(1, 8, hours(1));
  r.array.tasks = {0, 1, 2, 3};
  const JobId array = sim.Submit(r, {minutes(30)}).value();
  Effects fx;
  ASSERT_TRUE(sim.engine().Hold(JobRef{array, -1}, Caller{0}, sim.now(), fx).ok());
  ASSERT_TRUE(sim.engine().Release(JobRef{array, 2}, Caller{0}, sim.now(), fx).ok());
  sim.Play(fx);
  const std::vector<JobId> two = sim.engine().Lookup(JobRef{array, 2});
  ASSERT_EQ(two.size(), 1U);
  EXPECT_NE(two.front(), array) << "task 2 was split off the array's record";
  EXPECT_FALSE(IsHeld(*sim.engine().FindJob(two.front())));
  EXPECT_TRUE(IsHeld(*sim.engine().FindJob(array))) << "the other tasks stay held";
  EXPECT_EQ(DisplayId(*sim.engine().FindJob(array)), fmt::format("{}_[0-1,3]", array));
  sim.RunUntil(sim.now() + seconds(2));
  EXPECT_EQ(sim.engine().FindJob(two.front())->state, JobState::kRunning);
  // Holding one pending task leaves the rest as they were.
  ASSERT_TRUE(sim.engine().Release(JobRef{array, -1}, Caller{0}, sim.now(), fx).ok());
  ASSERT_TRUE(sim.engine().Hold(JobRef{array, 3}, Caller{0}, sim.now(), fx).ok());
  sim.Play(fx);
  const std::vector<JobId> three = sim.engine().Lookup(JobRef{array, 3});
  ASSERT_EQ(three.size(), 1U);
  EXPECT_TRUE(IsHeld(*sim.engine().FindJob(three.front())));
  EXPECT_FALSE(IsHeld(*sim.engine().FindJob(array)));
}

TEST(PolicyTest, QosLimitsWaitOrRefuse) {
  config::ClusterConfig config;
  config::QosSpec normal;
  normal.name = "normal";
  normal.max_jobs_per_user = 1;
  normal.max_submit_jobs_per_user = 3;
  normal.max_gpus_per_user = 16;
  config.qos = {normal};
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(4).Build(), config);
  const JobId first = sim.Submit(Request(1, 8, hours(1)), {hours(1)}).value();
  const JobId second = sim.Submit(Request(1, 8, hours(1)), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(2));
  EXPECT_EQ(sim.engine().FindJob(first)->state, JobState::kRunning);
  EXPECT_EQ(sim.engine().FindJob(second)->reason, "QOSMaxJobsPerUserLimit");
  EXPECT_TRUE(sim.Submit(Request(1, 8, hours(1)), {hours(1)}).ok());
  const absl::StatusOr<JobId> over = sim.Submit(Request(1, 8, hours(1)), {hours(1)});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("MaxSubmitJobsPerUser"), std::string::npos);
  const absl::StatusOr<JobId> wide = sim.Submit(Request(3, 8, hours(1)), {hours(1)});
  EXPECT_EQ(wide.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wide.status().message().find("MaxGpusPerUser"), std::string::npos) << wide.status();
}

TEST(PolicyTest, AnyOfDependencyWaitsWhileOneTermMayStillHold) {
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build(), {});
  const JobId quick = sim.Submit(Request(1, 8, hours(1)), {minutes(1)}).value();
  const JobId slow = sim.Submit(Request(1, 8, hours(1)), {minutes(30)}).value();
  // afternotok on a job that succeeds can never hold; afterany on the
  // slower job still can, so the job waits for it.
  JobRequest either = Request(1, 8, hours(1));
  either.dependency = {
      {{DependencyType::kAfterNotOk, quick, -1}, {DependencyType::kAfterAny, slow, -1}}, true};
  const JobId waits = sim.Submit(either, {minutes(1)}).value();
  // Neither term can hold once both jobs have succeeded.
  JobRequest neither = Request(1, 8, hours(1));
  neither.dependency = {
      {{DependencyType::kAfterNotOk, quick, -1}, {DependencyType::kAfterNotOk, slow, -1}}, true};
  const JobId stuck = sim.Submit(neither, {minutes(1)}).value();
  sim.RunUntil(sim.now() + minutes(5));
  EXPECT_EQ(sim.Seen(waits).reason, "Dependency");
  EXPECT_EQ(sim.Seen(stuck).reason, "Dependency") << "the slow job may still fail";
  sim.RunUntil(sim.now() + minutes(30));
  EXPECT_NE(sim.Seen(waits).state, JobState::kPending);
  EXPECT_EQ(sim.Seen(stuck).reason, "DependencyNeverSatisfied");
}

TEST(PolicyTest, KillOnInvalidDependencyCancels) {
  VirtualCluster sim(ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build(), {});
  const JobId first = sim.Submit(Request(1, 8, hours(1)), {minutes(1)}).value();
  JobRequest r = Request(1, 8, hours(1));
  r.dependency = {{{DependencyType::kAfterNotOk, first, -1}}, false};
  r.kill_on_invalid_dep = true;
  const JobId dependent = sim.Submit(r, {minutes(1)}).value();
  sim.RunUntil(sim.now() + minutes(2));
  EXPECT_EQ(sim.Seen(dependent).state, JobState::kCancelled);
  EXPECT_NE(sim.Seen(dependent).reason.find("can never be satisfied"), std::string::npos);
  JobRequest unknown = Request(1, 8, hours(1));
  unknown.dependency = {{{DependencyType::kAfterOk, 9999, -1}}, false};
  EXPECT_EQ(sim.Submit(unknown, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

// Two nodes under one leaf, shared by the default partition "low" and the
// higher tier "high", whose jobs preempt low's in `mode` after `grace`.
VirtualCluster TwoTiers(config::PreemptMode mode, seconds grace) {
  config::ClusterConfig config;
  config.preempt_mode = mode;
  config.preempt_grace_time = grace;
  config::PartitionSpec low, high;
  low.name = "low";
  low.is_default = true;
  high.name = "high";
  high.priority_tier = 5;
  testing::Cluster cluster = ClusterBuilder().Leaves(1).NodesPerLeaf(2).Build();
  low.nodes = high.nodes = cluster.topology.NodeNames();
  low.max_time = high.max_time = hours(24);
  config.partitions = {low, high};
  return VirtualCluster(std::move(cluster), config);
}

TEST(PolicyTest, AVictimThatDiesOfThePreemptionWarningIsRequeuedNotFailed) {
  VirtualCluster sim = TwoTiers(config::PreemptMode::kRequeue, seconds(30));
  // A script that has not installed its USR1 trap yet dies of the warning.
  SimJob unprepared{hours(1)};
  unprepared.dies_on_warning = true;
  const JobId victim = sim.Submit(Request(2, 8, hours(2), "a", "low"), unprepared).value();
  sim.RunUntil(sim.now() + seconds(2));
  const JobId urgent = sim.Submit(Request(2, 8, hours(1), "b", "high"), {minutes(10)}).value();
  sim.RunUntil(sim.now() + seconds(10));
  const Job& requeued = *sim.engine().FindJob(victim);
  EXPECT_EQ(requeued.state, JobState::kPending) << requeued.reason;
  EXPECT_EQ(requeued.run.attempt, 2);
  ASSERT_EQ(requeued.preemption.records.size(), 1u);
  EXPECT_EQ(requeued.preemption.records[0].detail,
            "a rank on n001 ended on the warning signal USR1");
  EXPECT_EQ(sim.engine().FindJob(urgent)->state, JobState::kRunning);
}

TEST(PolicyTest, SuspendLendsTheVictimsResourcesAndResumesIt) {
  VirtualCluster sim = TwoTiers(config::PreemptMode::kSuspend, seconds(5));
  const JobId victim = sim.Submit(Request(2, 8, hours(2), "a", "low"), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(2));
  const JobId urgent = sim.Submit(Request(2, 8, hours(1), "b", "high"), {minutes(10)}).value();
  sim.RunUntil(sim.now() + seconds(10));
  EXPECT_TRUE(IsSuspended(*sim.engine().FindJob(victim)));
  EXPECT_EQ(sim.engine().FindJob(victim)->state, JobState::kRunning);
  EXPECT_EQ(sim.engine().FindJob(urgent)->state, JobState::kRunning);
  sim.RunUntil(sim.now() + minutes(11));
  EXPECT_FALSE(IsSuspended(*sim.engine().FindJob(victim)));
  bool stopped = false, continued = false;
  for (const std::string& line : sim.transcript()) {
    stopped =
        stopped || line.find(fmt::format("signal STOP to job {}", victim)) != std::string::npos;
    continued =
        continued || line.find(fmt::format("signal CONT to job {}", victim)) != std::string::npos;
  }
  EXPECT_TRUE(stopped && continued);
}

TEST(PolicyTest, WhySaysWhatBlocksAndWhatWouldHelp) {
  VirtualCluster sim(ClusterBuilder().Leaves(2).NodesPerLeaf(4).Build(), {});
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(sim.Submit(Request(1, 8, hours(1)), {hours(1)}).ok());
  sim.RunUntil(sim.now() + seconds(2));
  const JobId wide = sim.Submit(Request(4, 8, hours(1)), {hours(1)}).value();
  sim.RunUntil(sim.now() + seconds(2));
  absl::StatusOr<Explanation> why = sim.engine().Explain(JobRef{wide, -1}, sim.now());
  ASSERT_TRUE(why.ok()) << why.status();
  // It waits for resources; the leaves closest to holding it are named; it
  // could start now with -N 2.
  EXPECT_EQ(why->reason, PendingReason::kResources);
  EXPECT_NE(why->expected_start.count(), 0);
  EXPECT_FALSE(why->wait.shortfall.empty());
  ASSERT_EQ(why->wait.closest_leaves.size(), 2u);
  // Six one-node jobs fill one leaf and half of the other.
  EXPECT_EQ(why->wait.closest_leaves[0].fitting, 2);
  EXPECT_EQ(why->wait.closest_leaves[1].fitting, 0);
  EXPECT_EQ(why->wait.closest_leaves[0].nodes, 4);
  EXPECT_EQ(why->wait.nodes, 4);
  EXPECT_EQ(why->sooner.fewer_nodes, 2);
  EXPECT_EQ(why->sooner.without_switches, 0);
}

}  // namespace
}  // namespace cohort
