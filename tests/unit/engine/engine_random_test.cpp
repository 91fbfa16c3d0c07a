// SPDX-License-Identifier: Apache-2.0
// The whole engine driven by random events (submissions, cancels, holds,
// requeues, preemption, rank exits, launch failures, node loss, drains,
// restarts of agents, time passing) with its invariants checked after every
// one, and a final phase that proves every job still ends. Every input is
// recorded as a scenario line (tools/sim/raw_inputs.h): a failing run is
// written out as a script that `cohort-sim --script` replays.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <variant>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cohort/engine/engine.h"
#include "cohort/fmt_absl.h"
#include "raw_inputs.h"
#include "scenario.h"
#include "test_support.h"

namespace cohort {
namespace {

constexpr int kSigterm = 15;

// The cluster, as a scenario's lines give it: two leaves of four nodes (one
// of them a spare kept for gang repairs, in the first leaf: a gang's own
// spares are its last nodes, so a rank lost there has a spare inside its
// leaf and one of its own outside), a low and a high (suspending)
// partition, a QOS that preempts, and fewer IMEX channels than jobs can run
// at once (the invariants check that no two active jobs ever hold one
// channel).
constexpr std::string_view kTopology =
    "SwitchName=leaf0 Nodes=n[001-004] SpareNodes=n004\n"
    "SwitchName=leaf1 Nodes=n[005-008]\n"
    "SwitchName=spine Switches=leaf[0-1]\n";
constexpr std::string_view kConfig =
    "NodeName=n[001-008] CPUs=16 Gpus=4 MemoryMB=1048576\n"
    "PreemptMode=REQUEUE PreemptGraceTime=30 NodeTimeout=60\n"
    "SwitchType=switch/nvidia_imex SwitchParameters=imex_channel_count=10\n"
    "QOSName=normal\n"
    "QOSName=urgent Priority=100 Preempt=normal GraceTime=0 MaxJobsPerUser=3\n"
    "PartitionName=low Nodes=ALL Default=YES MaxTime=2:00:00 PriorityTier=1\n"
    "PartitionName=high Nodes=ALL MaxTime=2:00:00 PriorityTier=2 PreemptMode=SUSPEND\n";

// Lines of `text`, each with `prefix`.
std::string Prefixed(std::string_view prefix, std::string_view text) {
  std::string out;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) out += fmt::format("{}{}\n", prefix, line);
  return out;
}

// What the agents of the cluster hold: a job's ranks on a node, from its
// launch until the node says they are gone.
struct Run {
  int attempt = 0;
  int alive = 0;
  bool terminating = false;
};

class RandomEngine {
 public:
  explicit RandomEngine(std::uint32_t seed) : random_(seed) {
    absl::StatusOr<sim::ScenarioCluster> built = sim::BuildCluster(kConfig, kTopology, "random");
    if (!built.ok()) {
      failure_ = std::string(built.status().message());
      return;
    }
    cluster_ = *std::move(built);
    engine_ =
        std::make_unique<Engine>(cluster_.config, *cluster_.topology, std::move(cluster_.pool));
    for (NodeId n = 0; n < Nodes(); ++n) Register(n, /*all_alive=*/true);
  }

