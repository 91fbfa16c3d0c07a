// SPDX-License-Identifier: Apache-2.0
#include "engine/lifecycle.h"

#include <signal.h>

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "cohort/alloc/placement_check.h"
#include "cohort/check.h"
#include "cohort/engine/engine_types.h"
#include "cohort/text/slurm_time.h"
#include "engine/engine_support.h"
#include "engine/job_book.h"
#include "engine/pass_triggers.h"
#include "engine/prioritizer.h"
#include "engine/steps.h"

namespace cohort::engine {
namespace {

// Whether a running job is due its warning: its lead before a time limit
// longer than the lead is reached. Never for an unlimited job, nor twice in
// one attempt.
bool WarningDue(const Job& job, Millis now) {
  const TimeWarning& warning = job.request.warning;
  if (job.state != JobState::kRunning || warning.signal == 0 ||
      job.run.warned_attempt == job.run.attempt || job.time_limit == kUnlimited ||
      job.time_limit <= warning.before) {
    return false;
  }
  return now - job.run.start_time >=
         std::chrono::duration_cast<Millis>(job.time_limit - warning.before);
}

// The wait before the `restart`th restart after a node failure: `base`,
// doubled for each restart before it, at most ten minutes (or `base`).
std::chrono::seconds Backoff(std::chrono::seconds base, int restart) {
  const std::chrono::seconds most = std::max(base, std::chrono::seconds(600));
  std::chrono::seconds wait = base;
  for (int i = 1; i < restart && wait < most; ++i) wait *= 2;
  return std::min(wait, most);
}

// A node lost by its silence: its agent stops the ranks itself once it has
// heard no controller for NodeTimeout (AgentSession), which is when the node
// was declared down, give or take an answer's way across the network. A job
// requeued for it waits at least this long, so that no rank runs twice.
constexpr std::chrono::seconds kFenceMargin{2};

std::string Times(int count) { return count == 1 ? "once" : fmt::format("{} times", count); }

// Whether repairing `lost` starts the job's own launch again
// (RestartPolicy): a command on every rank always, a batch script with
// --restart-policy=job or when its own node is lost, an allocation never.
bool RestartsOwnLaunch(const Job& job, const std::vector<int>& lost) {
  switch (job.request.launch) {
    case JobLaunch::kEveryRank:
      return true;
    case JobLaunch::kBatchScript:
      return job.request.restart_policy == RestartPolicy::kJob ||
             std::find(lost.begin(), lost.end(), 0) != lost.end();
    case JobLaunch::kAllocation:
      return false;
  }
  return false;
}

// Whether a repair waits that will start the job's own launch again: then
// what its ranks report meanwhile is the loss's fallout.
bool RepairRestartsOwnLaunch(const Job& job) {
  return job.state == JobState::kRunning && !job.run.lost_ranks.empty() &&
         RestartsOwnLaunch(job, job.run.lost_ranks);
}

}  // namespace

std::pair<int, std::string> Lifecycle::RestartCap(const Job& job) const {
  if (job.request.max_restarts >= 0) {
    return {job.request.max_restarts, fmt::format("--max-restarts={}", job.request.max_restarts)};
  }
  return {max_batch_requeue_, fmt::format("MaxBatchRequeue={} in cohort.conf", max_batch_requeue_)};
}

bool Lifecycle::RequeueOnNodeLoss(Job& job) const {
  if (!job.request.requeue) return false;
  const auto [cap, source] = RestartCap(job);
  if (job.run.failure_restarts < cap) return true;
  job.reason += fmt::format("; not requeued: node failures restarted it {}, its cap ({})",
                            Times(job.run.failure_restarts), source);
  return false;
}

PastAttempt Lifecycle::PastOf(const Job& job, Millis now) const {
  PastAttempt past{.attempt = job.run.attempt,
                   .cause = job.run.cause,
                   .start_time = job.run.start_time,
                   .end_time = now,
                   .nodes = {},
                   .exit_code = job.run.exit_code,
                   .exit_signal = job.run.exit_signal,
                   .reason = job.reason,
                   .own_usage = job.run.own_usage,
                   .steps = job.run.steps};
  past.nodes.reserve(job.run.placement.grants.size());
  for (const alloc::NodeGrant& g : job.run.placement.grants) {
    past.nodes.push_back(topology_.NodeName(g.node));
  }
  return past;
}

void Lifecycle::Changed(const Job& job, Effects& effects) {
  if (effects.changed_jobs.empty() || effects.changed_jobs.back() != job.id) {
    effects.changed_jobs.push_back(job.id);
  }
}

void Lifecycle::Apply(Job& job, JobEvent event, Millis now, Effects& effects) {
  const std::optional<JobStatus> next = Transition(StatusOf(job), event);
  if (!next) return;
  const JobState before = job.state;
  if (before == JobState::kPending && IsFinished(next->state)) {
    // Cancelled, or no longer admitted: it ends without having run.
    job.run.cause = CauseOf(event);
    job.run.end_time = now;
    book_.SetState(job, *next, event, effects);
    Changed(job, effects);
    triggers_.Note(Trigger::kEndedPending);  // it may have been what the jobs behind it waited for
    return;
  }
  if (before == JobState::kRunning && next->state == JobState::kCompleting) {
    job.run.cause = CauseOf(event);
    if (job.run.cause == EndCause::kNodeLost && RequeueOnNodeLoss(job)) {
      job.run.cause = EndCause::kNodeLostRequeue;
    }
    job.preemption.deadline = Millis{0};  // a victim that ends by itself is preempted no more
    job.run.lost_ranks.clear();           // a repair that waited is not made
    job.run.repair_at = Millis{0};
    ReleaseSpares(job, effects);
    book_.SetState(job, *next, event, effects);
    // A gang whose ranks all exited 0 frees its nodes by itself; a batch
    // job's other nodes, and steps still running, must be told.
    if (job.run.cause != EndCause::kSuccess || job.request.launch != JobLaunch::kEveryRank ||
        std::any_of(job.run.steps.begin(), job.run.steps.end(),
                    [](const JobStep& s) { return s.state == StepState::kRunning; })) {
      StopGang(job, effects);
    }
    Changed(job, effects);
    // Every node may already have confirmed (a launch failure on all).
    if (AllReleased(job)) {
      Finish(job, now, effects);
    }
    return;
  }
  if (before == JobState::kCompleting && event == JobEvent::kAllReleased) {
    Finish(job, now, effects);
    return;
  }
  book_.SetState(job, *next, event, effects);
  Changed(job, effects);
}

void Lifecycle::StopGang(Job& job, Effects& effects) {
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    if (job.run.released[rank] == 0) {
      // Stopped ranks handle no SIGTERM: wake them to shut down cleanly.
      if (IsSuspended(job)) {
        effects.commands.emplace_back(
            SignalCommand{job.id, job.run.placement.grants[rank].node, SIGCONT, SignalScope::kAll});
      }
      effects.commands.emplace_back(TerminateCommand{
          .job = job.id, .node = job.run.placement.grants[rank].node, .attempt = job.run.attempt});
    }
  }
}

