// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cohort/config/cluster_config.h"

/// Fair share: what each account (and each user within it) has used of the
/// cluster, in GPU-seconds (CPU-seconds for jobs that hold no GPU), decayed
/// with a half-life, and the factor that falls as an account uses more than
/// its share. Pure and deterministic: the caller passes `now`.
namespace cohort::policy {

using Millis = std::chrono::milliseconds;

/// One (account, user) usage as a store keeps it: the value decayed up to
/// `as_of`. An empty user is the account's own total.
struct UsageRecord {
  std::string account;
  std::string user;
  double usage = 0;  ///< resource-seconds, decayed to as_of
  Millis as_of{0};
  /// Undecayed use since the usage period began (GrpTRESMins budgets).
  double gpu_seconds = 0;
  double cpu_seconds = 0;
  Millis period_start{0};  ///< the period those count in
  /// Set: the record is a QOS's use this period (account and user empty;
  /// only the undecayed counts mean anything).
  std::string qos{};
};

/// What one charge adds: the fair-share amount (GPU-seconds, or
/// CPU-seconds for a job without GPUs) and, for budgets, both kinds.
struct Use {
  double resource_seconds = 0;
  double gpu_seconds = 0;
  double cpu_seconds = 0;
  Use& operator+=(const Use& o) {
    resource_seconds += o.resource_seconds;
    gpu_seconds += o.gpu_seconds;
    cpu_seconds += o.cpu_seconds;
    return *this;
  }
};

/// GPU- and CPU-seconds used in the current usage period.
struct PeriodUse {
  double gpu_seconds = 0;
  double cpu_seconds = 0;
};

/// One line of `cohort shares`.
struct ShareRow {
  std::string account;
  std::string user;        ///< empty: the account's line
  std::string parent;      ///< the account above (empty: the root); a user's: its account
  int depth = 0;           ///< 0 under the root; a user's line is one below its account
  int shares = 0;          ///< raw Shares= (1 when not configured)
  double norm_shares = 0;  ///< shares ÷ the sum over siblings, in [0, 1]
  double usage = 0;        ///< decayed resource-seconds at `now`
  double norm_usage = 0;   ///< usage ÷ the siblings' total usage, in [0, 1]
  double factor = 0;       ///< fair-share factor, in [0, 1]
};

/// Decayed usage per account and per user within an account.
///
/// Factor (Slurm's classic formula): F = 2^(−U/S), where S is the account's
/// normalised shares (its Shares= over the sum of every account's; an
/// account without an AccountName= line has 1 share and counts in the sum
/// once it has usage or asks) and U its normalised usage (its decayed usage
/// over all accounts' decayed usage; 0 when nothing has been used). With
/// per-user shares the user's factor is F_account × 2^(−u/s) with u, s the
/// user's normalised usage and shares inside the account, so the account
/// dominates. An account at exactly its share has F = 0.5; an idle one 1.
///
/// With accounts under accounts (Parent=), the factor multiplies one such
/// term per level, from the top: each account against its siblings, its
/// usage counting that of the accounts under it.
///
/// Beside the decayed usage it keeps what each account and user used, undecayed, since
/// the usage period (PriorityUsageResetPeriod=) began: the budgets of
/// GrpTRESMins= burn that down.
class FairShare {
 public:
  explicit FairShare(std::chrono::seconds half_life,
                     config::UsageResetPeriod period = config::UsageResetPeriod::kNone);

  /// Adds `use` by (account, user) at `now`. Earlier usage decays by
  /// 2^(−Δt / half_life) first; a new period zeroes the undecayed counts
  /// first. Negative or zero amounts are ignored; a `now` earlier than the
  /// last charge is treated as the last charge's time. An empty `user`
  /// charges the account only.
  void Charge(const std::string& account, const std::string& user, const Use& use, Millis now);
  /// Fair-share use only: `Charge` with no GPU or CPU split.
  void Charge(const std::string& account, const std::string& user, double resource_seconds,
              Millis now) {
    Charge(account, user, Use{.resource_seconds = resource_seconds}, now);
  }

  /// Adds the GPU- and CPU-seconds of `use` to the QOS's use this period
  /// (its GrpTRESMins budgets), with Charge's rules.
  void ChargeQos(const std::string& qos, const Use& use, Millis now);
  /// What the QOS's jobs used in the period holding `now`.
  [[nodiscard]] PeriodUse QosPeriodUse(const std::string& qos, Millis now) const;