  // One random event; Failure() says when an invariant broke.
  void Step() {
    if (Pick(20) == 0) {
      StepEvent();
      ++steps_;
      return;
    }
    const int roll = Pick(100);
    if (roll < 22) {
      Submit();
    } else if (roll < 36) {
      Do(input::Schedule{});
    } else if (roll < 50) {
      ExitRank();
    } else if (roll < 60) {
      DeliverTermination();
    } else if (roll < 68) {
      PassTime();
    } else if (roll < 72) {
      ActOnJob([](JobRef ref, Caller who) -> EngineInput { return input::Cancel{ref, 0, who}; });
    } else if (roll < 76) {
      ActOnJob([](JobRef ref, Caller who) -> EngineInput { return input::Hold{ref, who}; });
    } else if (roll < 80) {
      ActOnJob([](JobRef ref, Caller who) -> EngineInput { return input::Release{ref, who}; });
    } else if (roll < 83) {
      ActOnJob([](JobRef ref, Caller who) -> EngineInput { return input::Requeue{ref, who}; });
    } else if (roll < 86) {
      ActOnJob([&](JobRef ref, Caller who) -> EngineInput {
        if (Pick(2) == 0) return input::CheckpointDone{ref, who};
        // cohort alloc's command ends (refused for other jobs)
        return input::EndAllocation{ref, Pick(4) == 0 ? 1 : 0, who};
      });
    } else if (roll < 89) {
      FailLaunch();
    } else if (roll < 92) {
      const NodeId node = Pick(Nodes());
      if (const int action = Pick(5); action < 2) {
        Do(input::Drain{node, "maintenance", Caller{0}});
      } else if (action == 2) {
        Do(input::Down{node, "PSU swap", Caller{0}});  // its jobs end there as a loss's do
      } else {
        Do(input::Resume{node, Caller{0}});
      }
    } else if (roll < 95) {
      Register(Pick(Nodes()), /*all_alive=*/Pick(3) != 0);
    } else {
      // Now and then a node falls silent, rarely a whole leaf switch.
      silent_.clear();
      if (Pick(16) == 0) {
        const NodeId first = Pick(2) * 4;
        for (NodeId n = first; n < first + 4; ++n) silent_.insert(n);
      } else if (Pick(4) == 0) {
        silent_.insert(Pick(Nodes()));
      }
      PassTime();
    }
    ++steps_;
  }

  // Stops the chaos: every node back and resumed, holds released, ranks end
  // well; every job must then end within a bound of rounds.
  void Settle() {
    silent_.clear();
    for (NodeId n = 0; n < Nodes(); ++n) {
      Register(n, /*all_alive=*/true);
      Do(input::Resume{n, Caller{0}});
    }
    for (int round = 0; round < 5000 && !failure_; ++round) {
      std::vector<JobId> open;
      for (const auto& [id, job] : engine_->Jobs()) {
        if (!IsFinished(job.state)) open.push_back(id);
      }
      if (open.empty()) return;
      for (const JobId id : open) {
        const Job* job = engine_->FindJob(id);
        if (job != nullptr && job->state == JobState::kRunning &&
            job->request.launch == JobLaunch::kAllocation) {
          Do(input::EndAllocation{JobRef{id, -1}, 0, Caller{0}});
          continue;
        }
        if (job == nullptr || job->state != JobState::kPending) continue;
        if (IsHeld(*job)) {
          Do(input::Release{JobRef{id, -1}, Caller{0}});
        } else if (job->wait.reason == PendingReason::kDependencyNeverSatisfied) {
          Do(input::Cancel{JobRef{id, -1}, 0, Caller{0}});
        }
      }
      Do(input::Schedule{});
      while (!runs_.empty() && !failure_) {
        if (Pick(2) == 0) {
          DeliverTermination();
        } else {
          ExitRank(/*fail=*/false);
        }
      }
      PassTime();
    }
    if (!failure_) {
      for (const auto& [id, job] : engine_->Jobs()) {
        if (!IsFinished(job.state)) {
          failure_ = fmt::format("job {} is still {} ({}: {}) after the cluster settled", id,
                                 JobStateName(job.state), job.reason, job.reason_detail);
          return;
        }
      }
    }
  }

