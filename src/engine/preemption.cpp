// SPDX-License-Identifier: Apache-2.0
#include "engine/preemption.h"

#include <signal.h>

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "cohort/engine/engine_types.h"
#include "cohort/fmt_absl.h"
#include "engine/job_book.h"
#include "engine/lifecycle.h"
#include "engine/pass_triggers.h"
#include "engine/prioritizer.h"

namespace cohort::engine {
namespace {

// Counts the nodes that may fit, and keeps the count as grants come and go.
class FitCounter {
 public:
  FitCounter(const alloc::GangRequest& gang, alloc::NodePool& pool) : gang_(gang), pool_(pool) {
    for (NodeId n = 0; n < pool.NodeCount(); ++n) {
      if (InPartition(n) && MayFit(gang, pool, n)) ++count_;
    }
  }
  void Release(const alloc::NodeGrant& grant) { Change(grant, true); }
  void Commit(const alloc::NodeGrant& grant) { Change(grant, false); }
  [[nodiscard]] bool Enough() const { return count_ >= gang_.nodes; }

 private:
  bool InPartition(NodeId n) const {
    return !gang_.partition || pool_.GetPartition(*gang_.partition).contains[n] != 0;
  }
  void Change(const alloc::NodeGrant& grant, bool release) {
    const bool counted = InPartition(grant.node);
    const bool before = counted && MayFit(gang_, pool_, grant.node);
    if (release) {
      pool_.Release({&grant, 1});
    } else {
      pool_.Commit({&grant, 1});
    }
    const bool after = counted && MayFit(gang_, pool_, grant.node);
    count_ += static_cast<int>(after) - static_cast<int>(before);
  }
  const alloc::GangRequest& gang_;
  alloc::NodePool& pool_;
  int count_ = 0;
};

// A victim's setting: its QOS', else its partition's, else the cluster's.
template <typename T>
T VictimSetting(const config::ClusterConfig& config, const Job& job,
                std::optional<T> config::QosSpec::*of_qos,
                std::optional<T> config::PartitionSpec::*of_partition, T cluster) {
  if (const config::QosSpec* qos = config.FindQos(job.qos); qos != nullptr && qos->*of_qos) {
    return *(qos->*of_qos);
  }
  if (const config::PartitionSpec* p = config.FindPartition(job.request.partition);
      p != nullptr && p->*of_partition) {
    return *(p->*of_partition);
  }
  return cluster;
}

}  // namespace

/// The victims chosen for one preemptor and where it then goes.
struct Preemption::Solution {
  int level = 0;
  double cost = 0;
  std::vector<Job*> victims;
  alloc::Placement placement;
};

config::PreemptMode Preemption::ModeOf(const Job& job) const {
  return VictimSetting(config_, job, &config::QosSpec::preempt_mode,
                       &config::PartitionSpec::preempt_mode, config_.preempt_mode);
}

std::chrono::seconds Preemption::GraceOf(const Job& job) const {
  return VictimSetting(config_, job, &config::QosSpec::grace_time,
                       &config::PartitionSpec::grace_time, config_.preempt_grace_time);
}

int Preemption::SignalOf(const Job& job) const {
  return VictimSetting(config_, job, &config::QosSpec::preempt_signal,
                       &config::PartitionSpec::preempt_signal, config_.preempt_signal);
}

const std::vector<NodeId>* Preemption::PlanOf(JobId preemptor) const {
  const auto it = plans_.find(preemptor);
  return it == plans_.end() ? nullptr : &it->second;
}

bool Preemption::MayPreempt(const Job& preemptor, const Job& victim, Millis now) const {
  const config::ClusterConfig& config = config_;
  if (config.preempt_mode == config::PreemptMode::kOff) return false;
  if (StatusOf(victim) != JobStatus{JobState::kRunning, JobSubstate::kNone}) return false;
  if (ModeOf(victim) == config::PreemptMode::kOff) return false;
  if (now - victim.run.start_time < ToMillis(config.preempt_exempt_time)) return false;
  if (victim.priority_tier < preemptor.priority_tier) return true;
  const config::QosSpec* qos = config.FindQos(preemptor.qos);
  return qos != nullptr &&
         std::find(qos->preempt.begin(), qos->preempt.end(), victim.qos) != qos->preempt.end();
}

std::optional<Preemption::Solution> Preemption::ChooseVictims(const Job& job,
                                                              const std::vector<NodeId>& excluded,
                                                              Millis now) {
  const topology::Topology& topology = topology_;
  struct Candidate {
    Job* job;
    double cost;  ///< resource-seconds lost if stopped now
    topology::SwitchId domain;
  };
  std::vector<Candidate> candidates;
  for (Job* entry : book_.Active()) {
    Job& other = *entry;
    if (!MayPreempt(job, other, now)) continue;
    const int gpus = GpusHeld(other);
    const double units = gpus > 0 ? gpus : CpusHeld(other);
    std::vector<NodeId> nodes;
    for (const alloc::NodeGrant& g : other.run.placement.grants) nodes.push_back(g.node);
    candidates.push_back(
        {&other, units * static_cast<double>((now - other.run.start_time).count()) / 1000.0,
         topology.HasSwitchTree() ? topology.LowestCommonSwitch(nodes) : topology::kNone});
  }
  if (candidates.empty()) return std::nullopt;
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.job->id < b.job->id;
  });

  // For each switch, lowest level first, release the cheapest victims under
  // it until the gang fits there; keep the cheapest solution of the lowest
  // level that has one. Without a switch tree, one domain holds everything.
  std::optional<Solution> best;
  alloc::NodePool shadow = pool_;
  alloc::GangRequest gang = job.gang;
  gang.excluded_nodes.insert(gang.excluded_nodes.end(), excluded.begin(), excluded.end());
  FitCounter fit(gang, shadow);
  auto under = [&](topology::SwitchId domain, topology::SwitchId s) {
    for (topology::SwitchId at = domain; at != topology::kNone;
         at = topology.GetSwitch(at).parent) {
      if (at == s) return true;
    }
    return false;
  };
  auto try_domain = [&](topology::SwitchId s, int level) {
    std::vector<Candidate*> released;
    for (Candidate& c : candidates) {
      if (s != topology::kNone && (c.domain == topology::kNone || !under(c.domain, s))) continue;
      for (const alloc::NodeGrant& g : HeldGrants(*c.job)) fit.Release(g);
      released.push_back(&c);
      if (!fit.Enough()) continue;
      const alloc::PlacementResult result =
          allocator_.Place(gang, shadow, alloc::GangAllocator::Classify::kNo);
      if (result.outcome != alloc::Outcome::kPlaced) continue;
      if (s != topology::kNone && !under(result.placement.domain, s)) continue;
      Solution solution{level, 0, {}, result.placement};
      for (Candidate* r : released) {
        if (Touches(*r->job, result.placement)) {
          solution.victims.push_back(r->job);
          solution.cost += r->cost;
        }
      }
      if (!best || solution.level < best->level ||
          (solution.level == best->level &&
           (solution.cost < best->cost ||
            (solution.cost == best->cost && solution.victims.size() < best->victims.size())))) {
        best = std::move(solution);
      }
      break;
    }
    for (Candidate* r : released) {
      for (const alloc::NodeGrant& g : HeldGrants(*r->job)) fit.Commit(g);
    }
  };
  if (topology.HasSwitchTree()) {
    for (const topology::SwitchId s : topology.SwitchesByLevel()) {
      const int level = topology.GetSwitch(s).level;
      if (best && level > best->level) break;
      if (topology.GetSwitch(s).node_count < job.gang.nodes) continue;
      try_domain(s, level);
    }
  } else {
    try_domain(topology::kNone, 0);
  }
  return best;
}