int Lifecycle::ImexChannelsNeeded(const Job& job) const {
  if (imex_.Count() == 0) return 0;
  return imex_per_segment_ && job.gang.segment ? job.gang.nodes / *job.gang.segment : 1;
}

bool Lifecycle::ImexChannelsFree(Job& job, Effects& effects) {
  const int needed = ImexChannelsNeeded(job);
  if (imex_.FreeCount() >= needed) return true;
  ForgetPlan(job);
  SetReason(job, PendingReason::kResources,
            fmt::format("{} IMEX channel{} needed, {} free: the others of "
                        "SwitchParameters=imex_channel_count={} are held by running jobs",
                        needed, needed == 1 ? "" : "s", imex_.FreeCount(), imex_.Count()),
            effects);
  return false;
}

bool Lifecycle::RestoreImexChannels(Job& job) {
  const std::size_t before = job.run.imex_channels.size();
  std::erase_if(job.run.imex_channels, [&](int channel) { return !imex_.Restore(channel); });
  return job.run.imex_channels.size() == before;
}

void Lifecycle::Finish(Job& job, Millis now, Effects& effects) {
  const JobState final_state = FinalState(job.run.cause);
  // Its ranks are gone: the channels may go to the next job.
  for (const int channel : job.run.imex_channels) imex_.Give(channel);
  priority_.Charge(job, now);
  job.run.end_time = now;
  job.preemption.suspended_since = Millis{0};
  Steps::EndWithJob(job, now);
  if (final_state == JobState::kPending) {
    // Requeued: back in the queue with the same id and the next attempt;
    // the one that ended is kept for accounting.
    job.past_attempts.push_back(PastOf(job, now));
    if (job.past_attempts.size() > kPastAttemptsKept) {
      job.past_attempts.erase(job.past_attempts.begin());
    }
    book_.SetState(job, {JobState::kPending, JobSubstate::kNone}, JobEvent::kAllReleased, effects);
    job.wait.reason = PendingReason::kRequeued;
    job.reason = PendingReasonName(PendingReason::kRequeued);
    job.reason_detail =
        job.run.cause == EndCause::kPreemptRequeue
            ? fmt::format("preempted by job {}; runs again when resources allow", job.preemption.by)
        : job.run.cause == EndCause::kRequeued ? "requeued by cohort requeue"
                                               : "a node of its last attempt was lost";
    if (job.run.cause == EndCause::kNodeLostRequeue) {
      ++job.run.failure_restarts;
      const std::chrono::seconds wait =
          std::max(Backoff(requeue_backoff_, job.run.failure_restarts), kFenceMargin);
      job.wait.restart_after = now + ToMillis(wait);
    }
    job.preemption.by = 0;
    job.wait.eligible_time = now;
    job.run.cause = EndCause::kNone;
    job.run.placement = {};
    job.run.released.clear();
    job.run.exited_ok.clear();
    job.run.steps.clear();  // the next attempt numbers its steps anew
    job.run.imex_channels.clear();
    job.run.stopped = false;
    job.run.next_step = FirstStep(job);
    ++job.run.attempt;
    triggers_.Note(Trigger::kRequeued);
  } else {
    book_.SetState(job, {final_state, JobSubstate::kNone}, JobEvent::kAllReleased, effects);
  }
  Changed(job, effects);
}