  [[nodiscard]] const std::optional<std::string>& Failure() const { return failure_; }
  [[nodiscard]] int Steps() const { return steps_; }
  [[nodiscard]] int Started() const { return started_; }
  [[nodiscard]] int Preemptions() const { return preemptions_; }
  [[nodiscard]] int StepsStarted() const { return steps_started_; }
  [[nodiscard]] int RepairsMade() const { return repairs_made_; }
  /// The statuses (JobStatusName) some job entered.
  [[nodiscard]] const std::set<std::string>& Visited() const { return visited_; }
  /// Every job the engine holds: its status (JobStatusName), by DisplayId.
  [[nodiscard]] std::map<std::string, std::string> Statuses() const {
    std::map<std::string, std::string> out;
    for (const auto& [id, job] : engine_->Jobs())
      out[DisplayId(job)] = JobStatusName(StatusOf(job));
    return out;
  }
  /// The run so far as a scenario that `cohort-sim --script` replays.
  [[nodiscard]] std::string Script() const {
    std::string text = "# A recorded run of engine_random_test.\n" +
                       Prefixed("topology: ", kTopology) + Prefixed("config: ", kConfig) +
                       "agents: script\n";
    for (const std::string& line : script_) text += line + "\n";
    const auto ran = std::chrono::duration_cast<std::chrono::seconds>(now_ - kStart);
    text += fmt::format("run {}\n", std::max<std::int64_t>(1, ran.count()));
    return text;
  }

 private:
  int Pick(int n) { return static_cast<int>(random_() % static_cast<std::uint32_t>(n)); }
  [[nodiscard]] NodeId Nodes() const { return cluster_.topology->NodeCount(); }

  // Hands one input to the engine (a refusal is one of the outcomes), and
  // records it.
  void Do(const EngineInput& in) {
    if (failure_) return;
    script_.push_back(sim::FormatInput(
        in, std::chrono::duration_cast<std::chrono::seconds>(now_ - kStart), *cluster_.topology));
    const std::map<JobId, BeforeRepair> waiting = WaitingRepairs();
    Effects fx;
    (void)engine_->Apply(in, now_, fx);
    Observe(fx);
    if (absl::Status s = engine_->CheckInvariants(); !s.ok()) {
      failure_ = fmt::format("step {}: {}", steps_, s.message());
    } else if (std::optional<std::string> drift = FollowTransitions(fx)) {
      failure_ = fmt::format("step {}: {}", steps_, *drift);
    } else if (std::optional<std::string> restarts = RestartsWithinBounds()) {
      failure_ = fmt::format("step {}: {}", steps_, *restarts);
    } else if (std::optional<std::string> repairs =
                   RepairsKeepTheDomain(waiting, std::holds_alternative<input::Tick>(in))) {
      failure_ = fmt::format("step {}: {}", steps_, *repairs);
    }
  }

  // A running gang waiting for its repair, as it was before an input.
  struct BeforeRepair {
    std::size_t repairs = 0;
    std::vector<NodeId> own_spares;
  };
  std::map<JobId, BeforeRepair> WaitingRepairs() const {
    std::map<JobId, BeforeRepair> out;
    for (const auto& [id, job] : engine_->Jobs()) {
      if (job.state != JobState::kRunning || job.run.lost_ranks.empty()) continue;
      BeforeRepair& before = out[id];
      before.repairs = job.repairs.size();
      for (const alloc::NodeGrant& g : job.run.spares) before.own_spares.push_back(g.node);
    }
    return out;
  }