void Preemption::Warn(Job& victim, const Job& preemptor, Millis now, Effects& effects) {
  const std::chrono::seconds grace = GraceOf(victim);
  const int signal = SignalOf(victim);
  victim.preemption.by = preemptor.id;
  victim.preemption.deadline = now + ToMillis(grace);
  PreemptionRecord record;
  record.time = now;
  record.by_job = preemptor.id;
  record.by_display_id = DisplayId(preemptor);
  record.mode = std::string(config::PreemptModeName(ModeOf(victim)));
  record.attempt = victim.run.attempt;
  record.signal = signal;
  record.grace = grace;
  victim.preemption.records.push_back(std::move(record));
  victim.reason_detail = fmt::format(
      "being preempted by job {} ({}): sent {}, stops at {} unless it ends or runs cohort "
      "checkpoint-done first",
      DisplayId(preemptor), victim.preemption.records.back().mode, SignalName(signal),
      Hms(victim.preemption.deadline));
  if (signal != 0) {
    for (const alloc::NodeGrant& g : HeldGrants(victim)) {
      // The batch script too: it is what requeues or checkpoints a job that
      // runs its training itself.
      effects.commands.emplace_back(SignalCommand{victim.id, g.node, signal, SignalScope::kAll});
    }
  }
  life_.Apply(victim, JobEvent::kPreemptWarned, now, effects);
}