int Lifecycle::MasterPort(const Job& job) const {
  // From the job's id, spread over 20000-39999.
  return FreePort(job.run.placement.grants.front().node, 20000 + static_cast<int>(job.id % 20000),
                  job, nullptr);
}

int Lifecycle::FreePort(NodeId master, int preferred, const Job& job, const JobStep* step) const {
  const auto first_node = [](const Job& j, const JobStep& s) {
    return j.run.placement.grants[static_cast<std::size_t>(s.placement.nodes.front().node_rank)]
        .node;
  };
  std::set<int> taken;
  for (const JobId other : book_.JobsOn(master)) {
    const Job& o = book_.At(other);
    if (o.run.placement.grants.empty()) continue;
    if (o.id != job.id && o.run.placement.grants.front().node == master)
      taken.insert(o.run.master_port);
    for (const JobStep& s : o.run.steps) {
      if (&s == step || s.state != StepState::kRunning || s.master_port == 0 ||
          s.placement.nodes.empty() || first_node(o, s) != master) {
        continue;
      }
      taken.insert(s.master_port);
    }
  }
  int port = preferred;
  while (taken.contains(port)) port = port == 39999 ? 20000 : port + 1;
  return port;
}

void Lifecycle::ReleaseNode(Job& job, int node_rank, Effects& effects) {
  if (job.run.released[static_cast<std::size_t>(node_rank)] != 0) return;
  job.run.released[static_cast<std::size_t>(node_rank)] = 1;
  const alloc::NodeGrant& grant = job.run.placement.grants[static_cast<std::size_t>(node_rank)];
  if (!IsSuspended(job)) pool_.Release({&grant, 1});
  book_.LetGo(grant.node, job.id);
  effects.changed_nodes.push_back(grant.node);
  triggers_.Released(job, grant.node);
}

void Lifecycle::ReleaseSpares(Job& job, Effects& effects) {
  for (const alloc::NodeGrant& spare : job.run.spares) {
    pool_.Release({&spare, 1});
    book_.LetGo(spare.node, job.id);
    effects.changed_nodes.push_back(spare.node);
    triggers_.Released(job, spare.node);
  }
  job.run.spares.clear();
}

void Lifecycle::RankExited(JobId id, NodeId node, int exit_code, int signal, Millis now,
                           Effects& effects) {
  Job* found = book_.Find(id);
  if (found == nullptr) return;
  Job& job = *found;
  const int rank = NodeRankOf(job, node);
  if (rank < 0) return;
  if (exit_code == 0 && signal == 0) {
    CountOk(job, rank, job.run.exited_ok[static_cast<std::size_t>(rank)] + 1, now, effects);
    return;
  }
  if (job.state == JobState::kRunning && signal != 0 && job.run.warned_attempt == job.run.attempt &&
      signal == job.request.warning.signal) {
    // A rank that does not handle the warning dies of it (USR1's default):
    // the job met its time limit early; it did not fail.
    job.run.exit_code = exit_code;
    job.run.exit_signal = signal;
    job.reason = fmt::format(
        "time limit {} reached: a rank on {} ended on the warning signal {} sent {} s before it",
        FormatSlurmTime(job.time_limit), topology_.NodeName(node), SignalName(signal),
        job.request.warning.before.count());
    Apply(job, JobEvent::kTimeLimit, now, effects);
    return;
  }
  if (signalled_exit_ && signalled_exit_(job, node, signal, now, effects)) return;
  if (RepairRestartsOwnLaunch(job))
    return;  // its peers on a lost node are gone: the repair decides
  if (job.state == JobState::kRunning) {
    // The first failure names the job's exit; ranks killed by the gang stop
    // that follows do not overwrite it.
    job.run.exit_code = exit_code;
    job.run.exit_signal = signal;
    const std::string_view who = IsBatch(job) ? "the batch script" : "a rank";
    job.reason =
        signal != 0
            ? fmt::format("{} on {} was killed by signal {}", who, topology_.NodeName(node), signal)
            : fmt::format("{} on {} exited with code {}", who, topology_.NodeName(node), exit_code);
  }
  Apply(job, JobEvent::kRankFailed, now, effects);
}