  // A gang is never partly placed past the first tick after the repair's
  // settle time (unless suspended: then once it resumes),
  // and a repair takes, for each lost node, a spare of the job's own or of
  // the lost node's group (SpareNodes=); and one inside that group whenever
  // one there was free: never one outside when a spare existed inside.
  std::optional<std::string> RepairsKeepTheDomain(const std::map<JobId, BeforeRepair>& waiting,
                                                  bool ticked) {
    const topology::Topology& topology = *cluster_.topology;
    for (const auto& [id, job] : engine_->Jobs()) {
      if (job.state == JobState::kRunning) {
        // (A job suspended by a preemption is repaired when it resumes.)
        if (job.run.lost_ranks.empty() != (job.run.repair_at == Millis{0}) ||
            (job.run.repair_at > now_ + kRepairSettle && !IsSuspended(job))) {
          return fmt::format("job {} waits for a repair at {} ms with {} lost ranks (now {} ms)",
                             id, job.run.repair_at.count(), job.run.lost_ranks.size(),
                             now_.count());
        }
        if (ticked && !IsSuspended(job) && !job.run.lost_ranks.empty() &&
            job.run.repair_at <= now_) {
          return fmt::format("job {}'s repair was due at {} ms and a tick at {} ms left it waiting",
                             id, job.run.repair_at.count(), now_.count());
        }
        for (const int rank : job.run.lost_ranks) {
          if (job.run.released[static_cast<std::size_t>(rank)] == 0) {
            return fmt::format("job {} still holds node rank {}, which it lost", id, rank);
          }
        }
      }
      const auto before = waiting.find(id);
      if (before == waiting.end() || job.repairs.size() <= before->second.repairs) continue;
      ++repairs_made_;
      const RepairRecord& repair = job.repairs.back();
      const std::vector<NodeId>& own = before->second.own_spares;
      std::map<topology::GroupId, int> lost_in;  // by group of the lost nodes
      std::map<topology::GroupId, int> kept_in;  // replacements inside that group
      for (std::size_t i = 0; i < repair.lost.size(); ++i) {
        const NodeId gone = *topology.FindNode(repair.lost[i]);
        const NodeId spare = *topology.FindNode(repair.replacement[i]);
        const topology::GroupId group = topology.GroupOf(gone);
        const bool owned = std::find(own.begin(), own.end(), spare) != own.end();
        if (!owned && !(topology.IsSpare(spare) && topology.GroupOf(spare) == group)) {
          return fmt::format(
              "job {}'s repair put {} in place of {}: neither its spare nor one "
              "of that node's group",
              id, repair.replacement[i], repair.lost[i]);
        }
        ++lost_in[group];
        if (topology.GroupOf(spare) == group) ++kept_in[group];
      }
      for (const auto& [group, lost] : lost_in) {
        int inside = 0;  // spares in the group the repair could have taken
        for (const NodeId n : topology.Groups()[static_cast<std::size_t>(group)].nodes) {
          if (engine_->Pool().Condition(n) == alloc::NodeCondition::kDown) continue;
          const bool owned = std::find(own.begin(), own.end(), n) != own.end();
          const std::vector<JobId> holders = engine_->ViewNode(n).jobs;
          const bool free_site =
              topology.IsSpare(n) && (holders.empty() || (holders.size() == 1 && holders[0] == id));
          if (owned || free_site) ++inside;
        }
        if (kept_in[group] < std::min(lost, inside)) {
          return fmt::format(
              "job {}'s repair took {} spares inside the group of its lost nodes, "
              "where {} were free for its {} lost",
              id, kept_in[group], inside, lost);
        }
      }
    }
    return std::nullopt;
  }

  // Node failures never restart a job more often than its cap allows, nor
  // before its back-off has passed.
  std::optional<std::string> RestartsWithinBounds() const {
    for (const auto& [id, job] : engine_->Jobs()) {
      const int cap = job.request.max_restarts >= 0 ? job.request.max_restarts
                                                    : cluster_.config.max_batch_requeue;
      if (job.run.failure_restarts > cap) {
        return fmt::format("job {} was restarted {} times after node failures; its cap is {}", id,
                           job.run.failure_restarts, cap);
      }
      if (job.state == JobState::kRunning && job.run.start_time < job.wait.restart_after) {
        return fmt::format("job {} started again {} ms before its back-off ended", id,
                           (job.wait.restart_after - job.run.start_time).count());
      }
    }
    return std::nullopt;
  }

