// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cohort/alloc/node_pool.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/engine_types.h"
#include "cohort/engine/job.h"
#include "cohort/plugin.h"
#include "engine/pass_state.h"
#include "engine/quotas.h"
#include "engine/reservations.h"

namespace cohort {
struct Effects;
}

namespace cohort::engine {

class JobBook;
class Lifecycle;
class PassTriggers;

/// Whether a job may be queued (at submission) and tried now (in a pass):
/// partitions' and QOS' rules, holds, dependencies and array throttles, then
/// the admission checks cohort.conf chooses (AdmissionPlugins=).
class Admission {
 public:
  /// The parts it uses, each of which outlives it; `checks` are the
  /// admission checks cohort.conf chooses, in order.
  struct Parts {
    const config::ClusterConfig& config;
    const topology::Topology& topology;
    const alloc::NodePool& pool;
    const std::vector<std::shared_ptr<const plugin::AdmissionCheck>>& checks;
    JobBook& book;
    PassTriggers& triggers;
    Lifecycle& life;
    const policy::FairShare& usage;  ///< budgets' use (GrpTRESMins)
    const ReservationBook& reservations;
  };
  explicit Admission(const Parts& parts);

  /// Resolves a request against the configuration: partition, account and
  /// user rules, QOS, time limits, the gang. InvalidArgument names the field
  /// and the fix; PermissionDenied and FailedPrecondition say why not.
  [[nodiscard]] absl::StatusOr<Job> Resolve(JobRequest request) const;
  /// What a resolved job must meet to be queued: dependencies on known jobs,
  /// MaxSubmitJobsPerUser.
  [[nodiscard]] absl::Status CheckQueueing(const Job& job) const;
  /// The chosen admission checks' CheckSubmit for a resolved job, in order:
  /// the first refusal, else OkStatus.
  [[nodiscard]] absl::Status CheckSubmit(const Job& job, Millis now) const;
  /// Whether some chosen check may make jobs wait under the config: passes
  /// then count running totals and give up their shortcuts.
  [[nodiscard]] bool ChecksMayWait() const {
    return !waiting_checks_.empty() || quotas_.Active() || !reservations_.Empty();
  }
  /// The account tree's limits.
  [[nodiscard]] const Quotas& AccountLimits() const { return quotas_; }
  /// The accounts changed (sacctmgr): their limits are taken again.
  void AccountsChanged();

  /// Whether the job may be tried now; sets its pending reason when not. A
  /// job whose dependency can never hold and that asked to be killed then is
  /// cancelled.
  bool Eligible(Job& job, const PassCounts& counts, Millis now, Effects& effects);
  /// Sets a held job's reason: who holds it and who may release it.
  static void ShowHeld(Job& job, Effects& effects);

  /// A partition's state: an operator's where one is in force, else
  /// cohort.conf's State=.
  [[nodiscard]] config::PartitionState StateOf(const config::PartitionSpec& partition) const;
  /// The operator's setting in force for the partition, if any.
  [[nodiscard]] const PartitionAdmin* OverrideOf(std::string_view partition) const;
  /// An operator sets a partition's state; the state cohort.conf gives it
  /// takes the setting away. Whether queued jobs may now start.
  absl::StatusOr<bool> SetState(const std::string& partition, config::PartitionState state,
                                const Caller& caller, Millis now);
  [[nodiscard]] std::vector<PartitionAdmin> Overrides() const;
  /// Settings kept from before a restart; those of partitions gone, or equal
  /// to cohort.conf's now, are dropped.
  void RestoreOverrides(const std::vector<PartitionAdmin>& overrides);

 private:
  /// A job of a reservation: whether the reservation is active and holds the
  /// job's time limit (not needed with FLEX); sets the reason when not.
  bool ReservationWindowOpen(Job& job, Millis now, Effects& effects);
  /// 1: satisfied, 0: waiting, -1: can never be satisfied; `why` says which term.
  int DependencyStatus(Job& job, std::string& why);

  const config::ClusterConfig& config_;
  const topology::Topology& topology_;
  const alloc::NodePool& pool_;
  const std::vector<std::shared_ptr<const plugin::AdmissionCheck>>& checks_;
  JobBook& book_;
  PassTriggers& triggers_;
  Lifecycle& life_;
  /// The chosen checks that may make jobs wait under the config, in order;
  /// the only ones a pass asks.
  std::vector<std::shared_ptr<const plugin::AdmissionCheck>> waiting_checks_;
  std::vector<PartitionAdmin> overrides_;  ///< operators' partition states, by name
  /// Whether the pool's partition (by PartitionId) starts jobs now.
  std::vector<bool> starts_;
  Quotas quotas_;
  const ReservationBook& reservations_;
  void Recount();
};

}  // namespace cohort::engine