void Lifecycle::LaunchFailed(JobId id, NodeId node, const std::string& reason, Millis now,
                             Effects& effects) {
  Job* found = book_.Find(id);
  if (found == nullptr || NodeRankOf(*found, node) < 0) return;
  Job& job = *found;
  if (RepairRestartsOwnLaunch(job)) return;
  if (job.state == JobState::kRunning) {
    job.run.exit_code = 1;
    // Agents name their node first already; say it once.
    const std::string& name = topology_.NodeName(node);
    job.reason = reason.starts_with(name + ": ")
                     ? fmt::format("launch failed on {}", reason)
                     : fmt::format("launch failed on {}: {}", name, reason);
  }
  Apply(job, JobEvent::kLaunchFailed, now, effects);
}

void Lifecycle::JobReleased(JobId id, NodeId node, Millis now, Effects& effects) {
  Job* found = book_.Find(id);
  if (found == nullptr) return;
  Job& job = *found;
  const int rank = NodeRankOf(job, node);
  if (rank < 0 || IsFinished(job.state) || job.state == JobState::kPending) return;
  // A job holds its allocation until its own launch ends: a node where only
  // steps ran stays the job's for its next step.
  if (job.state == JobState::kRunning && OwnRanksOn(job, rank) == 0) return;
  ReleaseNode(job, rank, effects);
  // A repair waits that starts the job's own launch again: it decides.
  if (RepairRestartsOwnLaunch(job)) return;
  if (job.state == JobState::kRunning && IsBatch(job)) {
    // The script's node is done: the script has ended, whether or not its
    // exit was heard.
    Apply(job, RanksOk(job) == OwnRanks(job) ? JobEvent::kRanksSucceeded : JobEvent::kRankFailed,
          now, effects);
    return;
  }
  // A node can only run out of ranks while the job runs if each of them
  // exited 0; the job runs on until every node is done.
  if (AllReleased(job)) {
    if (job.state == JobState::kRunning) {
      // Released everywhere without every exit reported: treat as success
      // only if all ranks said so.
      Apply(job, RanksOk(job) == OwnRanks(job) ? JobEvent::kRanksSucceeded : JobEvent::kRankFailed,
            now, effects);
    } else {
      Apply(job, JobEvent::kAllReleased, now, effects);
    }
  }
}

bool Lifecycle::DropNode(Job& job, NodeId node, std::string_view why, Millis now,
                         Effects& effects) {
  const int rank = NodeRankOf(job, node);
  if (!job.request.no_kill || job.state != JobState::kRunning || IsSuspended(job) || rank <= 0 ||
      job.request.launch == JobLaunch::kEveryRank) {
    return false;
  }
  const auto left = std::count(job.run.released.begin(), job.run.released.end(), 0);
  if (left <= 1 || job.run.released[static_cast<std::size_t>(rank)] != 0) return false;
  const std::string& name = topology_.NodeName(node);
  for (const int step : Steps::RunningOn(job, rank)) {
    Steps::NodeEnded(
        job, step, rank,
        {.failed = true, .exit_code = 1, .reason = fmt::format("node {} was lost: {}", name, why)},
        now, effects);
  }
  ReleaseNode(job, rank, effects);
  job.reason_detail = fmt::format("--no-kill: went on without {} ({})", name, why);
  Changed(job, effects);
  return true;
}

bool Lifecycle::HoldForRepair(Job& job, NodeId node, std::string_view why, Millis now,
                              Effects& effects) {
  const std::string& name = topology_.NodeName(node);
  if (const int spare = SpareIndexOf(job, node); spare >= 0) {
    const alloc::NodeGrant grant = job.run.spares[static_cast<std::size_t>(spare)];
    job.run.spares.erase(job.run.spares.begin() + spare);
    pool_.Release({&grant, 1});
    book_.LetGo(node, job.id);
    effects.changed_nodes.push_back(node);
    triggers_.Released(job, node);
    job.reason_detail = fmt::format("its spare {} was lost ({}); {} spare{} left", name, why,
                                    job.run.spares.size(), job.run.spares.size() == 1 ? "" : "s");
    Changed(job, effects);
    return true;
  }
  const int rank = NodeRankOf(job, node);
  if (job.state != JobState::kRunning || IsSuspended(job) || rank < 0 ||
      job.run.released[static_cast<std::size_t>(rank)] != 0) {
    return false;
  }
  if (job.run.lost_ranks.empty()) {
    // The first loss: is a repair worth waiting for?
    if (job.request.spares == 0 && !job.request.requeue) return false;
    if (job.run.failure_restarts >= RestartCap(job).first) return false;
    const topology::GroupId group = topology_.GroupOf(node);
    const bool site_spare =
        group != topology::kNone &&
        std::any_of(topology_.Groups()[static_cast<std::size_t>(group)].nodes.begin(),
                    topology_.Groups()[static_cast<std::size_t>(group)].nodes.end(),
                    [&](NodeId n) { return topology_.IsSpare(n); });
    if (job.run.spares.empty() && !site_spare) return false;
    job.run.repair_at = now + kRepairSettle;
  }
  job.run.lost_ranks.push_back(rank);
  ReleaseNode(job, rank, effects);
  job.reason_detail =
      fmt::format("node {} was lost ({}); repairing the gang from spares", name, why);
  if (job.run.lost_reason.empty())
    job.run.lost_reason = fmt::format("node {} was lost: {}", name, why);
  Changed(job, effects);
  return true;
}