  // The state of every job as its reported transitions tell it must be the
  // state the engine holds (the controller logs and watches by them), and
  // each transition must be one the table allows.
  std::optional<std::string> FollowTransitions(const Effects& fx) {
    for (const JobTransition& t : fx.transitions) {
      const auto known = followed_.find(t.job);
      if (!t.from) {
        if (known != followed_.end()) return fmt::format("job {} is new twice", t.job);
      } else if (known == followed_.end() || known->second != *t.from) {
        return fmt::format("job {} left {} without having entered it", t.job,
                           JobStatusName(*t.from));
      } else if (!t.event) {
        return fmt::format("job {} changed state without an event", t.job);
      } else if (Transition(*t.from, *t.event) != t.to &&
                 !(t.from->state == JobState::kCompleting && *t.event == JobEvent::kAllReleased &&
                   t.to.sub == JobSubstate::kNone &&
                   (IsFinished(t.to.state) || t.to.state == JobState::kPending))) {
        return fmt::format("job {} went {} -> {} on {}, which the table does not allow", t.job,
                           JobStatusName(*t.from), JobStatusName(t.to), JobEventName(*t.event));
      }
      followed_[t.job] = t.to;
      visited_.insert(JobStatusName(t.to));
    }
    for (const JobId id : fx.forgotten_jobs) followed_.erase(id);
    for (const auto& [id, job] : engine_->Jobs()) {
      const auto known = followed_.find(id);
      if (known == followed_.end() || known->second != StatusOf(job)) {
        return fmt::format("job {} is {} but its transitions say {}", id,
                           JobStatusName(StatusOf(job)),
                           known == followed_.end() ? "nothing" : JobStatusName(known->second));
      }
    }
    if (followed_.size() != engine_->Jobs().size()) return "a forgotten job was not reported";
    return std::nullopt;
  }

  // Plays the agents' side of what the engine decided.
  void Observe(const Effects& fx) {
    for (const Command& command : fx.commands) {
      if (const auto* launch = std::get_if<LaunchCommand>(&command)) {
        const Job* job = engine_->FindJob(launch->job);
        if (job == nullptr) continue;
        if (launch->step) {
          for (const JobStep& step : job->run.steps) {
            if (step.id != *launch->step) continue;
            for (const alloc::StepNode& node : step.placement.nodes) {
              if (node.node_rank != launch->node_rank) continue;
              if (node.node_rank == step.placement.nodes.front().node_rank) ++steps_started_;
              step_ranks_[{launch->job, step.id}].emplace_back(launch->node, node.tasks);
            }
          }
          continue;
        }
        // A batch script is one process on the allocation's first node.
        runs_[{launch->job, launch->node}] =
            Run{job->run.attempt, IsBatch(*job) ? 1 : job->gang.tasks_per_node, false};
        if (launch->node_rank == 0) ++started_;
      } else if (const auto* terminate = std::get_if<TerminateCommand>(&command)) {
        if (terminate->step) continue;  // the step's ranks exit in StepEvent
        const Job* job = engine_->FindJob(terminate->job);
        auto it = runs_.find({terminate->job, terminate->node});
        if (it != runs_.end()) {
          it->second.terminating = true;
        } else if (job != nullptr) {
          // Nothing of the job runs there (a batch job's other nodes, or
          // ranks that all exited): the agent answers that it is released.
          runs_[{terminate->job, terminate->node}] = Run{job->run.attempt, 0, true};
        }
      } else if (const auto* signal = std::get_if<SignalCommand>(&command)) {
        if (const Job* job = engine_->FindJob(signal->job);
            job != nullptr && job->preemption.deadline.count() != 0) {
          ++preemptions_;
        }
      }
    }
  }