bool Preemption::TryPreempt(Job& job, const std::vector<NodeId>& excluded, Millis now,
                            Effects& effects) {
  if (config_.preempt_mode == config::PreemptMode::kOff) return false;
  std::optional<Solution> best = ChooseVictims(job, excluded, now);
  if (!best || best->victims.empty()) return false;
  std::vector<std::string> names;
  Millis deadline{0};
  for (Job* victim : best->victims) {
    Warn(*victim, job, now, effects);
    deadline = std::max(deadline, victim->preemption.deadline);
    names.push_back(DisplayId(*victim));
    if (GraceOf(*victim).count() == 0) {
      StopVictim(*victim, "stopped at once (no grace time)", now, effects);
    }
  }
  std::vector<NodeId>& plan = plans_[job.id];
  plan.clear();
  for (const alloc::NodeGrant& g : best->placement.grants) plan.push_back(g.node);
  std::sort(plan.begin(), plan.end());
  Lifecycle::SetReason(
      job, PendingReason::kResources,
      fmt::format("preempting job{} {}; they stop by {} at the latest",
                  names.size() == 1 ? "" : "s", fmt::join(names, ","), Hms(deadline)),
      effects);
  return true;
}

void Preemption::StopVictim(Job& victim, const std::string& detail, Millis now, Effects& effects) {
  if (victim.sub != JobSubstate::kPreempting) return;
  const config::PreemptMode mode = ModeOf(victim);
  if (!victim.preemption.records.empty()) victim.preemption.records.back().detail = detail;
  victim.preemption.deadline = Millis{0};
  const std::string by = fmt::format("preempted by job {}", victim.preemption.by);
  switch (mode) {
    case config::PreemptMode::kRequeue:
      victim.reason = by;
      life_.Apply(victim, JobEvent::kPreempted, now, effects);
      break;
    case config::PreemptMode::kSuspend:
      for (std::size_t rank = 0; rank < victim.run.placement.grants.size(); ++rank) {
        if (victim.run.released[rank] != 0) continue;
        const alloc::NodeGrant& g = victim.run.placement.grants[rank];
        effects.commands.emplace_back(SignalCommand{victim.id, g.node, SIGSTOP, SignalScope::kAll});
        pool_.Release({&g, 1});
        effects.changed_nodes.push_back(g.node);
      }
      priority_.Charge(victim, now);
      victim.preemption.suspended_since = now;
      victim.reason_detail = fmt::format("suspended (SIGSTOP): {}", by);
      triggers_.Note(Trigger::kSuspended);
      life_.Apply(victim, JobEvent::kSuspended, now, effects);
      break;
    case config::PreemptMode::kCancel:
    case config::PreemptMode::kOff:
      victim.reason = by;
      life_.Apply(victim, JobEvent::kCancelled, now, effects);
      break;
  }
}