std::optional<Lifecycle::Replacement> Lifecycle::ChooseSpare(
    const Job& job, topology::GroupId group, bool inside, const std::vector<int>& own_taken,
    const std::vector<NodeId>& site_taken) const {
  const auto own_in = [&](bool same_group) -> std::optional<Replacement> {
    std::optional<Replacement> best;
    for (std::size_t i = 0; i < job.run.spares.size(); ++i) {
      const NodeId n = job.run.spares[i].node;
      if (std::find(own_taken.begin(), own_taken.end(), static_cast<int>(i)) != own_taken.end() ||
          pool_.Condition(n) == alloc::NodeCondition::kDown ||
          (same_group && topology_.GroupOf(n) != group)) {
        continue;
      }
      if (!best || topology_.OrderOf(n) < topology_.OrderOf(best->grant.node)) {
        best = Replacement{.grant = job.run.spares[i], .own = static_cast<int>(i)};
      }
    }
    return best;
  };
  if (!inside) return own_in(false);
  if (std::optional<Replacement> own = own_in(true)) return own;
  if (group != topology::kNone) {
    for (const NodeId n : topology_.Groups()[static_cast<std::size_t>(group)].nodes) {
      if (!topology_.IsSpare(n) || pool_.Condition(n) == alloc::NodeCondition::kDown ||
          std::find(site_taken.begin(), site_taken.end(), n) != site_taken.end() ||
          NodeRankOf(job, n) >= 0) {
        continue;
      }
      if (std::optional<alloc::NodeGrant> grant = alloc::GrantFor(job.gang, pool_, n)) {
        return Replacement{.grant = *grant, .own = -1};
      }
    }
  }
  return std::nullopt;
}