  void Submit() {
    // A bounded queue keeps each step cheap: the walk is about the events,
    // not about a long queue (bench/scale measures those).
    if (engine_->PendingCount() >= 40) return;
    JobRequest r;
    r.name = fmt::format("job{}", Pick(5));
    r.uid = 1000 + static_cast<std::uint32_t>(Pick(3));
    r.user_name = fmt::format("user{}", r.uid);
    r.nodes = 1 + Pick(4);
    r.tasks_per_node = 1 + Pick(2);
    r.gpus_per_node = Pick(5);
    r.time_limit = std::chrono::seconds(60 * (1 + Pick(30)));
    r.requeue = Pick(2) == 0;
    if (Pick(3) == 0) r.max_restarts = Pick(3);
    if (Pick(4) == 0) r.spares = Pick(r.nodes + 1);
    if (Pick(3) == 0) r.restart_policy = RestartPolicy::kStep;
    r.hold = Pick(20) == 0;
    if (Pick(4) == 0) r.launch = Pick(3) == 0 ? JobLaunch::kAllocation : JobLaunch::kBatchScript;
    if (Pick(6) == 0) r.partition = "high";
    if (Pick(8) == 0) r.qos = "urgent";
    if (Pick(10) == 0) {
      r.exclusivity = Pick(2) == 0 ? alloc::Exclusivity::kExclusive : alloc::Exclusivity::kTopo;
    }
    if (Pick(12) == 0) r.switches = 1;
    if (Pick(10) == 0) {
      r.array.tasks = {0, 1, 2, 3};
      r.array.max_running = Pick(3);
    }
    if (Pick(8) == 0 && !engine_->Jobs().empty()) {
      const auto& jobs = engine_->Jobs();
      auto it = jobs.begin();
      std::advance(it, Pick(static_cast<int>(jobs.size())));
      const DependencyType types[] = {DependencyType::kAfter, DependencyType::kAfterAny,
                                      DependencyType::kAfterOk, DependencyType::kAfterNotOk};
      r.dependency.terms.push_back(DependencyTerm{types[Pick(4)], it->first, -1});
      r.kill_on_invalid_dep = Pick(2) == 0;
    }
    Do(input::Submit{r});
  }

  // A rank of a random running gang exits (mostly 0).
  void ExitRank(bool fail = true) {
    if (runs_.empty()) return;
    auto it = runs_.begin();
    std::advance(it, Pick(static_cast<int>(runs_.size())));
    const auto [job, node] = it->first;
    Run& run = it->second;
    const bool bad = fail && Pick(10) == 0;
    if (run.alive > 0) {
      --run.alive;
      Do(input::RankExited{job, node, bad ? 1 : 0, 0});
    }
    if (const auto left = runs_.find({job, node}); left != runs_.end() && left->second.alive == 0) {
      runs_.erase(left);
      Do(input::JobReleased{job, node});
    }
  }

  // Job steps: one starts in a random running job, or a rank of a running
  // step exits (now and then failing), or its owner signals or cancels it.
  void StepEvent() {
    if (!step_ranks_.empty() && Pick(3) != 0) {
      auto it = step_ranks_.begin();
      std::advance(it, Pick(static_cast<int>(step_ranks_.size())));
      const auto [job, step] = it->first;
      const Job* owner = engine_->FindJob(job);
      if (owner == nullptr || owner->state != JobState::kRunning) {
        step_ranks_.erase(it);  // it ended with its job
        return;
      }
      if (Pick(8) == 0) {
        Do(input::SignalStep{JobRef{job, -1}, step, Pick(2) == 0 ? 0 : SIGUSR1, Caller{0}});
        return;
      }
      const bool bad = Pick(10) == 0;
      std::vector<std::pair<NodeId, int>>& nodes = it->second;
      const auto node = std::find_if(nodes.begin(), nodes.end(),
                                     [](const std::pair<NodeId, int>& n) { return n.second > 0; });
      if (node == nodes.end()) {
        step_ranks_.erase(it);
        return;
      }
      Do(input::StepRankExited{job, step, node->first, bad ? 1 : 0, 0});
      if (--node->second == 0 && std::next(node) == nodes.end()) step_ranks_.erase(it);
      return;
    }
    std::vector<const Job*> running;
    for (const auto& [id, job] : engine_->Jobs()) {
      if (job.state == JobState::kRunning && job.array.job_id == 0) running.push_back(&job);
    }
    if (running.empty()) return;
    const Job& job = *running[static_cast<std::size_t>(Pick(static_cast<int>(running.size())))];
    alloc::StepRequest request;
    request.nodes = Pick(job.gang.nodes + 2);
    request.tasks = Pick(2) == 0 ? 0 : request.nodes + Pick(3);
    request.gpus_per_node = Pick(4) - 1;
    request.sharing = static_cast<alloc::StepSharing>(Pick(3));
    const JobId id = job.id;
    const Caller owner{job.request.uid};
    Do(input::StartStep{JobRef{id, -1}, request, owner});
  }

