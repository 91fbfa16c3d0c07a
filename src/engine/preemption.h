// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "engine/engine_support.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

class JobBook;
class Lifecycle;
class PassTriggers;
class Prioritizer;

/// Preemption: which running jobs a waiting job of a higher tier or a
/// preempting QOS stops (the cheapest set under the lowest switch that then
/// holds it), their warning and grace time, how they stop (requeue, cancel,
/// suspend), and resuming suspended jobs.
class Preemption {
 public:
  /// The parts it uses, each of which outlives it.
  struct Parts {
    const config::ClusterConfig& config;
    const topology::Topology& topology;
    alloc::NodePool& pool;
    alloc::GangAllocator& allocator;
    JobBook& book;
    PassTriggers& triggers;
    Prioritizer& priority;
    Lifecycle& life;
  };
  explicit Preemption(const Parts& parts)
      : config_(parts.config),
        topology_(parts.topology),
        pool_(parts.pool),
        allocator_(parts.allocator),
        book_(parts.book),
        triggers_(parts.triggers),
        priority_(parts.priority),
        life_(parts.life) {}

  /// Victims whose grace time is over stop now.
  void Tick(Millis now, Effects& effects);

  /// Chooses victims for `job` and warns them; false when none would let it
  /// start. The victims' nodes are then the job's plan.
  /// `excluded`: nodes the job may not take (operators' reservations).
  bool TryPreempt(Job& job, const std::vector<NodeId>& excluded, Millis now, Effects& effects);
  /// Stops a victim as its mode says, `detail` recording how it ended.
  void StopVictim(Job& victim, const std::string& detail, Millis now, Effects& effects);
  /// A victim's rank died of the preemption warning, as a program that does
  /// not handle the signal does: the victim was preempted, not failed, and
  /// stops now as a REQUEUE or CANCEL victim. False, doing nothing, for any
  /// other exit, and for a SUSPEND victim (its other ranks could not resume
  /// without it).
  bool EndedOnWarning(Job& victim, NodeId node, int signal, Millis now, Effects& effects);
  /// Suspended jobs whose resources are free again resume (SIGCONT).
  void ResumeSuspended(Millis now, Effects& effects);
  /// At the start of a pass: the preemptors whose victims still stop go in
  /// `preemptors`; plans and victims of preemptors that no longer wait are
  /// dropped (the victims are spared).
  void Review(std::set<JobId>& preemptors, Millis now, Effects& effects);

  /// The nodes the preemptor's victims free for it; null without a plan.
  [[nodiscard]] const std::vector<NodeId>* PlanOf(JobId preemptor) const;
  /// The preemptor started: its plan is done.
  void Started(JobId preemptor) { plans_.erase(preemptor); }
  [[nodiscard]] bool HasPlans() const { return !plans_.empty(); }

  /// The victim's grace time: its QOS', else its partition's, else the
  /// cluster's PreemptGraceTime.
  [[nodiscard]] std::chrono::seconds GraceOf(const Job& job) const;

 private:
  [[nodiscard]] config::PreemptMode ModeOf(const Job& job) const;
  [[nodiscard]] int SignalOf(const Job& job) const;
  [[nodiscard]] bool MayPreempt(const Job& preemptor, const Job& victim, Millis now) const;
  struct Solution;
  [[nodiscard]] std::optional<Solution> ChooseVictims(const Job& job,
                                                      const std::vector<NodeId>& excluded,
                                                      Millis now);
  void Warn(Job& victim, const Job& preemptor, Millis now, Effects& effects);

  const config::ClusterConfig& config_;
  const topology::Topology& topology_;
  alloc::NodePool& pool_;
  alloc::GangAllocator& allocator_;
  JobBook& book_;
  PassTriggers& triggers_;
  Prioritizer& priority_;
  Lifecycle& life_;
  /// Preemptors whose victims are stopping: the nodes each will take.
  std::map<JobId, std::vector<NodeId>> plans_;
};

}  // namespace cohort::engine
