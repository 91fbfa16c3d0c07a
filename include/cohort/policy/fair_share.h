// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <map>
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
};

/// One line of `cohort shares`.
struct ShareRow {
  std::string account;
  std::string user;        ///< empty: the account's line
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
class FairShare {
 public:
  explicit FairShare(std::chrono::seconds half_life);

  /// Adds `resource_seconds` of use by (account, user) at `now`.
  /// Earlier usage decays by 2^(−Δt / half_life) first. Negative or zero
  /// amounts are ignored; a `now` earlier than the last charge is treated as
  /// the last charge's time. An empty `user` charges the account only.
  void Charge(const std::string& account, const std::string& user, double resource_seconds,
              Millis now);

  /// Decayed usage of the account (all its users) at `now`.
  [[nodiscard]] double Usage(const std::string& account, Millis now) const;
  /// Decayed usage of one user inside an account at `now`.
  [[nodiscard]] double UserUsage(const std::string& account, const std::string& user,
                                 Millis now) const;

  /// The fair-share factor in [0, 1] of a job of (account, user).
  [[nodiscard]] double Factor(const config::ClusterConfig& config, const std::string& account,
                              const std::string& user, Millis now) const;

  /// Every configured account, and every account or user with usage, in
  /// name order: the account line followed by its users' lines.
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
  };
  [[nodiscard]] double At(const Decayed& d, Millis now) const;
  void Add(Decayed& d, double amount, Millis now) const;

  std::chrono::seconds half_life_;
  std::map<std::string, Decayed> accounts_;
  std::map<std::pair<std::string, std::string>, Decayed> users_;
};

}  // namespace cohort::policy