  // A node stops the ranks the engine asked it to stop, and says so.
  void DeliverTermination() {
    for (auto it = runs_.begin(); it != runs_.end(); ++it) {
      if (!it->second.terminating || Pick(3) == 0) continue;
      const auto [job, node] = it->first;
      const bool ranks_left = it->second.alive > 0;
      runs_.erase(it);
      if (ranks_left) Do(input::RankExited{job, node, 0, kSigterm});
      Do(input::JobReleased{job, node});
      return;
    }
  }

  void FailLaunch() {
    if (runs_.empty()) return;
    auto it = runs_.begin();
    std::advance(it, Pick(static_cast<int>(runs_.size())));
    const auto [job, node] = it->first;
    runs_.erase(it);
    Do(input::LaunchFailed{job, node, "exec: no such file"});
    Do(input::JobReleased{job, node});
  }

  // Time passes; every node but a silent one sends its heartbeat.
  void PassTime() {
    now_ += Millis(1000 * (1 + Pick(45)));
    for (NodeId n = 0; n < Nodes(); ++n) {
      if (!silent_.contains(n)) Do(input::Heartbeat{n});
    }
    Do(input::Tick{});
  }

  // An agent (re)registers: with the ranks it still runs, or having lost
  // some of them in a restart.
  void Register(NodeId node, bool all_alive) {
    NodeReport report;
    report.cpus = 16;
    report.gpus = 4;
    report.memory_mb = cluster_.config.nodes[static_cast<std::size_t>(node)].memory_mb;
    for (auto it = runs_.begin(); it != runs_.end();) {
      if (it->first.second != node) {
        ++it;
        continue;
      }
      if (all_alive || Pick(2) == 0) {
        report.running.push_back({it->first.first, it->second.attempt, 0});
        ++it;
      } else {
        it = runs_.erase(it);
      }
    }
    Do(input::NodeRegistered{node, report});
  }

  // A user (or, one time in five, an operator) acts on a random job.
  template <typename Act>
  void ActOnJob(Act input_of) {
    const auto& jobs = engine_->Jobs();
    if (jobs.empty()) return;
    auto it = jobs.begin();
    std::advance(it, Pick(static_cast<int>(jobs.size())));
    const Caller who{Pick(5) == 0 ? 0 : it->second.request.uid};
    const JobRef ref{it->second.array.job_id != 0 ? it->second.array.job_id : it->first,
                     it->second.array.task_id};
    Do(input_of(ref, who));
  }

  std::mt19937 random_;
  static constexpr Millis kStart{1'000'000};
  sim::ScenarioCluster cluster_;
  std::unique_ptr<Engine> engine_;
  Millis now_ = kStart;
  std::vector<std::string> script_;  ///< every input, as a scenario line
  std::map<std::pair<JobId, NodeId>, Run> runs_;
  /// (job, step): its nodes and the ranks still running on each.
  std::map<std::pair<JobId, int>, std::vector<std::pair<NodeId, int>>> step_ranks_;
  std::set<std::string> visited_;
  std::map<JobId, JobStatus> followed_;  ///< by the transitions Effects reported
  std::set<NodeId> silent_;
  int repairs_made_ = 0;
  std::optional<std::string> failure_;
  int steps_ = 0;
  int started_ = 0;
  int preemptions_ = 0;
  int steps_started_ = 0;
};

// COHORT_RANDOM_STEPS and COHORT_RANDOM_SEED override the defaults, to run
// longer or to replay a failure.
int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::atoi(value);
}