void Lifecycle::Repair(Job& job, Millis now, Effects& effects) {
  std::vector<int> lost = std::exchange(job.run.lost_ranks, {});
  const std::string why = std::exchange(job.run.lost_reason, {});
  job.run.repair_at = Millis{0};
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  const auto give_up = [&](std::string_view because) {
    job.run.exit_code = 1;
    job.reason = fmt::format("{}; not repaired: {}", why, because);
    Apply(job, JobEvent::kNodeLost, now, effects);
  };
  const auto [cap, source] = RestartCap(job);
  if (job.run.failure_restarts >= cap) {
    give_up(fmt::format("node failures restarted it {}, its cap ({})",
                        Times(job.run.failure_restarts), source));
    return;
  }
  // One spare for each lost rank: first, in the order of the ranks, one
  // inside the lost node's group (the job's own, then SpareNodes=), so that
  // no rank takes another's spare from its group; then, for the ranks left,
  // any spare of the job's own (inside its domain, where it was placed).
  std::vector<std::optional<Replacement>> picked(lost.size());
  std::vector<int> own_taken;
  std::vector<NodeId> site_taken;
  for (const bool inside : {true, false}) {
    for (std::size_t i = 0; i < lost.size(); ++i) {
      if (picked[i]) continue;
      const NodeId gone = job.run.placement.grants[static_cast<std::size_t>(lost[i])].node;
      picked[i] = ChooseSpare(job, topology_.GroupOf(gone), inside, own_taken, site_taken);
      if (!picked[i]) continue;
      if (picked[i]->own >= 0) {
        own_taken.push_back(picked[i]->own);
      } else {
        site_taken.push_back(picked[i]->grant.node);
      }
    }
  }
  std::vector<Replacement> chosen;
  for (std::size_t i = 0; i < lost.size(); ++i) {
    if (!picked[i]) {
      const NodeId gone = job.run.placement.grants[static_cast<std::size_t>(lost[i])].node;
      give_up(
          fmt::format("{} node{} lost and no spare left for {} (--spares={}; SpareNodes= of {})",
                      lost.size(), lost.size() == 1 ? "" : "s", topology_.NodeName(gone),
                      job.request.spares, alloc::GroupName(topology_, topology_.GroupOf(gone))));
      return;
    }
    chosen.push_back(*picked[i]);
  }
  const bool restart = RestartsOwnLaunch(job, lost);
  // With a restart, a node where the gang's ranks had all ended and that
  // was given back is held again, or the repair cannot be made.
  std::vector<std::size_t> rehold;
  for (std::size_t r = 0; restart && r < job.run.released.size(); ++r) {
    if (job.run.released[r] == 0 ||
        std::binary_search(lost.begin(), lost.end(), static_cast<int>(r)))
      continue;
    const alloc::NodeGrant& g = job.run.placement.grants[r];
    const alloc::NodeFree& free = pool_.Free(g.node);
    if (pool_.Condition(g.node) == alloc::NodeCondition::kDown || free.cpus < g.cpus ||
        free.memory_mb < g.memory_mb || (free.gpus & g.gpus) != g.gpus) {
      give_up(fmt::format("its share of {}, where its ranks had ended, was taken by another job",
                          topology_.NodeName(g.node)));
      return;
    }
    rehold.push_back(r);
  }
  RepairRecord record{.time = now,
                      .attempt = job.run.attempt + (restart ? 1 : 0),
                      .lost = {},
                      .replacement = {},
                      .node_ranks = lost,
                      .reason = why,
                      .restarted = {}};
  for (std::size_t i = 0; i < lost.size(); ++i) {
    record.lost.push_back(
        topology_.NodeName(job.run.placement.grants[static_cast<std::size_t>(lost[i])].node));
    record.replacement.push_back(topology_.NodeName(chosen[i].grant.node));
  }
  const std::string swapped = fmt::format("{} replaced by {}", fmt::join(record.lost, ","),
                                          fmt::join(record.replacement, ","));
  // The steps that end, while the lost nodes still hold their ranks: with
  // a restart every running one, else those with ranks on a lost node.
  std::vector<int> ended;
  for (const JobStep& step : job.run.steps) {
    if (step.state != StepState::kRunning) continue;
    const bool touched = std::any_of(
        step.placement.nodes.begin(), step.placement.nodes.end(), [&](const alloc::StepNode& n) {
          return std::binary_search(lost.begin(), lost.end(), n.node_rank);
        });
    if (restart || touched) ended.push_back(step.id);
  }
  const std::string step_reason =
      restart
          ? fmt::format("ended when the gang was repaired ({})", swapped)
          : fmt::format("{}; the allocation was repaired ({}): run the step again", why, swapped);
  for (const int step : ended) {
    // A step with ranks on a lost node fails for it (its other ranks are
    // stopped); one elsewhere is stopped, as the attempt it ran in ends.
    for (const int rank : lost) {
      Steps::NodeEnded(job, step, rank, {.failed = true, .exit_code = 1, .reason = step_reason},
                       now, effects);
    }
    for (JobStep& s : job.run.steps) {
      if (s.id != step || s.state != StepState::kRunning) continue;
      // Its ranks on the lost nodes are gone: it holds nothing of the
      // spares that take those node ranks while its other ranks stop.
      for (alloc::StepNode& n : s.placement.nodes) {
        if (!std::binary_search(lost.begin(), lost.end(), n.node_rank)) continue;
        n.cpus = 0;
        n.gpus = 0;
      }
      if (s.stopping) continue;
      s.reason = step_reason;
      COHORT_CHECK(Steps::Signal(job, step, 0, now, effects).ok(), "a running step stops");
    }
  }
  // A restart ends the attempt: its steps end with it, as accounting keeps them.
  if (restart) Steps::EndWithJob(job, now);
  PastAttempt past = PastOf(job, now);
  std::vector<int> used_own;
  for (std::size_t i = 0; i < lost.size(); ++i) {
    const auto rank = static_cast<std::size_t>(lost[i]);
    const Replacement& spare = chosen[i];
    if (spare.own >= 0) {
      used_own.push_back(spare.own);
    } else {
      pool_.Commit({&spare.grant, 1});
      book_.Holds(spare.grant.node, job.id);
    }
    job.run.placement.grants[rank] = spare.grant;
    job.run.released[rank] = 0;
    job.run.exited_ok[rank] = 0;
    effects.changed_nodes.push_back(spare.grant.node);
  }
  std::sort(used_own.begin(), used_own.end(), std::greater<>());
  for (const int i : used_own) job.run.spares.erase(job.run.spares.begin() + i);
  for (const std::size_t r : rehold) {
    const alloc::NodeGrant& g = job.run.placement.grants[r];
    pool_.Commit({&g, 1});
    book_.Holds(g.node, job.id);
    job.run.released[r] = 0;
    effects.changed_nodes.push_back(g.node);
  }
  ++job.run.failure_restarts;
  if (restart) {
    past.cause = EndCause::kNodeLostRequeue;
    past.reason = fmt::format("{}; repaired in place: {}", why, swapped);
    past.exit_code = 1;
    job.past_attempts.push_back(std::move(past));
    if (job.past_attempts.size() > kPastAttemptsKept) {
      job.past_attempts.erase(job.past_attempts.begin());
    }
    RestartOwnLaunch(job, effects);
    record.restarted =
        fmt::format("{} again as attempt {}", IsBatch(job) ? "the batch script" : "every rank",
                    job.run.attempt);
  } else {
    record.restarted = ended.empty()
                           ? std::string("nothing: no step ran on the lost nodes")
                           : fmt::format("nothing; step{} {} ended", ended.size() == 1 ? "" : "s",
                                         fmt::join(ended, ","));
  }
  job.reason_detail = fmt::format("repaired after {}: {}; started {} (restart {} of {})", why,
                                  swapped, record.restarted, job.run.failure_restarts, cap);
  job.repairs.push_back(std::move(record));
  if (job.repairs.size() > kRepairsKept) job.repairs.erase(job.repairs.begin());
  Changed(job, effects);
}

