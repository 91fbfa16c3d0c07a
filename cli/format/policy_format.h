// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cohort/v1/cohort.pb.h"

/// How `cohort priority` and `cohort shares` write the controller's
/// answers: tables as sprio and sshare print them, JSON with stable
/// snake_case names (cli/format/why_view.h writes `cohort why`). No I/O, no clock
/// (`now_ms` is a parameter), so that tests check the exact text.
namespace cohort::cli {

/// Which numbers `cohort priority` shows for each factor.
enum class PriorityValues {
  kWeighted,    ///< weight × factor, rounded to a whole number (sprio)
  kNormalised,  ///< the factor itself in [0, 1], 4 decimals (sprio -n)
};

/// The rows of `cohort priority`: the header JOBID USER ACCOUNT PARTITION
/// QOS PRIORITY AGE FAIRSHARE JOBSIZE PARTITION QOS (the first PARTITION and
/// QOS are names, the last two the factors), then a `Weights` row with the
/// configured weights under the factors, then one row per job in the
/// controller's order (highest total first). PRIORITY is the total.
[[nodiscard]] std::vector<std::vector<std::string>> PriorityRows(
    const v1::PriorityResponse& response, PriorityValues values);

/// `{"weights": {age, fairshare, job_size, partition, qos}, "jobs": [{id,
/// display_id, user, account, partition, qos, priority, age, fairshare,
/// job_size, partition_factor, qos_factor, age_raw, fairshare_raw,
/// job_size_raw, partition_raw, qos_raw}, ...]}`: weighted and raw values
/// as numbers, unrounded.
[[nodiscard]] nlohmann::ordered_json PrioritiesToJson(const v1::PriorityResponse& response);

/// The rows of `cohort shares`: the header Account User RawShares
/// NormShares RawUsage(GPU-h) NormUsage FairShare, then one row per account
/// and user in the controller's order. A user's row shows its account
/// indented by one blank under the account's own row (as sshare); usage is
/// in GPU-hours with 2 decimals, the normalised numbers and the factor with
/// 6.
[[nodiscard]] std::vector<std::vector<std::string>> SharesRows(const v1::SharesResponse& response);

/// `{"half_life_s": N, "rows": [{account, user (null: the account's own
/// row), shares, norm_shares, usage_gpu_seconds, norm_usage, fairshare},
/// ...]}`.
[[nodiscard]] nlohmann::ordered_json SharesToJson(const v1::SharesResponse& response);

/// The START_TIME of `cohort queue --start`: the pending job's expected
/// start as scontrol writes times, `N/A` when unknown (0).
[[nodiscard]] std::string ExpectedStartCell(const v1::Job& job);

}  // namespace cohort::cli