// A failed run is written out as a scenario, and the failure says where.
std::string WrittenOut(const RandomEngine& run, std::uint32_t seed) {
  const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) /
                                     fmt::format("engine_random_seed{}.scenario", seed);
  std::ofstream(path) << run.Script();
  return fmt::format("{}\nthe run as a scenario: cohort-sim --script {}", *run.Failure(),
                     path.string());
}

TEST(EngineRandomTest, InvariantsHoldUnderRandomEventsAndEveryJobEnds) {
  const int steps = EnvInt("COHORT_RANDOM_STEPS", 120'000);
  const auto first_seed = static_cast<std::uint32_t>(EnvInt("COHORT_RANDOM_SEED", 1));
  constexpr int kSeeds = 4;
  for (std::uint32_t seed = first_seed; seed < first_seed + kSeeds; ++seed) {
    SCOPED_TRACE(fmt::format("seed {} (replay with COHORT_RANDOM_SEED={})", seed, seed));
    RandomEngine run(seed);
    while (run.Steps() < steps / kSeeds && !run.Failure()) run.Step();
    run.Settle();
    ASSERT_FALSE(run.Failure()) << WrittenOut(run, seed);
    // The walk reached the interesting places, or it proves little.
    EXPECT_GT(run.Started(), steps / kSeeds / 50);
    EXPECT_GT(run.Preemptions(), 0);
    EXPECT_GT(run.StepsStarted(), steps / kSeeds / 500);
    EXPECT_GT(run.RepairsMade(), 0) << "no gang was ever repaired from a spare";
    for (const char* status :
         {"PENDING/held_user", "PENDING/held_admin", "RUNNING/preempting", "RUNNING/suspended",
          "COMPLETING/suspended", "CANCELLED", "TIMEOUT", "NODE_FAIL", "FAILED", "COMPLETED"}) {
      EXPECT_TRUE(run.Visited().contains(status)) << "no job was ever " << status;
    }
  }
}

// The script of a run replays through cohort-sim's scenario runner to the
// same end: each job's last status in the transcript is the one the run
// left it in.
TEST(EngineRandomTest, ARecordedRunReplaysAsAScenarioToTheSameEnd) {
  RandomEngine run(7);
  while (run.Steps() < 3000 && !run.Failure()) run.Step();
  ASSERT_FALSE(run.Failure()) << *run.Failure();
  const absl::StatusOr<std::string> replayed = sim::RunScenario(run.Script(), "recorded");
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  // "t=5s job 12 submitted: PENDING", "t=9s job 12 RUNNING -> COMPLETING (…)".
  // An array's pending tasks are named by what is left of them
  // ("12_[0-3%1]", later "12_[2-3%1]"): one key for all of its names.
  const auto key = [](const std::string& name) { return name.substr(0, name.find("_[")); };
  std::map<std::string, std::string> last;
  std::istringstream lines(*replayed);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string time, kind, job, first, second, third;
    if (!(words >> time >> kind >> job >> first) || kind != "job") continue;
    if (first == "submitted:" && words >> second) {
      last[key(job)] = second;
    } else if (words >> second >> third && second == "->") {
      last[key(job)] = third;
    }
  }
  const std::map<std::string, std::string> statuses = run.Statuses();
  EXPECT_GT(statuses.size(), 20U) << "the run did too little to prove anything";
  for (const auto& [job, status] : statuses) {
    EXPECT_EQ(last[key(job)], status) << "job " << job;
  }
}

}  // namespace
}  // namespace cohort