void Lifecycle::RestartOwnLaunch(Job& job, Effects& effects) {
  // The steps ended already (Repair): they went with the attempt.
  ++job.run.attempt;
  job.run.steps.clear();
  job.run.next_step = FirstStep(job);
  job.run.exit_code = 0;
  job.run.exit_signal = 0;
  job.run.own_usage = {};
  std::fill(job.run.exited_ok.begin(), job.run.exited_ok.end(), 0);
  job.run.master_port = MasterPort(job);
  // A newer attempt's launch stops what an older one left on the node
  // before it starts (the agents' rule): the ranks that survived the loss
  // end as the new ones start, and what they report is of an older attempt.
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    if (OwnRanksOn(job, static_cast<int>(rank)) == 0) continue;
    const alloc::NodeGrant& grant = job.run.placement.grants[rank];
    effects.commands.emplace_back(LaunchCommand{job.id, grant.node, static_cast<int>(rank), grant});
  }
}

void Lifecycle::CountOk(Job& job, int node_rank, int ranks_ok, Millis now, Effects& effects) {
  int& count = job.run.exited_ok[static_cast<std::size_t>(node_rank)];
  if (ranks_ok <= count) return;
  // A batch job's own launch is its script, one process on node rank 0.
  count = std::min(ranks_ok, OwnRanksOn(job, node_rank));
  if (RanksOk(job) == OwnRanks(job)) {
    Apply(job, JobEvent::kRanksSucceeded, now, effects);
  }
}

void Lifecycle::ApplyFinished(Job& job, NodeId node, int node_rank, const FinishedReport& report,
                              Millis now, Effects& effects) {
  if (!report.launch_error.empty()) {
    LaunchFailed(job.id, node, report.launch_error, now, effects);
  } else {
    CountOk(job, node_rank, report.ranks_ok, now, effects);
    if (report.failed) {
      const bool named = report.exit_code != 0 || report.signal != 0;
      RankExited(job.id, node, named ? report.exit_code : 1, report.signal, now, effects);
    }
  }
  JobReleased(job.id, node, now, effects);
}

void Lifecycle::Warn(Job& job, Effects& effects) {
  const TimeWarning& warning = job.request.warning;
  job.run.warned_attempt = job.run.attempt;
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    // B: is for the batch script, which is global rank 0, on node rank 0.
    if (warning.batch_only && rank > 0) break;
    // A node whose ranks all exited 0 has nothing left to warn.
    if (job.run.released[rank] != 0) continue;
    effects.commands.emplace_back(
        SignalCommand{job.id, job.run.placement.grants[rank].node, warning.signal,
                      warning.batch_only ? SignalScope::kBatch : SignalScope::kRanks});
  }
  job.reason_detail = fmt::format("sent {} to {} {} s before the time limit {} (--signal)",
                                  SignalName(warning.signal),
                                  warning.batch_only ? "the batch script (rank 0)" : "every rank",
                                  warning.before.count(), FormatSlurmTime(job.time_limit));
  Changed(job, effects);
}

void Lifecycle::SetReason(Job& job, PendingReason reason, std::string_view detail,
                          Effects& effects) {
  // A pending job's text is always its reason's name (every setter sets
  // both), so the enum and the detail decide whether anything changed.
  if (job.wait.reason == reason && job.reason_detail == detail) return;
  job.wait.reason = reason;
  job.reason = PendingReasonName(reason);
  job.reason_detail = detail;
  Changed(job, effects);
}

void Lifecycle::Start(Job& job, const alloc::Placement& placement, Millis now, Effects& effects) {
  triggers_.Started(job);
  pool_.Commit(placement.grants);
  job.run.imex_channels.clear();
  for (int i = ImexChannelsNeeded(job); i > 0; --i) {
    const std::optional<int> channel = imex_.Take();
    COHORT_CHECK(channel.has_value(), "a job started without the IMEX channels it needs");
    job.run.imex_channels.push_back(*channel);
  }
  job.run.placement = placement;
  SetSparesApart(job, effects);
  job.run.lost_ranks.clear();
  job.run.repair_at = Millis{0};
  job.run.released.assign(job.run.placement.grants.size(), 0);
  job.run.exited_ok.assign(job.run.placement.grants.size(), 0);
  job.run.start_time = now;
  job.cache.charged_until = now;
  ForgetPlan(job);
  job.wait.reason = PendingReason::kNone;
  job.reason = PendingReasonName(PendingReason::kNone);
  job.reason_detail.clear();
  job.run.exit_code = 0;
  job.run.exit_signal = 0;
  job.run.master_port = MasterPort(job);
  job.run.steps.clear();
  job.run.next_step = FirstStep(job);
  for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
    const alloc::NodeGrant& grant = job.run.placement.grants[rank];
    book_.Holds(grant.node, job.id);
    effects.changed_nodes.push_back(grant.node);
    // A batch script runs once, on the allocation's first node; an
    // allocation runs nothing of its own. Steps start when asked.
    if (OwnRanksOn(job, static_cast<int>(rank)) == 0) continue;
    effects.commands.emplace_back(LaunchCommand{job.id, grant.node, static_cast<int>(rank), grant});
  }
  Apply(job, JobEvent::kAllocated, now, effects);
}

