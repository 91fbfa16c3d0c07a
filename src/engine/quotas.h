// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cohort/config/cluster_config.h"
#include "cohort/engine/job.h"
#include "cohort/plugin.h"
#include "cohort/policy/fair_share.h"

namespace cohort::engine {

/// What a set of running jobs holds, and what their time limits may still
/// burn of a budget.
struct AccountHeld {
  std::int64_t jobs = 0;
  std::int64_t cpus = 0;
  std::int64_t nodes = 0;
  std::int64_t gpus = 0;
  double promised_gpu_seconds = 0;  ///< GPUs × the time left to their limits
  double promised_cpu_seconds = 0;
};

/// One pass's totals for the account tree's limits: by account (with the
/// accounts under it) and by (account, uid).
struct QuotaTotals {
  std::vector<AccountHeld> accounts;  ///< by Quotas' index
  std::map<std::pair<int, std::uint32_t>, AccountHeld> users;
  /// Undecayed use this period, by account with the accounts under it;
  /// filled only where some limit is a budget (GrpTRESMins=).
  std::vector<policy::PeriodUse> spent;
  /// What each QOS's running jobs hold, by QOS name.
  std::map<std::string, AccountHeld, std::less<>> qos;
};

/// The account tree's limits (cohort.conf's AccountName lines and
/// sacctmgr's accounts and users) and the QOS' Grp limits: what they refuse
/// at submission, and what they make a pending job wait for. Grp limits
/// bound an account with every account under it; Max limits bound each
/// user, inherited down the tree and overridden by a user's own (Slurm's
/// association limits). A QOS's Grp limits bound all its jobs together.
class Quotas {
 public:
  /// `config` and `usage` outlive it.
  Quotas(const config::ClusterConfig& config, const policy::FairShare& usage);

  /// Takes the accounts as they are now: call after they change.
  void Reindex();
  /// Whether some account or user has a limit: passes then count.
  [[nodiscard]] bool Active() const { return active_; }

  /// Fresh totals for a pass at `now`: budgets' use so far.
  void Begin(QuotaTotals& totals, Millis now) const;
  /// A job starts (+1) or is counted as running at the start of a pass (+1).
  void Count(QuotaTotals& totals, const Job& job, int sign, Millis now) const;

  /// What the job can never pass: MaxTRESPerJob, or a Grp limit below the
  /// job, anywhere on its account's path. FailedPrecondition says which.
  [[nodiscard]] absl::Status CheckSubmit(const Job& job) const;
  /// MaxSubmitJobs in force for the job's user, if any.
  [[nodiscard]] std::optional<int> MaxSubmitJobs(const Job& job) const;
  /// MaxSubmitJobs: `queued` (the user's pending and running jobs in the
  /// job's account, array tasks counted) with the job's own.
  [[nodiscard]] absl::Status CheckQueueing(const Job& job, std::size_t queued) const;
  /// Why the job must wait now, if it must.
  [[nodiscard]] std::optional<plugin::Wait> Admit(const Job& job, const QuotaTotals& totals,
                                                  Millis now) const;

 private:
  /// The job's account's index, -1 when it has no AccountName.
  [[nodiscard]] int IndexOf(const std::string& account) const;
  /// The user's own limits in the account, if it has any.
  [[nodiscard]] const config::AssocLimits* UserLimits(int account, const std::string& user) const;
  /// The Max limits in force for the job's user: the user's own, then the
  /// nearest account's up the tree.
  [[nodiscard]] config::AssocLimits MaxLimits(const Job& job) const;
  /// A budget (GrpTRESMins) of `limits` that the job would overspend:
  /// `spent` this period, `held` what running jobs may still use.
  [[nodiscard]] std::optional<plugin::Wait> AdmitBudget(
      const Job& job, const config::AssocLimits& limits, const policy::PeriodUse& spent,
      const AccountHeld& held, const std::string& who, bool qos, Millis now) const;
  /// The job's QOS, where it has Grp or per-job limits.
  [[nodiscard]] const config::QosSpec* LimitedQos(const Job& job) const;

  const config::ClusterConfig& config_;
  const policy::FairShare& usage_;
  std::map<std::string, int, std::less<>> index_;
  std::vector<int> parent_;  ///< by index; -1: the root
  bool active_ = false;
  bool budgets_ = false;     ///< some GrpTRESMins=
  bool qos_limits_ = false;  ///< some QOS has Grp or per-job limits
};

}  // namespace cohort::engine