bool Preemption::EndedOnWarning(Job& victim, NodeId node, int signal, Millis now,
                                Effects& effects) {
  if (victim.sub != JobSubstate::kPreempting || signal == 0 || victim.preemption.records.empty() ||
      signal != victim.preemption.records.back().signal ||
      ModeOf(victim) == config::PreemptMode::kSuspend) {
    return false;
  }
  StopVictim(victim,
             fmt::format("a rank on {} ended on the warning signal {}", topology_.NodeName(node),
                         SignalName(signal)),
             now, effects);
  return true;
}

// ------------------------------------------------------------- the pass

void Preemption::ResumeSuspended(Millis now, Effects& effects) {
  for (Job* entry : book_.Active()) {
    Job& job = *entry;
    if (StatusOf(job) != JobStatus{JobState::kRunning, JobSubstate::kSuspended}) continue;
    // Its preemptor waits for exactly these resources: not yet.
    if (const Job* preemptor = book_.Find(job.preemption.by);
        preemptor != nullptr && preemptor->state == JobState::kPending) {
      continue;
    }
    bool fits = true;
    for (std::size_t rank = 0; rank < job.run.placement.grants.size() && fits; ++rank) {
      if (job.run.released[rank] == 0) fits = pool_.Admits(job.run.placement.grants[rank]);
    }
    if (!fits) continue;
    for (std::size_t rank = 0; rank < job.run.placement.grants.size(); ++rank) {
      if (job.run.released[rank] != 0) continue;
      const alloc::NodeGrant& g = job.run.placement.grants[rank];
      pool_.Commit({&g, 1});
      effects.commands.emplace_back(SignalCommand{job.id, g.node, SIGCONT, SignalScope::kAll});
      effects.changed_nodes.push_back(g.node);
    }
    // Suspended time does not count against its limit.
    job.run.start_time += now - job.preemption.suspended_since;
    job.cache.charged_until = now;
    job.preemption.suspended_since = Millis{0};
    if (!job.preemption.records.empty()) {
      job.preemption.records.back().detail += fmt::format("; resumed at {}", Hms(now));
    }
    job.reason_detail = "resumed (SIGCONT) after its preemptor released the resources";
    life_.Apply(job, JobEvent::kResumed, now, effects);
  }
}

// ------------------------------------------------------------- backfill

void Preemption::Review(std::set<JobId>& preemptors, Millis now, Effects& effects) {
  for (const Job* job : book_.Active()) {
    // Victims still in their grace time, or stopping: their preemptor
    // waits for them and chooses no more.
    if (job->preemption.by != 0 &&
        (job->sub == JobSubstate::kPreempting || job->state == JobState::kCompleting)) {
      preemptors.insert(job->preemption.by);
    }
  }
  std::erase_if(plans_, [this](const auto& entry) {
    const Job* preemptor = book_.Find(entry.first);
    return preemptor == nullptr || preemptor->state != JobState::kPending;
  });
  // Victims whose preemptor no longer waits are spared.
  for (Job* entry : book_.Active()) {
    Job& job = *entry;
    if (job.sub != JobSubstate::kPreempting) continue;
    const Job* preemptor = book_.Find(job.preemption.by);
    if (preemptor == nullptr || preemptor->state != JobState::kPending) {
      job.preemption.deadline = Millis{0};
      if (!job.preemption.records.empty()) {
        job.preemption.records.back().detail = "called off: the preemptor no longer waits";
      }
      job.reason_detail.clear();
      life_.Apply(job, JobEvent::kPreemptCalledOff, now, effects);
    }
  }
}

void Preemption::Tick(Millis now, Effects& effects) {
  // Stopping a victim changes the index being walked: walk a copy.
  const std::vector<Job*> active(book_.Active().begin(), book_.Active().end());
  for (Job* job : active) {
    if (job->sub != JobSubstate::kPreempting || now < job->preemption.deadline) continue;
    StopVictim(*job,
               fmt::format("stopped at the end of its {} s grace time", GraceOf(*job).count()), now,
               effects);
  }
}

}  // namespace cohort::engine