  /// What the account itself (its jobs, not those of accounts under it)
  /// used in the period holding `now`.
  [[nodiscard]] PeriodUse AccountPeriodUse(const std::string& account, Millis now) const;
  /// What a user used in an account in the period holding `now`.
  [[nodiscard]] PeriodUse UserPeriodUse(const std::string& account, const std::string& user,
                                        Millis now) const;
  /// Every account with use in the period holding `now` (its own jobs').
  template <class Visit>
  void ForEachAccountPeriodUse(Millis now, Visit&& visit) const {
    if (!InPeriod(now)) return;
    for (const auto& [name, d] : accounts_) {
      if (d.gpu_seconds > 0 || d.cpu_seconds > 0)
        visit(name, PeriodUse{d.gpu_seconds, d.cpu_seconds});
    }
  }
  [[nodiscard]] config::UsageResetPeriod Period() const { return period_; }

  /// Decayed usage of the account (all its users) at `now`.
  [[nodiscard]] double Usage(const std::string& account, Millis now) const;
  /// Decayed usage of one user inside an account at `now`.
  [[nodiscard]] double UserUsage(const std::string& account, const std::string& user,
                                 Millis now) const;

  /// The fair-share factor in [0, 1] of a job of (account, user).
  [[nodiscard]] double Factor(const config::ClusterConfig& config, const std::string& account,
                              const std::string& user, Millis now) const;

  /// Every configured account, and every account or user with usage, as
  /// a tree: depth first from the root in name order, each account's line
  /// followed by its users' lines and then by its sub-accounts.
  [[nodiscard]] std::vector<ShareRow> Rows(const config::ClusterConfig& config, Millis now) const;

  /// What to persist: every (account, user) with usage, decayed to `now`
  /// (account totals have an empty user).
  [[nodiscard]] std::vector<UsageRecord> Snapshot(Millis now) const;
  /// Replaces all usage with what a Snapshot returned.
  void Restore(const std::vector<UsageRecord>& records);

 private:
  struct Decayed {
    double value = 0;
    Millis as_of{0};
    double gpu_seconds = 0;  ///< undecayed, this period
    double cpu_seconds = 0;
  };
  [[nodiscard]] double At(const Decayed& d, Millis now) const;
  void Add(Decayed& d, const Use& use, Millis now) const;
  /// Whether `now` lies in the period the undecayed counts are for.
  [[nodiscard]] bool InPeriod(Millis now) const {
    return config::PeriodStart(period_, now) <= period_start_;
  }
  /// Zeroes the undecayed counts when `now` is in a later period.
  void Roll(Millis now);
  [[nodiscard]] PeriodUse PeriodOf(const Decayed& d, Millis now) const {
    return InPeriod(now) ? PeriodUse{d.gpu_seconds, d.cpu_seconds} : PeriodUse{};
  }
  /// Decayed usage at `now` of every account with usage and of every
  /// account above one, counting the accounts under it.
  [[nodiscard]] std::map<std::string, double> SubtreeUsage(const config::ClusterConfig& config,
                                                           Millis now) const;
  /// One level of Factor: the account against its siblings.
  [[nodiscard]] double LevelFactor(const config::ClusterConfig& config,
                                   const std::map<std::string, double>& subtree,
                                   const std::string& account) const;
  /// The account's factor when no account has a parent.
  [[nodiscard]] double FlatFactor(const config::ClusterConfig& config, const std::string& account,
                                  Millis now) const;
  /// The account's factor: one level per account from the top down to it.
  [[nodiscard]] double TreeFactor(const config::ClusterConfig& config, const std::string& account,
                                  Millis now) const;
  /// The user's term within an account with UserShares=.
  [[nodiscard]] double UserFactor(const config::AccountSpec& spec, const std::string& account,
                                  const std::string& user, Millis now) const;
  void AddUserRows(const config::ClusterConfig& config, const ShareRow& account_row,
                   const std::set<std::string>& users, Millis now,
                   std::vector<ShareRow>& rows) const;

  std::chrono::seconds half_life_;
  config::UsageResetPeriod period_;
  Millis period_start_{0};
  std::map<std::string, Decayed> accounts_;
  std::map<std::pair<std::string, std::string>, Decayed> users_;
  std::map<std::string, PeriodUse, std::less<>> qos_;  ///< this period
};

}  // namespace cohort::policy