void Lifecycle::SetSparesApart(Job& job, Effects& effects) {
  // The last nodes in topology order that are not required by name.
  job.run.spares.clear();
  std::vector<alloc::NodeGrant>& grants = job.run.placement.grants;
  const std::vector<NodeId>& required = job.gang.required_nodes;
  for (std::size_t i = grants.size();
       i-- > 0 && static_cast<int>(job.run.spares.size()) < job.gang.spares;) {
    if (std::find(required.begin(), required.end(), grants[i].node) != required.end()) continue;
    job.run.spares.push_back(grants[i]);
    grants.erase(grants.begin() + static_cast<std::ptrdiff_t>(i));
  }
  std::reverse(job.run.spares.begin(), job.run.spares.end());
  for (const alloc::NodeGrant& spare : job.run.spares) {
    book_.Holds(spare.node, job.id);
    effects.changed_nodes.push_back(spare.node);
  }
}

Job& Lifecycle::SplitTask(Job& array, Millis now, Effects& effects, int named) {
  std::vector<int>& pending = array.array.pending;
  const auto at = named < 0 ? pending.begin() : std::find(pending.begin(), pending.end(), named);
  COHORT_CHECK(at != pending.end(), "no such task left to split off");
  const int task = *at;
  pending.erase(at);
  if (array.array.pending.empty()) {
    // The last task takes the array's record, as in Slurm.
    array.array.task_id = task;
    Changed(array, effects);
    return array;
  }
  Job copy;
  copy.id = book_.TakeId();
  copy.request = array.request;
  copy.request.array.tasks.clear();  // the record keeps the spec; tasks need only their id
  copy.gang = array.gang;
  copy.time_limit = array.time_limit;
  copy.priority_tier = array.priority_tier;
  copy.submit_time = array.submit_time;
  copy.wait.eligible_time = array.wait.eligible_time;
  copy.qos = array.qos;
  copy.array.job_id = array.id;
  copy.array.task_id = task;
  copy.cache.priority = array.cache.priority;
  copy.cache.charged_until = now;
  const JobId id = copy.id;
  Job& split = book_.Add(std::move(copy), IsHeld(array) ? array.sub : JobSubstate::kNone, effects);
  book_.AddArrayTask(array.id, id);
  Changed(array, effects);
  Changed(split, effects);
  return split;
}

void Lifecycle::Tick(Millis now, Effects& effects) {
  // Stopping or warning a job changes the index being walked: walk a copy.
  const std::vector<Job*> active(book_.Active().begin(), book_.Active().end());
  for (Job* entry : active) {
    Job& job = *entry;
    if (job.sub == JobSubstate::kPreempting && now >= job.preemption.deadline) {
      continue;  // the end of its grace time is Preemption's (Preemption::Tick)
    }
    if (job.state == JobState::kRunning && !IsSuspended(job) && job.time_limit != kUnlimited &&
        now - job.run.start_time >= ToMillis(job.time_limit)) {
      job.reason = fmt::format("time limit {} reached", FormatSlurmTime(job.time_limit));
      Apply(job, JobEvent::kTimeLimit, now, effects);
    } else if (WarningDue(job, now)) {
      Warn(job, effects);
    }
  }
  for (Job* entry : active) {
    Job& job = *entry;
    // A job suspended meanwhile is repaired once it resumes: its grants
    // are its preemptor's until then.
    if (job.state == JobState::kRunning && !IsSuspended(job) && !job.run.lost_ranks.empty() &&
        now >= job.run.repair_at) {
      Repair(job, now, effects);
    }
  }
  const std::vector<Job*> waits(book_.SwitchWaits().begin(), book_.SwitchWaits().end());
  for (Job* job : waits) {
    if (now - job->submit_time >= ToMillis(job->request.switches_wait)) {
      // --switches=N@wait: past the wait the job takes any leaves.
      book_.EndSwitchWait(*job);
      triggers_.Note(Trigger::kSwitchWaitOver);
    }
  }
}

}  // namespace cohort::engine
