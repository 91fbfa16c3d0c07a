// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

/// What an account, or a user in an account, may hold and use: Slurm's
/// association limits, written as in slurm.conf and sacctmgr
/// (GrpTRES=gres/gpu=8,cpu=256). One parser serves cohort.conf's
/// AccountName lines and `sacctmgr add|modify`.
namespace cohort::config {

/// The largest count a TRES limit takes: bounds every sum made of it.
inline constexpr std::int64_t kMaxTresCount = 1'000'000'000'000;

/// Counts of the TRES Cohort limits: cpu, node and gres/gpu. Unset: no
/// limit on that TRES.
struct TresCounts {
  std::optional<std::int64_t> cpus;
  std::optional<std::int64_t> nodes;
  std::optional<std::int64_t> gpus;
  [[nodiscard]] bool Empty() const { return !cpus && !nodes && !gpus; }
  bool operator==(const TresCounts&) const = default;
};

/// An association's limits. At an account, the Grp limits bound the
/// account with every account under it; the Max limits bound each user of
/// the account and of the accounts under it that set none of their own
/// (Slurm's inheritance). At a user, they bound that user in that account.
struct AssocLimits {
  TresCounts grp_tres;                 ///< GrpTRES=: held at once by running jobs
  TresCounts grp_tres_mins;            ///< GrpTRESMins=: TRES-minutes used per usage period
  TresCounts max_tres_per_job;         ///< MaxTRESPerJob=
  std::optional<int> grp_jobs;         ///< GrpJobs=: running at once
  std::optional<int> max_jobs;         ///< MaxJobs=: running at once, per user
  std::optional<int> max_submit_jobs;  ///< MaxSubmitJobs=: pending and running, per user
  /// QOS=: the QOS its jobs may ask for; empty: those of the account above
  /// (at the top: every QOS). DefaultQOS=: a job's QOS when it names none;
  /// empty: the account above's, else the cluster's DefaultQOS.
  std::vector<std::string> qos;
  std::string default_qos;
  /// Whether some count, TRES or budget limit is set (what passes count).
  [[nodiscard]] bool HasQuota() const {
    return !grp_tres.Empty() || !grp_tres_mins.Empty() || !max_tres_per_job.Empty() || grp_jobs ||
           max_jobs || max_submit_jobs;
  }
  [[nodiscard]] bool Empty() const { return !HasQuota() && qos.empty() && default_qos.empty(); }
  bool operator==(const AssocLimits&) const = default;
};

/// Whether `key` (any case) is one of AssocLimits' keys.
[[nodiscard]] bool IsLimitKey(std::string_view key);

/// Sets the limit `key` (GrpTRES, GrpTRESMins, MaxTRESPerJob, GrpJobs,
/// MaxJobs, MaxSubmitJobs, QOS, QOS+, QOS-, DefaultQOS; any case) from
/// `value`. A TRES list changes only the TRES it names; a count of -1 (or
/// UNLIMITED for a plain count) clears a limit, as in sacctmgr; `QOS=` with
/// no names (or -1) clears the list, `QOS+=`/`QOS-=` add and remove names.
/// QOS names are checked for their form here, against the QOS defined by
/// the caller (CheckAccountQos). Bad input is refused with InvalidArgument
/// naming the key and the fix; `limits` is then unchanged.
[[nodiscard]] absl::Status SetLimit(std::string_view key, std::string_view value,
                                    AssocLimits& limits);

/// "cpu=256,node=4,gres/gpu=8" in Slurm's TRES order; empty when unset.
[[nodiscard]] std::string FormatTres(const TresCounts& counts);
/// Every set limit as `Key=value` words, space-separated.
[[nodiscard]] std::string FormatLimits(const AssocLimits& limits);

/// The limits of `inner` where set, else those of `outer`: a user's own
/// limits over its account's, an account's over its parent's.
[[nodiscard]] AssocLimits Overlay(const AssocLimits& inner, const AssocLimits& outer);

/// PriorityUsageResetPeriod=: when GrpTRESMins budgets start again.
enum class UsageResetPeriod : std::uint8_t {
  kNone,
  kDaily,
  kWeekly,
  kMonthly,
  kQuarterly,
  kYearly
};
[[nodiscard]] std::string_view UsageResetPeriodName(UsageResetPeriod period);  ///< NONE, MONTHLY…
[[nodiscard]] std::optional<UsageResetPeriod> ParseUsageResetPeriod(std::string_view name);

/// The start (UTC, ms since the epoch) of the usage period holding `now`;
/// 0 for kNone (budgets never start again). Weeks start on Monday.
[[nodiscard]] std::chrono::milliseconds PeriodStart(UsageResetPeriod period,
                                                    std::chrono::milliseconds now);
/// The start of the next period after the one holding `now`; 0 for kNone.
[[nodiscard]] std::chrono::milliseconds NextPeriodStart(UsageResetPeriod period,
                                                        std::chrono::milliseconds now);

}  // namespace cohort::config
